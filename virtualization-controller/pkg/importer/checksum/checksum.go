// Package checksum verifies md5, sha1, sha256 and sha512 checksums of a stream while it is read:
// a Verifier is an io.Writer to tee the stream into, and Verify compares at the end.
package checksum

import (
	"crypto/md5"
	"crypto/sha1"
	"crypto/sha256"
	"crypto/sha512"
	"encoding/hex"
	"hash"
	"io"
	"strings"

	"github.com/d8virt/virtualization-controller/pkg/importer/contract"
)

// Algorithms, by the name the API and the importer's flags give them.
var algorithms = map[string]struct {
	new  func() hash.Hash
	size int
}{
	"md5":    {md5.New, md5.Size},
	"sha1":   {sha1.New, sha1.Size},
	"sha256": {sha256.New, sha256.Size},
	"sha512": {sha512.New, sha512.Size},
}

type expected struct {
	algorithm string
	want      string
	h         hash.Hash
}

// Verifier hashes what is written to it with every algorithm it expects a checksum of.
type Verifier struct {
	expected []expected
	w        io.Writer
}

// New expects, per algorithm name (md5, sha1, sha256, sha512), a hex checksum; empty values are
// skipped. A bad name or a malformed checksum is a ReasonInvalidArguments error naming it.
func New(want map[string]string) (*Verifier, error) {
	v := &Verifier{}
	var writers []io.Writer
	for _, name := range []string{"md5", "sha1", "sha256", "sha512"} {
		sum := strings.ToLower(strings.TrimSpace(want[name]))
		if sum == "" {
			continue
		}
		alg := algorithms[name]
		if b, err := hex.DecodeString(sum); err != nil || len(b) != alg.size {
			return nil, contract.Errorf(contract.ReasonInvalidArguments, "checksum %s: %q is not %d hex digits", name, want[name], 2*alg.size)
		}
		h := alg.new()
		v.expected = append(v.expected, expected{name, sum, h})
		writers = append(writers, h)
	}
	for name := range want {
		if _, ok := algorithms[name]; !ok {
			return nil, contract.Errorf(contract.ReasonInvalidArguments, "checksum %s: unknown algorithm (md5, sha1, sha256, sha512)", name)
		}
	}
	v.w = io.MultiWriter(writers...)
	return v, nil
}

// Write hashes p; it never fails.
func (v *Verifier) Write(p []byte) (int, error) { return v.w.Write(p) }

// Verify compares every checksum with what was written: a ReasonChecksumMismatch error names the
// algorithm, the expected and the real sum.
func (v *Verifier) Verify() error {
	for _, e := range v.expected {
		if got := hex.EncodeToString(e.h.Sum(nil)); got != e.want {
			return contract.Errorf(contract.ReasonChecksumMismatch, "the %s checksum of the downloaded file is %s, but %s was expected: check the checksum or the URL", e.algorithm, got, e.want)
		}
	}
	return nil
}
