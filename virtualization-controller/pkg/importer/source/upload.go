package source

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/d8virt/virtualization-controller/pkg/importer/bearer"
	"github.com/d8virt/virtualization-controller/pkg/importer/contract"
)

// Upload is a disk a user uploads (`curl -T disk.qcow2 -H "Authorization: Bearer TOKEN" URL`):
// the first PUT or POST to contract.UploadPath with the one Token is the stream. Open waits for
// it at most Timeout. The uploader's request stays open while the import runs; Finish answers it
// with the import's outcome.
type Upload struct {
	Listener net.Listener
	Token    string
	Timeout  time.Duration
	Log      *slog.Logger

	once     sync.Once
	mu       sync.Mutex
	started  bool
	streams  chan Stream
	finished chan error
	answered chan struct{}
	server   *http.Server
}

func (u *Upload) init() {
	u.once.Do(func() {
		u.streams = make(chan Stream)
		u.finished = make(chan error, 1)
		u.answered = make(chan struct{})
		mux := http.NewServeMux()
		mux.HandleFunc(contract.UploadPath, u.handle)
		u.server = &http.Server{Handler: mux, ReadHeaderTimeout: 30 * time.Second}
		go func() {
			if err := u.server.Serve(u.Listener); err != nil && !errors.Is(err, http.ErrServerClosed) {
				u.Log.Error("upload server", "error", err)
			}
		}()
	})
}

// Open serves uploads and returns the first accepted one's body.
func (u *Upload) Open(ctx context.Context) (Stream, error) {
	u.init()
	t := time.NewTimer(u.Timeout)
	defer t.Stop()
	select {
	case s := <-u.streams:
		return s, nil
	case <-t.C:
		u.Close()
		return Stream{}, contract.Errorf(contract.ReasonUploadTimeout, "no upload began within %s: delete the image and create it again, then upload to its status.imageUploadURLs within that time", u.Timeout)
	case <-ctx.Done():
		u.Close()
		return Stream{}, contract.Errorf(contract.ReasonSourceFailed, "waiting for the upload: %w", ctx.Err())
	}
}

// Finish answers the uploader with the import's outcome (nil: imported), waits at most a few
// seconds for the answer to go out, and stops serving.
func (u *Upload) Finish(err error) {
	u.init()
	u.mu.Lock()
	started := u.started
	u.mu.Unlock()
	if started {
		u.finished <- err
		select {
		case <-u.answered:
		case <-time.After(10 * time.Second):
		}
	}
	u.Close()
}

// Close stops serving.
func (u *Upload) Close() {
	u.init()
	_ = u.server.Close()
}

func (u *Upload) handle(w http.ResponseWriter, r *http.Request) {
	guard := bearer.Guard{Methods: []string{http.MethodPut, http.MethodPost}, Hint: "upload the disk image with PUT or POST (curl -T disk.qcow2 URL)",
		Token: u.Token, What: "image's upload token", Log: u.Log}
	if guard.Refused(w, r) {
		return
	}
	u.mu.Lock()
	again := u.started
	u.started = true
	u.mu.Unlock()
	if again {
		http.Error(w, "this image's upload has already begun: an image takes one upload", http.StatusConflict)
		return
	}
	u.Log.Info("upload began", "remote", r.RemoteAddr, "size", r.ContentLength)
	size := r.ContentLength
	if size < 0 {
		size = -1
	}
	defer close(u.answered)
	select {
	case u.streams <- Stream{ReadCloser: &uploadBody{ReadCloser: r.Body}, Size: size}:
	case <-r.Context().Done():
		return
	}
	select {
	case err := <-u.finished:
		if err != nil {
			http.Error(w, fmt.Sprintf("%s: %v", contract.ReasonOf(err), err), http.StatusUnprocessableEntity)
		} else {
			_, _ = fmt.Fprintln(w, "imported")
		}
	case <-r.Context().Done():
	}
}

// uploadBody says what broke an upload off.
type uploadBody struct {
	io.ReadCloser
	n int64
}

func (b *uploadBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	b.n += int64(n)
	if err != nil && !errors.Is(err, io.EOF) {
		err = contract.Errorf(contract.ReasonSourceFailed, "the upload broke off after %d bytes: %w", b.n, err)
	}
	return n, err
}
