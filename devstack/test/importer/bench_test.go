package importer

import (
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/d8virt/virtualization-controller/pkg/importer/contract"
)

// benchDisk writes a 1 GiB raw disk: 4 MiB of random data, 4 MiB of zeros, and so on (half
// data, half never-written space, as a freshly installed system's disk).
func benchDisk(b *testing.B, path string) {
	b.Helper()
	f, err := os.Create(path)
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	rng := rand.New(rand.NewPCG(7, 11))
	chunk := make([]byte, 4<<20)
	for off := int64(0); off < 1<<30; off += 2 * int64(len(chunk)) {
		for i := 0; i < len(chunk); i += 8 {
			v := rng.Uint64()
			for j := range 8 {
				chunk[i+j] = byte(v >> (8 * j))
			}
		}
		if _, err := f.WriteAt(chunk, off); err != nil {
			b.Fatal(err)
		}
	}
	if err := f.Truncate(1 << 30); err != nil {
		b.Fatal(err)
	}
}

// BenchmarkImport1GiB imports a 1 GiB raw disk from a local HTTP server into a file (a PVC's
// disk.img) and into DVCR, each next to its baseline in the same run: `curl -o` to a scratch
// file, then `qemu-img convert` of it into the format the destination holds (raw, qcow2).
// qemu-img cannot read a pipe, so `curl | qemu-img convert` is this two-step form. The DVCR
// baseline does not push: the ratio shows what the push costs. Targets: file 1.2x, DVCR 1.3x.
func BenchmarkImport1GiB(b *testing.B) {
	importer := buildImporter(b)
	reg := startDVCR(b)
	dir := b.TempDir()
	benchDisk(b, filepath.Join(dir, "disk.img"))
	if out, err := exec.Command("sync").CombinedOutput(); err != nil { // no writeback of it during the runs
		b.Fatalf("sync: %v: %s", err, out)
	}
	srv := httptest.NewServer(http.FileServer(http.Dir(dir)))
	defer srv.Close()
	url := srv.URL + "/disk.img"
	work := b.TempDir()

	// Each step starts with nothing dirty in the page cache: a step is not throttled by the
	// write-back of the one before it (both sides write 1.5 GiB or more a run).
	timed := func(name string, fn func() error) time.Duration {
		os.RemoveAll(work)
		os.MkdirAll(work, 0o755)
		if out, err := exec.Command("sync").CombinedOutput(); err != nil {
			b.Fatalf("sync: %v: %s", err, out)
		}
		start := time.Now()
		if err := fn(); err != nil {
			b.Fatalf("%s: %v", name, err)
		}
		return time.Since(start)
	}
	baseline := func(format string) func() error {
		return func() error {
			scratch, out := filepath.Join(work, "scratch.img"), filepath.Join(work, "out."+format)
			if o, err := exec.Command("curl", "-sSf", "-o", scratch, url).CombinedOutput(); err != nil {
				return fmt.Errorf("curl: %w: %s", err, o)
			}
			if o, err := exec.Command("qemu-img", "convert", "-f", "raw", "-O", format, scratch, out).CombinedOutput(); err != nil {
				return fmt.Errorf("qemu-img: %w: %s", err, o)
			}
			return nil
		}
	}
	run := func(args ...string) func() error {
		return func() error {
			args = append([]string{"--" + contract.FlagSourceURL, url}, args...)
			if res, code := runImporter(b, importer, args...); code != 0 {
				return fmt.Errorf("exit %d: %+v", code, res)
			}
			return nil
		}
	}
	var sum [4]time.Duration
	b.ResetTimer()
	for i := range b.N {
		sum[0] += timed("baseline raw", baseline(contract.FormatRaw))
		sum[1] += timed("importer to a file", run("--"+contract.FlagDestinationFile, filepath.Join(work, "disk.img")))
		sum[2] += timed("baseline qcow2", baseline(contract.FormatQcow2))
		sum[3] += timed("importer to DVCR", run(reg.toDVCR(fmt.Sprintf("cvi/bench-%d:latest", i))...))
	}
	b.StopTimer()
	n := time.Duration(b.N)
	fileRatio := float64(sum[1]) / float64(sum[0])
	dvcrRatio := float64(sum[3]) / float64(sum[2])
	b.ReportMetric(sum[0].Seconds()/float64(b.N), "s-baseline-raw")
	b.ReportMetric(sum[1].Seconds()/float64(b.N), "s-file")
	b.ReportMetric(sum[2].Seconds()/float64(b.N), "s-baseline-qcow2")
	b.ReportMetric(sum[3].Seconds()/float64(b.N), "s-dvcr")
	b.ReportMetric(fileRatio, "x-file")
	b.ReportMetric(dvcrRatio, "x-dvcr")
	fmt.Printf("import of 1 GiB raw over HTTP, per run (%d runs):\n"+
		"  into a file: importer %v, curl + qemu-img convert -O raw   %v: %.2fx (target 1.2x)\n"+
		"  into DVCR:   importer %v, curl + qemu-img convert -O qcow2 %v: %.2fx (target 1.3x)\n",
		b.N, (sum[1] / n).Round(time.Millisecond), (sum[0] / n).Round(time.Millisecond), fileRatio,
		(sum[3] / n).Round(time.Millisecond), (sum[2] / n).Round(time.Millisecond), dvcrRatio)
}
