// Command importer imports one disk image (contract.Flag*): from an HTTP(S) URL or a registry
// image, into DVCR or into a file or block device. It serves its progress as Prometheus metrics
// while it runs and writes a contract.Result to its termination message path when it ends; its
// exit code is contract.ExitCode of the result's reason.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/d8virt/logopts"
	"github.com/d8virt/virtualization-controller/pkg/importer"
	"github.com/d8virt/virtualization-controller/pkg/importer/cabundle"
	"github.com/d8virt/virtualization-controller/pkg/importer/checksum"
	"github.com/d8virt/virtualization-controller/pkg/importer/contract"
	"github.com/d8virt/virtualization-controller/pkg/importer/convert"
	"github.com/d8virt/virtualization-controller/pkg/importer/destination"
	exporter "github.com/d8virt/virtualization-controller/pkg/importer/export"
	"github.com/d8virt/virtualization-controller/pkg/importer/progress"
	"github.com/d8virt/virtualization-controller/pkg/importer/registryauth"
	"github.com/d8virt/virtualization-controller/pkg/importer/source"
)

type options struct {
	sourceURL, sourceImage, sourceCA, sourceAuth string
	sourceTokenFile, sourceFile                  string
	exportFile, exportImage                      string
	exportAddress, exportTokenFile               string
	thenExport                                   bool
	uploadAddress, uploadTokenFile               string
	uploadTimeout                                time.Duration
	sums                                         map[string]*string
	destImage, destCA, destAuth, destFile        string
	capacity                                     int64
	inspect                                      bool
	scratch, metrics, termination                string
	retries                                      int
	log                                          logopts.Options
}

