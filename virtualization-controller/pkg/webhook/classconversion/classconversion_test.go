package classconversion

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/go-logr/logr"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

const v2class = `{"apiVersion":"virtualization.deckhouse.io/v1alpha2","kind":"VirtualMachineClass","metadata":{"name":"c"},` +
	`"spec":{"cpu":{"type":"Host"},"sizingPolicies":[{"cores":{"min":1,"max":4},"coreFractions":[5,50,100],"defaultCoreFraction":50}]},"status":{}}`

const v3class = `{"apiVersion":"virtualization.deckhouse.io/v1alpha3","kind":"VirtualMachineClass","metadata":{"name":"c"},` +
	`"spec":{"cpu":{"type":"Host"},"sizingPolicies":[{"cores":{"min":1,"max":4},"coreFractions":["05%","50%"],"defaultCoreFraction":"50%"}]},"status":{}}`

func TestHandlerRoundTrip(t *testing.T) {
	h := NewHandler(logr.Discard())
	for _, tc := range []struct {
		name, in, via, back string
	}{
		{name: "v1alpha2 via v1alpha3", in: v2class, via: "virtualization.deckhouse.io/v1alpha3", back: "virtualization.deckhouse.io/v1alpha2"},
		{name: "v1alpha3 via v1alpha2 (a fraction without an integer form)", in: v3class, via: "virtualization.deckhouse.io/v1alpha2", back: "virtualization.deckhouse.io/v1alpha3"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			mid := review(t, h, tc.via, tc.in)
			if !strings.Contains(mid, `"apiVersion":"`+tc.via+`"`) {
				t.Fatalf("converted: %s", mid)
			}
			back := review(t, h, tc.back, mid)
			if !jsonEqual(t, back, tc.in) {
				t.Fatalf("round trip:\n got %s\nwant %s", back, tc.in)
			}
		})
	}
}

func TestHandlerFailures(t *testing.T) {
	h := NewHandler(logr.Discard())
	for _, tc := range []struct{ name, desired, obj, want string }{
		{name: "other kind", desired: "virtualization.deckhouse.io/v1alpha3", obj: `{"apiVersion":"v1","kind":"Pod"}`, want: `objects[0]: kind "Pod": only VirtualMachineClass is converted`},
		{name: "unknown version", desired: "virtualization.deckhouse.io/v9", obj: v2class, want: `objects[0]: desired apiVersion "virtualization.deckhouse.io/v9"`},
		{name: "bad annotation", desired: "virtualization.deckhouse.io/v1alpha3",
			obj:  `{"apiVersion":"virtualization.deckhouse.io/v1alpha2","kind":"VirtualMachineClass","metadata":{"name":"c","annotations":{"virtualization.deckhouse.io/v1alpha3-core-fractions":"{"}},"spec":{"cpu":{"type":"Host"}}}`,
			want: "annotation virtualization.deckhouse.io/v1alpha3-core-fractions"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp := post(t, h, tc.desired, tc.obj)
			if resp.Result.Status != metav1.StatusFailure || !strings.Contains(resp.Result.Message, tc.want) || resp.UID != "uid-1" {
				t.Fatalf("response %+v, want a failure with %q", resp, tc.want)
			}
		})
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, Path, strings.NewReader("{")))
	if rec.Code != http.StatusBadRequest {
		t.Fatalf("a bad body: %d", rec.Code)
	}
}

func FuzzConvert(f *testing.F) {
	f.Add([]byte(v2class), true)
	f.Add([]byte(v3class), false)
	f.Fuzz(func(t *testing.T, raw []byte, toV3 bool) {
		desired, other := "virtualization.deckhouse.io/v1alpha2", "virtualization.deckhouse.io/v1alpha3"
		if toV3 {
			desired, other = other, desired
		}
		out, err := Convert(raw, desired)
		if err != nil || bytes.Equal(out, raw) {
			return // not converted, or already in the desired version (passed as it is)
		}
		// What converted once converts back without an error.
		if _, err := Convert(out, other); err != nil {
			t.Fatalf("converting %s back: %v", out, err)
		}
	})
}

func review(t *testing.T, h http.Handler, desired, obj string) string {
	t.Helper()
	resp := post(t, h, desired, obj)
	if resp.Result.Status != metav1.StatusSuccess || len(resp.ConvertedObjects) != 1 {
		t.Fatalf("response %+v", resp)
	}
	return string(resp.ConvertedObjects[0].Raw)
}

func post(t *testing.T, h http.Handler, desired, obj string) *apiextensionsv1.ConversionResponse {
	t.Helper()
	in := apiextensionsv1.ConversionReview{
		TypeMeta: metav1.TypeMeta{APIVersion: "apiextensions.k8s.io/v1", Kind: "ConversionReview"},
		Request: &apiextensionsv1.ConversionRequest{UID: "uid-1", DesiredAPIVersion: desired,
			Objects: []runtime.RawExtension{{Raw: []byte(obj)}}},
	}
	body, _ := json.Marshal(in)
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, Path, bytes.NewReader(body)))
	var out apiextensionsv1.ConversionReview
	if err := json.Unmarshal(rec.Body.Bytes(), &out); err != nil || out.Response == nil {
		t.Fatalf("status %d, body %s: %v", rec.Code, rec.Body, err)
	}
	return out.Response
}

func jsonEqual(t *testing.T, a, b string) bool {
	t.Helper()
	var x, y any
	if err := json.Unmarshal([]byte(a), &x); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal([]byte(b), &y); err != nil {
		t.Fatal(err)
	}
	xa, _ := json.Marshal(x)
	ya, _ := json.Marshal(y)
	return bytes.Equal(xa, ya)
}
