package checksum

import (
	"strings"
	"testing"

	"github.com/d8virt/virtualization-controller/pkg/importer/contract"
)

// Sums of "hello\n".
const (
	md5Hello    = "b1946ac92492d2347c6235b4d2611184"
	sha1Hello   = "f572d396fae9206628714fb2ce00f72e94f2258f"
	sha256Hello = "5891b5b522d5df086d0ff0b110fbd9d21bb4fc7163af34d08286a2e846f6be03"
	sha512Hello = "e7c22b994c59d9cf2b48e549b1e24666636045930d3da7c1acb299d1c3b7f931f94aae41edda2c2b207a36e10f8bcb8d45223e54878f5b316e7ce3b6bc019629"
)

func TestVerifier(t *testing.T) {
	cases := []struct {
		name     string
		want     map[string]string
		data     string
		newErr   string // New fails with ReasonInvalidArguments mentioning it
		mismatch string // Verify fails with ReasonChecksumMismatch mentioning it
	}{
		{name: "none", want: nil, data: "anything"},
		{name: "md5", want: map[string]string{"md5": md5Hello}, data: "hello\n"},
		{name: "sha1", want: map[string]string{"sha1": sha1Hello}, data: "hello\n"},
		{name: "sha256 upper case", want: map[string]string{"sha256": strings.ToUpper(sha256Hello)}, data: "hello\n"},
		{name: "sha512", want: map[string]string{"sha512": sha512Hello}, data: "hello\n"},
		{name: "all four", want: map[string]string{"md5": md5Hello, "sha1": sha1Hello, "sha256": sha256Hello, "sha512": sha512Hello}, data: "hello\n"},
		{name: "empty value skipped", want: map[string]string{"md5": "", "sha256": sha256Hello}, data: "hello\n"},
		{name: "sha256 mismatch", want: map[string]string{"sha256": sha256Hello}, data: "hello", mismatch: "sha256 checksum of the downloaded file is 2cf24dba"},
		{name: "one of two wrong", want: map[string]string{"md5": md5Hello, "sha1": sha1Hello}, data: "bye\n", mismatch: "md5"},
		{name: "short", want: map[string]string{"sha256": "abcd"}, newErr: "is not 64 hex digits"},
		{name: "not hex", want: map[string]string{"md5": strings.Repeat("z", 32)}, newErr: "md5"},
		{name: "unknown algorithm", want: map[string]string{"crc32": "00000000"}, newErr: "unknown algorithm"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			v, err := New(tc.want)
			if tc.newErr != "" {
				if contract.ReasonOf(err) != contract.ReasonInvalidArguments || !strings.Contains(err.Error(), tc.newErr) {
					t.Fatalf("New = %v, want %s mentioning %q", err, contract.ReasonInvalidArguments, tc.newErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			// Written in pieces, as a stream arrives.
			for _, c := range []byte(tc.data) {
				v.Write([]byte{c})
			}
			err = v.Verify()
			if tc.mismatch == "" {
				if err != nil {
					t.Fatalf("Verify: %v", err)
				}
				return
			}
			if contract.ReasonOf(err) != contract.ReasonChecksumMismatch || !strings.Contains(err.Error(), tc.mismatch) {
				t.Fatalf("Verify = %v, want %s mentioning %q", err, contract.ReasonChecksumMismatch, tc.mismatch)
			}
		})
	}
}