// parse reads flags, with the environment (contract.EnvPrefix) for flags not given.
func parse(args []string, getenv func(string) string) (options, error) {
	o := options{sums: map[string]*string{}, log: logopts.Default()}
	fs := flag.NewFlagSet("importer", flag.ContinueOnError)
	fs.StringVar(&o.sourceURL, contract.FlagSourceURL, "", "HTTP(S) URL of the disk image (raw, qcow2, vmdk, vdi, ISO; maybe gz or xz)")
	fs.StringVar(&o.sourceImage, contract.FlagSourceImage, "", "container-disk image to read the disk/ file of")
	fs.StringVar(&o.sourceCA, contract.FlagSourceCABundle, "", "PEM file of CAs trusted for the source")
	fs.StringVar(&o.sourceAuth, contract.FlagSourceAuthFile, "", ".dockerconfigjson file for the source image")
	fs.StringVar(&o.sourceFile, contract.FlagSourceFile, "", "disk file or block device to read (raw)")
	fs.StringVar(&o.sourceTokenFile, contract.FlagSourceTokenFile, "", "file with the bearer token for the source URL's requests")
	fs.StringVar(&o.exportFile, contract.FlagExportFile, "", "serve this disk file or block device to an importer instead of importing")
	fs.StringVar(&o.exportImage, contract.FlagExportImage, "", "serve the disk of this container-disk image to an importer instead of importing (with --"+contract.FlagSourceAuthFile+" and --"+contract.FlagSourceCABundle+")")
	fs.StringVar(&o.exportAddress, contract.FlagExportAddress, ":8090", "address the export is served at ("+contract.ExportPath+")")
	fs.StringVar(&o.exportTokenFile, contract.FlagExportTokenFile, "", "file with the token the export's requests must bear")
	fs.BoolVar(&o.thenExport, contract.FlagThenExport, false, "after importing into --"+contract.FlagDestinationFile+", serve that file as an exporter until stopped")
	fs.StringVar(&o.uploadAddress, contract.FlagSourceUploadAddress, "", "address to wait for the user's upload at ("+contract.UploadPath+")")
	fs.StringVar(&o.uploadTokenFile, contract.FlagUploadTokenFile, "", "file with the token the upload must bear")
	fs.DurationVar(&o.uploadTimeout, contract.FlagUploadTimeout, time.Hour, "how long to wait for the upload to begin")
	for _, alg := range []string{contract.FlagMD5, contract.FlagSHA1, contract.FlagSHA256, contract.FlagSHA512} {
		o.sums[alg] = fs.String(alg, "", "expected "+alg+" of the source as served (hex)")
	}
	fs.StringVar(&o.destImage, contract.FlagDestinationImage, "", "DVCR image to push the container disk to")
	fs.StringVar(&o.destCA, contract.FlagDestinationCABundle, "", "PEM file of DVCR's CA")
	fs.StringVar(&o.destAuth, contract.FlagDestinationAuthFile, "", ".dockerconfigjson file with DVCR's push credentials")
	fs.StringVar(&o.destFile, contract.FlagDestinationFile, "", "raw disk file to create, or block device to write")
	fs.Int64Var(&o.capacity, contract.FlagCapacity, 0, "the disk's size: most bytes the unpacked disk may have, and the size of a destination file (0: the block device's size, or no limit)")
	fs.BoolVar(&o.inspect, contract.FlagInspect, false, "learn the source's format and unpacked size without storing it (no destination)")
	fs.StringVar(&o.scratch, contract.FlagScratchDir, os.TempDir(), "directory for images that need qemu-img")
	fs.StringVar(&o.metrics, contract.FlagMetricsAddress, contract.DefaultMetricsAddress, "address of the progress metrics ("+contract.MetricsPath+")")
	fs.StringVar(&o.termination, contract.FlagTerminationMessagePath, contract.DefaultTerminationMessagePath, "file the JSON result is written to")
	fs.IntVar(&o.retries, contract.FlagRetries, 8, "attempts per request on transient network errors")
	o.log.Bind(fs)
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	given := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { given[f.Name] = true })
	var envErr error
	fs.VisitAll(func(f *flag.Flag) {
		env := contract.EnvPrefix + strings.ToUpper(strings.ReplaceAll(f.Name, "-", "_"))
		if v := getenv(env); v != "" && !given[f.Name] {
			if err := fs.Set(f.Name, v); err != nil && envErr == nil {
				envErr = fmt.Errorf("%s: %w", env, err)
			}
		}
	})
	if envErr != nil {
		return o, envErr
	}
	if o.exportFile != "" || o.exportImage != "" {
		what := "--" + contract.FlagExportFile
		if o.exportImage != "" {
			what = "--" + contract.FlagExportImage
		}
		if o.exportFile != "" && o.exportImage != "" {
			return o, fmt.Errorf("give one of --%s and --%s", contract.FlagExportFile, contract.FlagExportImage)
		}
		if countSet(o.sourceURL, o.sourceImage, o.sourceFile, o.uploadAddress, o.destImage, o.destFile) > 0 || o.inspect {
			return o, fmt.Errorf("%s takes no source, destination or --%s", what, contract.FlagInspect)
		}
		if o.exportFile != "" && (o.sourceAuth != "" || o.sourceCA != "") {
			return o, fmt.Errorf("--%s and --%s go with --%s", contract.FlagSourceAuthFile, contract.FlagSourceCABundle, contract.FlagExportImage)
		}
		if o.exportTokenFile == "" {
			return o, fmt.Errorf("%s goes with --%s", what, contract.FlagExportTokenFile)
		}
		if o.retries < 1 {
			return o, fmt.Errorf("--%s must be at least 1", contract.FlagRetries)
		}
		return o, o.log.Validate()
	}
	if o.sourceTokenFile != "" && o.sourceURL == "" {
		return o, fmt.Errorf("--%s goes with --%s", contract.FlagSourceTokenFile, contract.FlagSourceURL)
	}
	if n := countSet(o.sourceURL, o.sourceImage, o.sourceFile, o.uploadAddress); n != 1 {
		return o, fmt.Errorf("give exactly one of --%s, --%s, --%s and --%s", contract.FlagSourceURL, contract.FlagSourceImage, contract.FlagSourceFile, contract.FlagSourceUploadAddress)
	}
	if (o.uploadAddress == "") != (o.uploadTokenFile == "") {
		return o, fmt.Errorf("--%s goes with --%s", contract.FlagSourceUploadAddress, contract.FlagUploadTokenFile)
	}
	switch {
	case o.inspect && (o.destImage != "" || o.destFile != "" || o.uploadAddress != ""):
		return o, fmt.Errorf("--%s takes a URL or an image, and no destination", contract.FlagInspect)
	case !o.inspect && (o.destImage == "") == (o.destFile == ""):
		return o, fmt.Errorf("give exactly one of --%s and --%s", contract.FlagDestinationImage, contract.FlagDestinationFile)
	}
	if o.thenExport && (o.destFile == "" || o.exportTokenFile == "") {
		return o, fmt.Errorf("--%s goes with --%s and --%s", contract.FlagThenExport, contract.FlagDestinationFile, contract.FlagExportTokenFile)
	}
	if o.retries < 1 {
		return o, fmt.Errorf("--%s must be at least 1", contract.FlagRetries)
	}
	return o, o.log.Validate()
}

