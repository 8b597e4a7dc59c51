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
	url, tokenFile, wrongFile, stop := startExporter(t, f, "--"+contract.FlagExportFile, disk)

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

// An exporter of an image in DVCR (in the module's namespace, with the puller's credentials)
// serves its disk to an importer that has only the token (in the disk's namespace): the copy
// is the image's disk; an exporter of an image that is not there ends at once, SourceNotFound.
func testExportImage(t *testing.T, f *fixture) {
	repo := "vi/ns1/exported:latest"
	if res, code := f.run(t, append([]string{"--" + contract.FlagSourceURL, f.url("disk.qcow2")}, f.toDVCR(repo)...)...); code != 0 {
		t.Fatalf("import into DVCR: exit %d, %+v", code, res)
	}
	dvcrArgs := []string{"--" + contract.FlagSourceAuthFile, f.pullAuth, "--" + contract.FlagSourceCABundle, f.caFile}
	url, tokenFile, _, stop := startExporter(t, f, append([]string{"--" + contract.FlagExportImage, f.PullAddr + "/" + repo}, dvcrArgs...)...)
	out := filepath.Join(t.TempDir(), "disk.img")
	res, code := f.run(t, "--"+contract.FlagSourceURL, url, "--"+contract.FlagSourceTokenFile, tokenFile, "--"+contract.FlagDestinationFile, out)
	if code != 0 || res.Format != contract.FormatQcow2 || res.UnpackedSize != int64(len(f.raw)) {
		t.Fatalf("import from the image's exporter: exit %d, %+v", code, res)
	}
	if got, err := os.ReadFile(out); err != nil || !bytes.Equal(got, f.raw) {
		t.Fatalf("the copy (%d bytes, %v) is not the image's disk (%d bytes raw)", len(got), err, len(f.raw))
	}
	if o := stop(); o.err != nil || o.code != 0 || o.res.Reason != contract.ReasonCompleted {
		t.Fatalf("the stopped exporter: exit %d, %+v, %v\n%s", o.code, o.res, o.err, o.stderr)
	}

	o := startImporter(context.Background(), f.importer, t.TempDir(), append([]string{"--" + contract.FlagExportImage, f.PullAddr + "/vi/ns1/missing:latest",
		"--" + contract.FlagExportTokenFile, tokenFile, "--" + contract.FlagExportAddress, testenv.FreeLoopbackAddr(t)}, dvcrArgs...)...)
	if o.err != nil || o.res.Reason != contract.ReasonSourceNotFound {
		t.Fatalf("an exporter of a missing image: exit %d, %+v, %v\n%s", o.code, o.res, o.err, o.stderr)
	}
}

// startExporter runs the importer as an exporter (args: what it exports) with a token of its own
// until the test ends or stop is called, and returns its URL, a file with its token, one with
// another token, and stop, which ends it and returns how it ended.
func startExporter(t *testing.T, f *fixture, args ...string) (url, tokenFile, wrongFile string, stop func() importerRun) {
	t.Helper()
	tokenFile, wrongFile = filepath.Join(t.TempDir(), "token"), filepath.Join(t.TempDir(), "wrong")
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
		done <- startImporter(ctx, f.importer, dir, append(args, "--"+contract.FlagExportAddress, addr, "--"+contract.FlagExportTokenFile, tokenFile)...)
	}()
	stopped := false
	stop = func() importerRun {
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
	return "http://" + addr + contract.ExportPath, tokenFile, wrongFile, stop
}
