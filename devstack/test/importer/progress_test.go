package importer

import (
	"bufio"
	"crypto/md5"
	"encoding/hex"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/d8virt/virtualization-controller/pkg/importer/contract"
)

func md5hex(b []byte) string {
	s := md5.Sum(b)
	return hex.EncodeToString(s[:])
}

// testProgress holds the source at half way and reads the importer's metrics there.
func testProgress(t *testing.T, f *fixture) {
	data := f.raw
	half := len(data) / 2
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Length", strconv.Itoa(len(data)))
		w.Write(data[:half])
		w.(http.Flusher).Flush()
		select {
		case <-release:
		case <-r.Context().Done():
			return
		}
		w.Write(data[half:])
	}))
	defer srv.Close()
	defer func() {
		select {
		case <-release:
		default:
			close(release)
		}
	}()

	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	out := filepath.Join(t.TempDir(), "disk.img")
	term := filepath.Join(t.TempDir(), "termination-log")
	cmd := exec.Command(f.importer, "--"+contract.FlagSourceURL, srv.URL+"/disk.img", "--"+contract.FlagDestinationFile, out,
		"--"+contract.FlagMetricsAddress, addr, "--"+contract.FlagTerminationMessagePath, term)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()

	ctx := contextTimeout(t, time.Minute)
	var metrics map[string]float64
	for {
		metrics, err = scrape("http://" + addr + contract.MetricsPath)
		if err == nil && metrics[contract.MetricReadBytes] >= float64(half) {
			break
		}
		select {
		case <-ctx.Done():
			t.Fatalf("the importer's metrics never showed half the source: %v %v", metrics, err)
		case err := <-done:
			t.Fatalf("the importer ended early: %v", err)
		case <-time.After(50 * time.Millisecond):
		}
	}
	if got := metrics[contract.MetricProgressRatio]; got < 0.49 || got > 0.51 {
		t.Errorf("%s = %v at half way", contract.MetricProgressRatio, got)
	}
	if got := metrics[contract.MetricSourceSizeBytes]; got != float64(len(data)) {
		t.Errorf("%s = %v, want %d", contract.MetricSourceSizeBytes, got, len(data))
	}
	if _, ok := metrics[contract.MetricSpeedBytes]; !ok {
		t.Errorf("no %s: %v", contract.MetricSpeedBytes, metrics)
	}
	if metrics[contract.MetricAverageSpeedBytes] <= 0 {
		t.Errorf("%s = %v", contract.MetricAverageSpeedBytes, metrics[contract.MetricAverageSpeedBytes])
	}
	close(release)
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("importer: %v", err)
		}
	case <-ctx.Done():
		t.Fatal("the importer did not finish")
	}
	b, _ := os.ReadFile(term)
	if res, err := contract.ParseResult(b); err != nil || res.Reason != contract.ReasonCompleted || res.UnpackedSize != int64(len(data)) {
		t.Fatalf("result %s: %v", b, err)
	}
}

// scrape reads a Prometheus text page into name -> value (series without labels).
func scrape(url string) (map[string]float64, error) {
	resp, err := http.Get(url)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("%s: %s", url, resp.Status)
	}
	m := map[string]float64{}
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "#") {
			continue
		}
		name, value, ok := strings.Cut(line, " ")
		if !ok {
			continue
		}
		if v, err := strconv.ParseFloat(value, 64); err == nil {
			m[name] = v
		}
	}
	return m, sc.Err()
}
