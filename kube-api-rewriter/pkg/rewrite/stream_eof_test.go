package rewrite

import (
	"bytes"
	"strings"
	"testing"
	"testing/iotest"

	"github.com/d8virt/kube-api-rewriter/pkg/rules"
)

// net/http hands over the last bytes of a body with a known length together with io.EOF; a
// complete document read that way is complete, and a cut one is still an error.
func TestObjectStreamDataWithEOF(t *testing.T) {
	rw := New(rules.Default())
	for _, tc := range []struct {
		name, in string
		wantErr  bool
	}{
		{"object", `{"apiVersion":"internal.virtualization.deckhouse.io/v1","kind":"InternalVirtualizationVirtualMachine","metadata":{"name":"a"}}`, false},
		{"list", `{"kind":"List","apiVersion":"v1","items":[{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p"}}]}`, false},
		{"cut object", `{"apiVersion":"v1","kind":"Pod","metadata":{"name":`, true},
		{"cut list", `{"kind":"List","apiVersion":"v1","items":[{"apiVersion":"v1"`, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var out bytes.Buffer
			err := rw.ObjectStream(Restore, &out, iotest.DataErrReader(strings.NewReader(tc.in)), Target{})
			if (err != nil) != tc.wantErr {
				t.Fatalf("err = %v, want error %v (output %q)", err, tc.wantErr, out.String())
			}
			if !tc.wantErr && !strings.Contains(out.String(), `"name":`) {
				t.Fatalf("output %q", out.String())
			}
		})
	}
}
