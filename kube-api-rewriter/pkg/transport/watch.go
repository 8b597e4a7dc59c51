package transport

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"sync"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/d8virt/kube-api-rewriter/pkg/rewrite"
)

// restoreWatch restores a watch stream event by event; events about hidden objects are dropped.
func (t *RoundTripper) restoreWatch(body io.ReadCloser, target rewrite.Target, resource string) io.ReadCloser {
	b := &watchBody{t: t, upstream: body, events: newEventReader(body), target: target, resource: resource}
	if m := t.o.Metrics; m != nil {
		m.ActiveWatches.WithLabelValues(t.o.Listener, resource).Inc()
		// looked up once: a label lookup per event costs as much as a small event's walk
		b.restored = m.Rewrites.WithLabelValues("watch_event", rewrite.Restore.String())
		b.bytesOut = m.Bytes.WithLabelValues(t.o.Listener, "out")
	}
	return b
}

// watchBody restores a watch stream as the client reads it. There is no goroutine and no pipe
// between the upstream and the client: a Read restores the events the upstream has sent (waiting
// for one when there are none) straight into the client's buffer, so an event costs one read, one
// walk and one copy, and an idle watch holds only its two buffers.
type watchBody struct {
	t        *RoundTripper
	upstream io.ReadCloser
	events   *eventReader
	target   rewrite.Target
	resource string

	out  []byte // restored events not yet read by the client: out[opos:]
	opos int
	err  error // the end of the stream, handed out once out is drained

	closed atomic.Bool
	end    sync.Once

	restored, bytesOut prometheus.Counter // nil without metrics
}

var errBodyClosed = errors.New("kube-api-rewriter: read on a closed watch")

var _ io.ReadCloser = (*watchBody)(nil)

func (b *watchBody) Read(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	for b.opos >= len(b.out) {
		if b.err != nil {
			return 0, b.err
		}
		if b.closed.Load() {
			return 0, errBodyClosed
		}
		b.out, b.opos = b.out[:0], 0
		if err := b.restore(len(p)); err != nil {
			b.finish(err)
		}
	}
	n := copy(p, b.out[b.opos:])
	b.opos += n
	return n, nil
}

// restore appends to out the events that are already buffered, up to about limit bytes, and
// when there are none waits for the next one. It only blocks with nothing to hand out.
func (b *watchBody) restore(limit int) error {
	t, e := b.t, b.events
	for len(b.out) < limit {
		if len(b.out) > 0 && !e.skipWS() {
			return nil
		}
		if err := e.start(); err != nil {
			return err
		}
		var (
			out         []byte
			n           int
			drop, short bool
			err         error
		)
		// An event that has arrived whole is restored where it lies. The apiserver ends every
		// event with a line end, and a read may end anywhere: the buffered input holds an
		// event whole when a line end follows it (or the input ends with '}'). Without either,
		// the event has only partly arrived, and walking it would be wasted.
		if e.endsAtObject() || bytes.IndexByte(e.buf[e.pos:], '\n') >= 0 {
			out, n, drop, short, err = t.o.Rewriter.WatchEventPrefix(rewrite.Restore, b.out, e.buf[e.pos:], b.target)
			e.pos += n
		} else {
			short = true
		}
		if short {
			if len(b.out) > 0 {
				return nil // hand out what is ready before waiting for the rest of this event
			}
			out, drop, err = b.restoreArriving()
		}
		if err != nil {
			t.rewriteError("watch_event", rewrite.Restore, err)
			t.o.Log.Error("restore watch event", "err", err)
			return err
		}
		if b.restored != nil {
			b.restored.Inc()
		}
		if drop {
			continue
		}
		out = append(out, '\n')
		if b.bytesOut != nil {
			b.bytesOut.Add(float64(len(out) - len(b.out)))
		}
		b.out = out
	}
	return nil
}

// restoreArriving reads on until the event at the read position has arrived whole (a line end
// after it, or input that ends with '}') and restores it, walked once where it lies. Only an event
// with a line end of its own inside (whitespace) is walked again, found whole by next.
func (b *watchBody) restoreArriving() (out []byte, drop bool, err error) {
	rw, e := b.t.o.Rewriter, b.events
	for {
		scanned := len(e.buf) - e.pos // bytes after pos known to hold no line end
		if err := e.fill(); err != nil {
			if errors.Is(err, io.EOF) {
				err = fmt.Errorf("watch event cut short: %w", io.ErrUnexpectedEOF)
			}
			return nil, false, err
		}
		if !e.endsAtObject() && bytes.IndexByte(e.buf[e.pos+scanned:], '\n') < 0 {
			continue
		}
		out, n, drop, short, err := rw.WatchEventPrefix(rewrite.Restore, b.out, e.buf[e.pos:], b.target)
		if !short {
			e.pos += n
			return out, drop, err
		}
		ev, err := e.next()
		if err != nil {
			return nil, false, err
		}
		return rw.WatchEvent(rewrite.Restore, b.out, ev, b.target)
	}
}

