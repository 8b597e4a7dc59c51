package unpack

import (
	"bytes"
	"compress/gzip"
	"errors"
	"io"
	"math/rand/v2"
	"testing"

	"github.com/ulikunitz/xz"

	"github.com/d8virt/virtualization-controller/pkg/importer/contract"
	"github.com/d8virt/virtualization-controller/pkg/importer/detect"
)

func gz(t *testing.T, b []byte) []byte {
	var buf bytes.Buffer
	w := gzip.NewWriter(&buf)
	w.Write(b)
	w.Close()
	return buf.Bytes()
}

func xzed(t *testing.T, b []byte) []byte {
	var buf bytes.Buffer
	w, err := xz.NewWriter(&buf)
	if err != nil {
		t.Fatal(err)
	}
	w.Write(b)
	w.Close()
	return buf.Bytes()
}

// failing is a source that breaks after its data, as a network stream does.
type failing struct {
	r   io.Reader
	err error
}

func (f failing) Read(p []byte) (int, error) {
	n, err := f.r.Read(p)
	if err == io.EOF {
		return n, f.err
	}
	return n, err
}

func TestReader(t *testing.T) {
	data := make([]byte, 3<<20)
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range data[:1<<20] { // some entropy, the rest zeros: a disk
		data[i] = byte(rng.Uint32())
	}
	gzData, xzData := gz(t, data), xzed(t, data)
	netErr := contract.Errorf(contract.ReasonSourceFailed, "connection reset")
	cases := []struct {
		name   string
		c      detect.Compression
		in     io.Reader
		want   []byte
		reason contract.Reason // the Read error's reason, if any
	}{
		{name: "none", c: detect.None, in: bytes.NewReader(data), want: data},
		{name: "gzip", c: detect.Gzip, in: bytes.NewReader(gzData), want: data},
		{name: "gzip two members", c: detect.Gzip, in: io.MultiReader(bytes.NewReader(gz(t, data[:100])), bytes.NewReader(gz(t, data[100:]))), want: data},
		{name: "xz", c: detect.XZ, in: bytes.NewReader(xzData), want: data},
		{name: "gzip truncated", c: detect.Gzip, in: bytes.NewReader(gzData[:len(gzData)/2]), reason: contract.ReasonNotDiskImage},
		{name: "xz truncated", c: detect.XZ, in: bytes.NewReader(xzData[:len(xzData)/2]), reason: contract.ReasonNotDiskImage},
		{name: "gzip corrupt", c: detect.Gzip, in: bytes.NewReader(append(gzData[:20:20], bytes.Repeat([]byte{0xff}, 100)...)), reason: contract.ReasonNotDiskImage},
		{name: "gzip source fails", c: detect.Gzip, in: failing{bytes.NewReader(gzData[:len(gzData)/2]), netErr}, reason: contract.ReasonSourceFailed},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r, err := Reader(tc.c, tc.in)
			if err == nil {
				var got []byte
				got, err = io.ReadAll(r)
				if err == nil && !bytes.Equal(got, tc.want) {
					t.Fatalf("got %d bytes, not the %d written", len(got), len(tc.want))
				}
			}
			if tc.reason == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if contract.ReasonOf(err) != tc.reason {
				t.Fatalf("err = %v (%s), want %s", err, contract.ReasonOf(err), tc.reason)
			}
			if tc.reason == contract.ReasonSourceFailed && !errors.Is(err, netErr) {
				t.Fatalf("the source's error is lost: %v", err)
			}
		})
	}
}
