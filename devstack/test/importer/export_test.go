package importer

import (
	"bytes"
	"context"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/d8virt/devstack/testenv"
	"github.com/d8virt/virtualization-controller/pkg/importer/contract"
)

// An exporter serves a disk file to an importer that bears its token: one importer copies the
// guest's raw disk from another into a file (as an image is made from a VirtualDisk's claim, or
// a disk from a disk's claim with --source-file); a wrong token is SourceForbidden; the exporter
// ends Completed when it is stopped.
func testExport(t *testing.T, f *fixture) {
	disk := filepath.Join(f.dir, "disk.img")
	tokenFile, wrongFile := filepath.Join(t.TempDir(), "token"), filepath.Join(t.TempDir(), "wrong")
	for file, token := range map[string]string{tokenFile: "export-token\n", wrongFile: "guess\n"} {
		if err := os.WriteFile(file, []byte(token), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	addr := testenv.FreeLoopbackAddr(t)
	// The exporter runs in a goroutine that never touches t; the cleanup stops it and waits.
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan importerRun, 1)
	dir := t.TempDir()
	go func() {
		done <- startImporter(ctx, f.importer, dir, "--"+contract.FlagExportFile, disk, "--"+contract.FlagExportAddress, addr,
			"--"+contract.FlagExportTokenFile, tokenFile)
	}()
	stopped := false
	stop := func() importerRun {
		cancel()
		stopped = true
		return <-done
	}
	t.Cleanup(func() {
		if !stopped {
			o := stop()
			t.Logf("exporter: exit %d, %s, %v\n%s", o.code, o.message, o.err, o.stderr)
		}
	})
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		c, err := net.Dial("tcp", addr)
		if err == nil {
			c.Close()
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the exporter does not listen at %s: %v", addr, err)
		}
	}
	url := "http://" + addr + contract.ExportPath

	out := filepath.Join(t.TempDir(), "disk.img")
	res, code := f.run(t, "--"+contract.FlagSourceURL, url, "--"+contract.FlagSourceTokenFile, tokenFile, "--"+contract.FlagDestinationFile, out)
	if code != 0 || res.Format != contract.FormatRaw || res.UnpackedSize != int64(len(f.raw)) {
		t.Fatalf("import from the exporter: exit %d, %+v", code, res)
	}
	if got, err := os.ReadFile(out); err != nil || !bytes.Equal(got, f.raw) {
		t.Fatalf("the copy (%d bytes, %v) is not the exported disk (%d bytes)", len(got), err, len(f.raw))
	}
	res, code = f.run(t, "--"+contract.FlagSourceURL, url, "--"+contract.FlagSourceTokenFile, wrongFile, "--"+contract.FlagDestinationFile, filepath.Join(t.TempDir(), "disk.img"))
	if code != contract.ExitCode(contract.ReasonSourceForbidden) || res.Reason != contract.ReasonSourceForbidden {
		t.Fatalf("a wrong token: exit %d, %+v", code, res)
	}
	// The same disk read in place, as a copy's importer reads the source's claim.
	out = filepath.Join(t.TempDir(), "disk.img")
	if res, code := f.run(t, "--"+contract.FlagSourceFile, disk, "--"+contract.FlagDestinationFile, out); code != 0 || res.UnpackedSize != int64(len(f.raw)) {
		t.Fatalf("--source-file: exit %d, %+v", code, res)
	}
	if o := stop(); o.err != nil || o.code != 0 || o.res.Reason != contract.ReasonCompleted {
		t.Fatalf("the stopped exporter: exit %d, %+v, %v\n%s", o.code, o.res, o.err, o.stderr)
	}
}
