// Package export serves one disk to one importer: a VirtualDisk's claim (its disk.img, or its
// block device) read next to the claim, for an image made from the disk by an importer that
// runs elsewhere (in the module's namespace, with DVCR's credentials the disk's namespace never
// sees); or the disk of an image in DVCR, read in the module's namespace for an importer in
// another one. GET and HEAD of contract.ExportPath with the bearer token; a file honours Range,
// so the importer's HTTP source resumes a stream that broke off; an image is streamed from its
// start each time (the HTTP source then skips what it has).
package export

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"os"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/d8virt/virtualization-controller/pkg/importer/bearer"
	"github.com/d8virt/virtualization-controller/pkg/importer/contract"
	"github.com/d8virt/virtualization-controller/pkg/importer/source"
)

// Handler serves the file or block device at Path, or the disk Image opens, to requests bearing
// Token.
type Handler struct {
	Path  string
	Image func(ctx context.Context) (source.Stream, error)
	Token string
	// Sent counts the bytes of the disk sent (contract.MetricExportedBytes).
	Sent prometheus.Counter
	Log  *slog.Logger
}

// NewSentCounter is the counter of a Handler's bytes sent, to register where metrics are served.
func NewSentCounter() prometheus.Counter {
	return prometheus.NewCounter(prometheus.CounterOpts{Name: contract.MetricExportedBytes, Help: "Bytes of the disk the exporter has sent."})
}

// Mux serves h at contract.ExportPath.
func (h *Handler) Mux() *http.ServeMux {
	mux := http.NewServeMux()
	mux.Handle(contract.ExportPath, h)
	return mux
}

func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	guard := bearer.Guard{Methods: []string{http.MethodGet, http.MethodHead}, Hint: "the exporter serves the disk to GET",
		Token: h.Token, What: "export's token", Log: h.Log}
	if guard.Refused(w, r) {
		return
	}
	if h.Image != nil {
		h.serveImage(w, r)
		return
	}
	f, err := os.Open(h.Path)
	if err != nil {
		h.Log.Error("opening the disk", "path", h.Path, "error", err)
		http.Error(w, "the disk cannot be read: "+err.Error(), http.StatusInternalServerError)
		return
	}
	defer f.Close()
	// A block device's size is where it ends; a file's too.
	size, err := f.Seek(0, io.SeekEnd)
	if err != nil {
		http.Error(w, "the disk's size cannot be read: "+err.Error(), http.StatusInternalServerError)
		return
	}
	h.Log.Info("export", "remote", r.RemoteAddr, "method", r.Method, "range", r.Header.Get("Range"), "size", size)
	w.Header().Set("Content-Type", "application/octet-stream")
	http.ServeContent(&counting{ResponseWriter: w, sent: h.Sent}, r, "", time.Time{}, io.NewSectionReader(f, 0, size))
}

// serveImage streams the image's disk from its start, whatever Range asks.
func (h *Handler) serveImage(w http.ResponseWriter, r *http.Request) {
	s, err := h.Image(r.Context())
	if err != nil {
		h.Log.Error("opening the image", "error", err)
		http.Error(w, "the image cannot be read: "+err.Error(), http.StatusBadGateway)
		return
	}
	defer s.Close()
	h.Log.Info("export", "remote", r.RemoteAddr, "method", r.Method, "range", r.Header.Get("Range"), "size", s.Size)
	w.Header().Set("Content-Type", "application/octet-stream")
	if s.Size >= 0 {
		w.Header().Set("Content-Length", strconv.FormatInt(s.Size, 10))
	}
	w.WriteHeader(http.StatusOK)
	if r.Method == http.MethodHead {
		return
	}
	if _, err := io.Copy(&counting{ResponseWriter: w, sent: h.Sent}, s); err != nil {
		h.Log.Error("streaming the image", "error", err)
	}
}

// counting counts the bytes written to the response body.
type counting struct {
	http.ResponseWriter
	sent prometheus.Counter
}

func (c *counting) Write(p []byte) (int, error) {
	n, err := c.ResponseWriter.Write(p)
	c.sent.Add(float64(n))
	return n, err
}
