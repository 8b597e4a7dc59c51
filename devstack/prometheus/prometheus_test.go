package prometheus

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// The client reads Prometheus' API envelopes; a stand-in server answers as Prometheus does.
func TestClient(t *testing.T) {
	answers := map[string]string{
		"/api/v1/targets": `{"status":"success","data":{"activeTargets":[{"scrapePool":"serviceMonitor/ns/a/0","scrapeUrl":"https://10.0.0.2:8444/metrics","health":"up","lastError":"","labels":{"job":"a-metrics"}}]}}`,
		"/api/v1/query":   `{"status":"success","data":{"resultType":"vector","result":[{"metric":{"__name__":"up"},"value":[1.5,"1"]}]}}`,
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/api/v1/query" && r.URL.Query().Get("query") == "bad(" {
			w.WriteHeader(http.StatusBadRequest)
			_, _ = w.Write([]byte(`{"status":"error","errorType":"bad_data","error":"parse error"}`))
			return
		}
		if r.URL.Path == "/api/v1/query" && r.URL.Query().Get("query") == "scalar(1)" {
			_, _ = w.Write([]byte(`{"status":"success","data":{"resultType":"scalar","result":[1,"1"]}}`))
			return
		}
		_, _ = w.Write([]byte(answers[r.URL.Path]))
	}))
	defer srv.Close()
	c := Client{URL: srv.URL, HTTP: srv.Client()}
	ctx := context.Background()

	targets, err := c.Targets(ctx)
	if err != nil || len(targets) != 1 || targets[0].Health != "up" || targets[0].Labels["job"] != "a-metrics" {
		t.Errorf("targets %+v, %v", targets, err)
	}
	res, err := c.Query(ctx, "up")
	if err != nil || len(res) != 1 || res[0].Metric["__name__"] != "up" || res[0].Value[1] != "1" {
		t.Errorf("query %+v, %v", res, err)
	}
	for q, want := range map[string]string{"bad(": "400 Bad Request: parse error", "scalar(1)": "a scalar, not a vector"} {
		if _, err := c.Query(ctx, q); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("query %s: %v, want %q", q, err, want)
		}
	}
}

func TestComponent(t *testing.T) {
	s := Server{bin: "/usr/bin/prometheus", dir: "/d", addr: "127.0.0.1:9999"}
	c := s.Component()
	if c.Bin != "/usr/bin/prometheus" || c.Ready == nil || s.URL() != "http://127.0.0.1:9999" {
		t.Errorf("%+v", c)
	}
	want := []string{"--config.file=/d/prometheus.yml", "--storage.tsdb.path=/d/data", "--storage.tsdb.retention.time=1h", "--web.listen-address=127.0.0.1:9999"}
	if strings.Join(c.Args, " ") != strings.Join(want, " ") {
		t.Errorf("args %v", c.Args)
	}
}
