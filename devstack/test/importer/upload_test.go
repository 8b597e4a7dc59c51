package importer

import (
	"bytes"
	"context"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/d8virt/devstack/testenv"
	"github.com/d8virt/virtualization-controller/pkg/importer/contract"
	"github.com/d8virt/virtualization-controller/pkg/importerprogress"
)

// curlUpload is `curl -T file -H "Authorization: Bearer token" url`: the HTTP status and body.
func curlUpload(t *testing.T, file, token, url string) (string, string) {
	t.Helper()
	out, err := exec.Command("curl", "-sS", "-T", file, "-H", "Authorization: Bearer "+token, "-w", "\n%{http_code}", url).CombinedOutput()
	if err != nil {
		t.Fatalf("curl: %v: %s", err, out)
	}
	s := strings.TrimSpace(string(out))
	i := strings.LastIndex(s, "\n")
	return s[i+1:], strings.TrimSpace(s[:max(i, 0)])
}

// An upload source: the importer waits for `curl -T`, refuses a wrong token, takes the right
// one into DVCR and answers the uploader; an upload that never comes times out.
func testUpload(t *testing.T, f *fixture) {
	t.Run("curl -T into DVCR", func(t *testing.T) {
		addr, tokenFile := testenv.FreeLoopbackAddr(t), filepath.Join(t.TempDir(), "token")
		if err := os.WriteFile(tokenFile, []byte("right-token\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		// The importer runs in a goroutine that never touches t; if the test fails first, the
		// cleanup stops the importer and waits for it, before its directory goes.
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan importerRun, 1)
		dir := t.TempDir()
		go func() {
			done <- startImporter(ctx, f.importer, dir, append([]string{"--" + contract.FlagSourceUploadAddress, addr, "--" + contract.FlagUploadTokenFile, tokenFile},
				f.toDVCR("vi/ns1/uploaded:latest")...)...)
		}()
		var o importerRun
		waited := false
		t.Cleanup(func() {
			cancel()
			if !waited {
				o = <-done
				t.Logf("importer: exit %d, %s, %v\n%s", o.code, o.message, o.err, o.stderr)
			}
		})
		url := "http://" + addr + contract.UploadPath
		disk := filepath.Join(f.dir, "disk.qcow2")
		deadline := time.Now().Add(30 * time.Second)
		for {
			c, err := net.Dial("tcp", addr)
			if err == nil {
				c.Close()
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("the importer does not listen at %s", addr)
			}
			time.Sleep(50 * time.Millisecond)
		}
		if code, body := curlUpload(t, disk, "wrong-token", url); code != "403" || !strings.Contains(body, "not this image's upload token") {
			t.Fatalf("wrong token: %s %s", code, body)
		}
		if code, body := curlUpload(t, disk, "right-token", url); code != "200" || body != "imported" {
			t.Fatalf("upload: %s %s", code, body)
		}
		o, waited = <-done, true
		if o.err != nil {
			t.Fatal(o.err)
		}
		if o.code != 0 || o.res.Format != contract.FormatQcow2 || o.res.SourceSize != int64(len(f.files["disk.qcow2"])) {
			t.Fatalf("exit %d: %+v\n%s", o.code, o.res, o.stderr)
		}
		files, err := f.pull(t, "vi/ns1/uploaded:latest", f.puller())
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(files["disk/disk.qcow2"], f.files["disk.qcow2"]) {
			t.Fatal("the pulled disk is not the uploaded one")
		}
	})
	t.Run("staged, then exported", func(t *testing.T) {
		// A VirtualDisk's upload without a size: the stager takes it into a file, answers the
		// upload, shows the staged size in its metrics and serves the file to an importer.
		uploadAddr, metricsAddr, uploadToken := testenv.FreeLoopbackAddr(t), testenv.FreeLoopbackAddr(t), filepath.Join(t.TempDir(), "upload-token")
		if err := os.WriteFile(uploadToken, []byte("upload-token\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		staged := filepath.Join(t.TempDir(), "disk.img")
		url, tokenFile, _, stop := startExporter(t, f, "--"+contract.FlagSourceUploadAddress, uploadAddr, "--"+contract.FlagUploadTokenFile, uploadToken,
			"--"+contract.FlagDestinationFile, staged, "--"+contract.FlagThenExport, "--"+contract.FlagMetricsAddress, metricsAddr)
		var code, body string
		for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(100 * time.Millisecond) {
			if c, err := net.Dial("tcp", uploadAddr); err == nil {
				c.Close()
				break
			} else if time.Now().After(deadline) {
				t.Fatalf("the stager does not listen at %s", uploadAddr)
			}
		}
		if code, body = curlUpload(t, filepath.Join(f.dir, "disk.qcow2"), "upload-token", "http://"+uploadAddr+contract.UploadPath); code != "200" || body != "imported" {
			t.Fatalf("upload: %s %s", code, body)
		}
		resp, err := http.Get("http://" + metricsAddr + contract.MetricsPath)
		if err != nil {
			t.Fatal(err)
		}
		p, err := importerprogress.Parse(resp.Body)
		resp.Body.Close()
		if err != nil || p.Staged == nil || p.Staged.UnpackedBytes != int64(len(f.raw)) || p.Staged.Format != contract.FormatQcow2 || p.Staged.CDROM {
			t.Fatalf("staged %+v, %v", p.Staged, err)
		}
		out := filepath.Join(t.TempDir(), "disk.img")
		res, rc := f.run(t, "--"+contract.FlagSourceURL, url, "--"+contract.FlagSourceTokenFile, tokenFile, "--"+contract.FlagDestinationFile, out)
		if rc != 0 || res.UnpackedSize != int64(len(f.raw)) {
			t.Fatalf("import from the stager: exit %d, %+v", rc, res)
		}
		if got, err := os.ReadFile(out); err != nil || !bytes.Equal(got, f.raw) {
			t.Fatalf("the copy (%d bytes, %v) is not the uploaded disk (%d bytes raw)", len(got), err, len(f.raw))
		}
		if o := stop(); o.err != nil || o.code != 0 || o.res.Reason != contract.ReasonCompleted || o.res.Format != contract.FormatQcow2 {
			t.Fatalf("the stopped stager: exit %d, %+v, %v\n%s", o.code, o.res, o.err, o.stderr)
		}
	})
	t.Run("no upload", func(t *testing.T) {
		tokenFile := filepath.Join(t.TempDir(), "token")
		if err := os.WriteFile(tokenFile, []byte("t"), 0o600); err != nil {
			t.Fatal(err)
		}
		res, code := f.run(t, append([]string{"--" + contract.FlagSourceUploadAddress, testenv.FreeLoopbackAddr(t), "--" + contract.FlagUploadTokenFile, tokenFile,
			"--" + contract.FlagUploadTimeout, "1s"}, f.toDVCR("vi/ns1/never:latest")...)...)
		if res.Reason != contract.ReasonUploadTimeout || code != contract.ExitCode(contract.ReasonUploadTimeout) || !strings.Contains(res.Message, "no upload began within 1s") {
			t.Fatalf("exit %d: %+v", code, res)
		}
		if _, err := f.pull(t, "vi/ns1/never:latest", f.puller()); err == nil {
			t.Fatal("a timed-out upload left a tag")
		}
	})
}
