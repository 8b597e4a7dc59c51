package convert

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/d8virt/virtualization-controller/pkg/importer/contract"
)

// The real qemu-img (qemu-utils): these tests need it.
func qemuImg(t *testing.T) QemuImg {
	p, err := exec.LookPath("qemu-img")
	if err != nil {
		t.Skip("qemu-img is not installed (apt-get install qemu-utils)")
	}
	return QemuImg{Path: p}
}

func TestConvertRoundTrip(t *testing.T) {
	q, ctx, dir := qemuImg(t), context.Background(), t.TempDir()
	raw := filepath.Join(dir, "disk.img")
	data := bytes.Repeat([]byte("disk"), 1<<18) // 1 MiB
	if err := os.WriteFile(raw, data, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, format := range []string{contract.FormatQcow2, contract.FormatVMDK, contract.FormatVDI} {
		t.Run(format, func(t *testing.T) {
			img := filepath.Join(dir, "disk."+format)
			if err := q.Convert(ctx, raw, contract.FormatRaw, img, format, false); err != nil {
				t.Fatal(err)
			}
			info, err := q.Info(ctx, img, format)
			if err != nil {
				t.Fatal(err)
			}
			if info.Format != format || info.VirtualSize != int64(len(data)) {
				t.Fatalf("info %+v", info)
			}
			back := filepath.Join(dir, "back-"+format+".img")
			if err := q.Convert(ctx, img, format, back, contract.FormatRaw, false); err != nil {
				t.Fatal(err)
			}
			if got, _ := os.ReadFile(back); !bytes.Equal(got, data) {
				t.Fatal("the round trip changed the disk")
			}
		})
	}
}

func TestRefusals(t *testing.T) {
	q, ctx, dir := qemuImg(t), context.Background(), t.TempDir()
	base := filepath.Join(dir, "base.qcow2")
	overlay := filepath.Join(dir, "overlay.qcow2")
	text := filepath.Join(dir, "text.qcow2")
	for _, args := range [][]string{
		{"create", "-f", "qcow2", base, "1M"},
		{"create", "-f", "qcow2", "-b", base, "-F", "qcow2", overlay},
	} {
		if out, err := exec.Command(q.Path, args...).CombinedOutput(); err != nil {
			t.Fatalf("%v: %s", err, out)
		}
	}
	os.WriteFile(text, []byte("QFI\xfb but not really"), 0o600)
	truncated := filepath.Join(dir, "truncated.qcow2")
	b, _ := os.ReadFile(base)
	os.WriteFile(truncated, b[:100], 0o600)

	cases := []struct {
		name   string
		run    func() error
		reason contract.Reason
		msg    string
	}{
		{"backing file", func() error { _, err := q.Info(ctx, overlay, contract.FormatQcow2); return err }, contract.ReasonUnsupportedFormat, "backing file"},
		{"not qcow2", func() error { _, err := q.Info(ctx, text, contract.FormatQcow2); return err }, contract.ReasonNotDiskImage, "qemu-img cannot read it"},
		{"truncated", func() error { return q.Check(ctx, truncated) }, contract.ReasonNotDiskImage, "damaged"},
		{"sound", func() error { return q.Check(ctx, base) }, "", ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.run()
			if tc.reason == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if contract.ReasonOf(err) != tc.reason || !strings.Contains(err.Error(), tc.msg) {
				t.Fatalf("err = %v, want %s mentioning %q", err, tc.reason, tc.msg)
			}
		})
	}
}