func countSet(values ...string) int {
	n := 0
	for _, v := range values {
		if v != "" {
			n++
		}
	}
	return n
}

func main() {
	o, err := parse(os.Args[1:], os.Getenv)
	if errors.Is(err, flag.ErrHelp) {
		os.Exit(0)
	}
	// Bad arguments (log options included) are logged as JSON at info, the defaults.
	handler, herr := o.log.Handler(os.Stderr)
	if herr != nil {
		handler, _ = logopts.Default().Handler(os.Stderr)
	}
	log := slog.New(handler)
	if err != nil {
		err = contract.Errorf(contract.ReasonInvalidArguments, "%w", err)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	var res contract.Result
	switch {
	case err == nil && (o.exportFile != "" || o.exportImage != ""):
		err = export(ctx, o, log)
		res = contract.Result{Reason: contract.ReasonCompleted}
	case err == nil && o.thenExport:
		res, err = stage(ctx, o, log)
	case err == nil:
		res, err = run(ctx, o, log, prometheus.NewRegistry())
	}
	stop()
	if err != nil {
		res = contract.Result{Reason: contract.ReasonOf(err), Message: err.Error()}
		log.Error("import failed", "reason", res.Reason, "error", err)
	} else {
		log.Info("import done", "result", res)
	}
	if werr := os.WriteFile(o.termination, res.Marshal(), 0o644); werr != nil {
		log.Error("writing the result", "path", o.termination, "error", werr)
	}
	os.Exit(contract.ExitCode(res.Reason))
}

// run imports as o says, serving its progress in reg.
func run(ctx context.Context, o options, log *slog.Logger, reg *prometheus.Registry) (contract.Result, error) {
	wanted := map[string]string{}
	for alg, v := range o.sums {
		wanted[alg] = *v
	}
	sums, err := checksum.New(wanted)
	if err != nil {
		return contract.Result{}, err
	}
	qemuImg, err := exec.LookPath("qemu-img")
	if err != nil {
		return contract.Result{}, fmt.Errorf("qemu-img: %w", err)
	}
	backoff := source.Backoff{Initial: time.Second, Max: 30 * time.Second, Attempts: o.retries}
	im := &importer.Import{
		Inspect:    o.inspect,
		Checksum:   sums,
		ScratchDir: o.scratch,
		QemuImg:    convert.QemuImg{Path: qemuImg},
		Progress:   progress.New(time.Now),
		Log:        log,
		Now:        time.Now,
	}
	if im.Source, err = newSource(o, backoff, log); err != nil {
		return contract.Result{}, err
	}
	if o.destFile != "" {
		if im.File, err = destination.OpenFile(o.destFile, o.capacity); err != nil {
			return contract.Result{}, err
		}
	} else {
		tr, err := cabundle.Transport(o.destCA)
		if err != nil {
			return contract.Result{}, contract.Errorf(contract.ReasonInvalidArguments, "%w", err)
		}
		keys, err := keychain(o.destAuth)
		if err != nil {
			return contract.Result{}, err
		}
		im.Registry = &destination.Registry{Image: o.destImage, Keychain: keys, Transport: tr,
			Backoff: destination.Backoff{Duration: backoff.Initial, Factor: 2, Steps: backoff.Attempts, Cap: backoff.Max}}
	}
	reg.MustRegister(im.Progress)
	if err := serveMetrics(ctx, o.metrics, reg, log); err != nil {
		return contract.Result{}, err
	}
	res, err := im.Run(ctx)
	if u, ok := im.Source.(*source.Upload); ok {
		u.Finish(err) // the uploader learns the outcome
	}
	return res, err
}

func newSource(o options, backoff source.Backoff, log *slog.Logger) (importer.Source, error) {
	tr, err := cabundle.Transport(o.sourceCA)
	if err != nil {
		return nil, contract.Errorf(contract.ReasonInvalidArguments, "%w", err)
	}
	switch {
	case o.sourceURL != "":
		token, err := readToken(o.sourceTokenFile)
		if err != nil {
			return nil, err
		}
		return &source.HTTP{URL: o.sourceURL, Token: token, Client: &http.Client{Transport: tr}, Backoff: backoff, Sleep: source.RealSleep, Log: log}, nil
	case o.sourceFile != "":
		return &source.File{Path: o.sourceFile}, nil
	case o.uploadAddress != "":
		token, err := readToken(o.uploadTokenFile)
		if err != nil {
			return nil, err
		}
		l, err := net.Listen("tcp", o.uploadAddress)
		if err != nil {
			return nil, contract.Errorf(contract.ReasonInvalidArguments, "upload address: %w", err)
		}
		return &source.Upload{Listener: l, Token: token, Timeout: o.uploadTimeout, Log: log}, nil
	}
	keys, err := keychain(o.sourceAuth)
	if err != nil {
		return nil, err
	}
	return &source.Registry{Image: o.sourceImage, Keychain: keys, Transport: tr, Backoff: backoff}, nil
}

// readToken is the token in file ("" for no file); an empty or unreadable file is an error.
func readToken(file string) (string, error) {
	if file == "" {
		return "", nil
	}
	b, err := os.ReadFile(file)
	token := strings.TrimSpace(string(b))
	if err != nil || token == "" {
		return "", contract.Errorf(contract.ReasonInvalidArguments, "token file %s: empty or unreadable: %v", file, err)
	}
	return token, nil
}

// export serves o.exportFile or o.exportImage's disk until ctx ends (the exporter's Pod is
// deleted).
func export(ctx context.Context, o options, log *slog.Logger) error {
	token, err := readToken(o.exportTokenFile)
	if err != nil {
		return err
	}
	h := &exporter.Handler{Path: o.exportFile, Token: token, Sent: exporter.NewSentCounter(), Log: log}
	// A claim without the disk, or a missing image, fails now, with a reason, not each request
	// later.
	if o.exportImage != "" {
		if h.Image, err = exportedImage(ctx, o); err != nil {
			return err
		}
	} else {
		f, err := os.Open(o.exportFile)
		if err != nil {
			return contract.Errorf(contract.ReasonSourceNotFound, "the disk cannot be read: %w", err)
		}
		f.Close()
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(h.Sent)
	l, err := listenExport(o)
	if err != nil {
		return err
	}
	// Ready (the metrics answer) only once the export listens.
	if err := serveMetrics(ctx, o.metrics, reg, log); err != nil {
		l.Close()
		return err
	}
	return serveExport(ctx, l, h, log)
}

func listenExport(o options) (net.Listener, error) {
	l, err := net.Listen("tcp", o.exportAddress)
	if err != nil {
		return nil, contract.Errorf(contract.ReasonInvalidArguments, "export address: %w", err)
	}
	return l, nil
}

// serveExport serves h on l until ctx ends.
func serveExport(ctx context.Context, l net.Listener, h *exporter.Handler, log *slog.Logger) error {
	srv := &http.Server{Handler: h.Mux(), ReadHeaderTimeout: 30 * time.Second}
	context.AfterFunc(ctx, func() { srv.Close() })
	log.Info("exporting", "path", h.Path, "image", h.Image != nil, "address", l.Addr().String())
	if err := srv.Serve(l); !errors.Is(err, http.ErrServerClosed) {
		return contract.Errorf(contract.ReasonInternal, "export server: %w", err)
	}
	return nil
}

// stage imports into o.destFile, then serves it as an exporter until ctx ends, the staged disk
// in contract.MetricStagedBytes (which appears once the export listens).
func stage(ctx context.Context, o options, log *slog.Logger) (contract.Result, error) {
	token, err := readToken(o.exportTokenFile)
	if err != nil {
		return contract.Result{}, err
	}
	l, err := listenExport(o)
	if err != nil {
		return contract.Result{}, err
	}
	reg := prometheus.NewRegistry()
	res, err := run(ctx, o, log, reg)
	if err != nil {
		l.Close()
		return res, err
	}
	h := &exporter.Handler{Path: o.destFile, Token: token, Sent: exporter.NewSentCounter(), Log: log}
	reg.MustRegister(h.Sent, stagedGauge(res))
	log.Info("staged", "result", res)
	return res, serveExport(ctx, l, h, log)
}

// stagedGauge is contract.MetricStagedBytes of res.
func stagedGauge(res contract.Result) prometheus.Collector {
	g := prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: contract.MetricStagedBytes, Help: "Unpacked size of the staged disk the importer serves."},
		[]string{contract.LabelFormat, contract.LabelCDROM})
	g.WithLabelValues(res.Format, strconv.FormatBool(res.CDROM)).Set(float64(res.UnpackedSize))
	return g
}