// finish ends the stream with err: the end of the upstream (or the client closing the body) is
// a clean end for the client, anything else is handed on.
func (b *watchBody) finish(err error) {
	switch {
	case errors.Is(err, io.EOF) || b.closed.Load():
		err = io.EOF
	case errors.Is(err, errNotAnEvent):
		b.t.rewriteError("watch_event", rewrite.Restore, err)
	}
	b.err = err
	b.ended()
}

func (b *watchBody) ended() {
	b.end.Do(func() {
		if b.t.o.Metrics != nil {
			b.t.o.Metrics.ActiveWatches.WithLabelValues(b.t.o.Listener, b.resource).Dec()
		}
	})
}

// Close ends the upstream request at once: a client that stops a watch (client-go closes the
// body and keeps the request context) must not leave the upstream connection and the
// active-watches gauge waiting for the next event, which may be minutes away. It may be called
// while a Read waits for the upstream.
func (b *watchBody) Close() error {
	b.closed.Store(true)
	b.ended()
	return b.upstream.Close()
}

var errNotAnEvent = errors.New("watch event is not a JSON object")

// eventReader buffers a watch stream. The rewriter walks the events where they lie in the buffer
// (Rewriter.WatchEventPrefix); next finds where an event ends only for the rare event that
// arrives in pieces.
type eventReader struct {
	r   io.Reader
	buf []byte // buf[pos:] is read and not yet consumed
	pos int
	err error // what ended the input, io.EOF included
}

// eventBufSize is the initial buffer: an idle watch holds it for as long as it is open. It grows
// to the largest event.
const eventBufSize = 4 << 10

func newEventReader(r io.Reader) *eventReader { return &eventReader{r: r} }

// skipWS skips the buffered whitespace and reports whether more input is buffered.
func (e *eventReader) skipWS() bool {
	for e.pos < len(e.buf) {
		switch e.buf[e.pos] {
		case ' ', '\n', '\r', '\t':
			e.pos++
		default:
			return true
		}
	}
	return false
}

// fill reads more input after what is buffered, moving it to the front of the buffer first.
func (e *eventReader) fill() error {
	if e.err != nil {
		return e.err
	}
	if e.pos > 0 {
		n := copy(e.buf, e.buf[e.pos:])
		e.buf, e.pos = e.buf[:n], 0
	}
	if cap(e.buf)-len(e.buf) < eventBufSize/2 {
		nb := make([]byte, len(e.buf), max(eventBufSize, 2*cap(e.buf)))
		copy(nb, e.buf)
		e.buf = nb
	}
	n, err := e.r.Read(e.buf[len(e.buf):cap(e.buf)])
	e.buf = e.buf[:len(e.buf)+n]
	if err != nil {
		e.err = err
		if n > 0 {
			return nil
		}
		return err
	}
	return nil
}

// endsAtObject reports whether the buffered input ends with '}' (whitespace aside), as it does
// when the upstream's last write was a whole event.
func (e *eventReader) endsAtObject() bool {
	for i := len(e.buf) - 1; i >= e.pos; i-- {
		switch e.buf[i] {
		case ' ', '\n', '\r', '\t':
			continue
		case '}':
			return true
		}
		return false
	}
	return false
}

// start skips the whitespace before the next event and checks that an object begins there;
// io.EOF is the clean end of the stream.
func (e *eventReader) start() error {
	for {
		for e.pos < len(e.buf) {
			switch c := e.buf[e.pos]; c {
			case ' ', '\n', '\r', '\t':
				e.pos++
			case '{':
				return nil
			default:
				return fmt.Errorf("%w: starts with %q", errNotAnEvent, c)
			}
		}
		if err := e.fill(); err != nil {
			return err
		}
	}
}

// next returns the next event whole, valid until the following call; io.EOF between events is
// the clean end of the stream. It only finds where the top-level object ends (strings, escapes
// and brackets); the rewriter's walker validates the event itself.
func (e *eventReader) next() ([]byte, error) {
	if err := e.start(); err != nil {
		return nil, err
	}
	depth, inString := 0, false
	off := 0 // scanned bytes after pos: fill moves the buffer
	for {
		for e.pos+off < len(e.buf) {
			if inString {
				// The string ends at the next quote that follows an even number of backslashes.
				k := bytes.IndexByte(e.buf[e.pos+off:], '"')
				if k < 0 {
					off = len(e.buf) - e.pos
					break
				}
				q := e.pos + off + k
				bs := 0
				for e.buf[q-1-bs] == '\\' {
					bs++
				}
				off += k + 1
				inString = bs%2 == 1
				continue
			}
			c := e.buf[e.pos+off]
			off++
			switch c {
			case '"':
				inString = true
			case '{', '[':
				depth++
			case '}', ']':
				depth--
				if depth == 0 {
					ev := e.buf[e.pos : e.pos+off]
					e.pos += off
					return ev, nil
				}
			}
		}
		if err := e.fill(); err != nil {
			if errors.Is(err, io.EOF) {
				err = fmt.Errorf("watch event cut short: %w", io.ErrUnexpectedEOF)
			}
			return nil, err
		}
	}
}