// exportedImage opens o.exportImage's disk once, to fail now when it cannot be read, and returns
// how each request opens it.
func exportedImage(ctx context.Context, o options) (func(context.Context) (source.Stream, error), error) {
	tr, err := cabundle.Transport(o.sourceCA)
	if err != nil {
		return nil, contract.Errorf(contract.ReasonInvalidArguments, "%w", err)
	}
	keys, err := keychain(o.sourceAuth)
	if err != nil {
		return nil, err
	}
	reg := &source.Registry{Image: o.exportImage, Keychain: keys, Transport: tr,
		Backoff: source.Backoff{Initial: time.Second, Max: 30 * time.Second, Attempts: o.retries}}
	s, err := reg.Open(ctx)
	if err != nil {
		return nil, err
	}
	s.Close()
	return reg.Open, nil
}

func keychain(file string) (authn.Keychain, error) {
	if file == "" {
		return registryauth.Keychain{}, nil
	}
	k, err := registryauth.Load(file)
	if err != nil {
		return nil, contract.Errorf(contract.ReasonInvalidArguments, "%w", err)
	}
	return k, nil
}

// serveMetrics listens now (a bad address fails the import) and serves until ctx ends.
func serveMetrics(ctx context.Context, addr string, reg *prometheus.Registry, log *slog.Logger) error {
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return contract.Errorf(contract.ReasonInvalidArguments, "metrics address: %w", err)
	}
	mux := http.NewServeMux()
	mux.Handle(contract.MetricsPath, promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() {
		if err := srv.Serve(l); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Error("metrics server", "error", err)
		}
	}()
	context.AfterFunc(ctx, func() { srv.Close() })
	return nil
}
