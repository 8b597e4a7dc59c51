package console

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"

	"golang.org/x/term"
)

// Escape is Ctrl+], virtctl's key to leave a console.
const Escape = 0x1d

// Attach copies the stream to out and in to the stream until the stream ends, in sends Escape
// (what came before it is still sent) or ctx ends. Leaving by Escape, a closed in or ctx is no
// error; the stream's own end is io.EOF's absence: nil on a clean close, its error otherwise.
func Attach(ctx context.Context, stream io.ReadWriter, in io.Reader, out io.Writer) error {
	_, err := NewInput(in).Attach(ctx, stream, out)
	return err
}

// Input is what the user types, read once for one console stream after another: a client that
// reconnects keeps one Input, so no key is lost between two streams.
type Input struct {
	chunks chan []byte
	left   chan struct{}
	// pending is a chunk the last stream broke under: the next stream gets it first.
	pending []byte
}

// NewInput starts reading in, up to Escape (what came before it is still delivered) or in's end.
func NewInput(in io.Reader) *Input {
	i := &Input{chunks: make(chan []byte), left: make(chan struct{})}
	go i.pump(in)
	return i
}

func (i *Input) pump(in io.Reader) {
	defer close(i.left)
	for {
		buf := make([]byte, 1024)
		n, err := in.Read(buf)
		chunk := buf[:n]
		j := bytes.IndexByte(chunk, Escape)
		if j >= 0 {
			chunk = chunk[:j]
		}
		if len(chunk) > 0 {
			i.chunks <- chunk
		}
		if j >= 0 || err != nil {
			return
		}
	}
}

// Left is closed once the user has left (Escape, or the input ended) and every key before it was
// delivered.
func (i *Input) Left() <-chan struct{} { return i.left }

// Attach copies the stream to out and the input to the stream until the stream ends, the user
// leaves or ctx ends. left says the user left (or ctx ended); err is the stream's end otherwise:
// nil on a clean close, its error else.
func (i *Input) Attach(ctx context.Context, stream io.ReadWriter, out io.Writer) (left bool, err error) {
	ended := make(chan error, 1)
	go func() {
		_, err := io.Copy(out, stream)
		ended <- err
	}()
	if i.pending != nil {
		if _, err := stream.Write(i.pending); err != nil {
			return false, err
		}
		i.pending = nil
	}
	for {
		select {
		case chunk := <-i.chunks:
			if _, err := stream.Write(chunk); err != nil {
				// The stream broke under the write: the keys go to the next stream, if any.
				i.pending = chunk
				return false, err
			}
		case <-i.left:
			return true, nil
		case err := <-ended:
			return false, err
		case <-ctx.Done():
			return true, nil
		}
	}
}

// RawTerminal puts f in raw mode when it is a terminal (keys such as Ctrl+C then reach the guest)
// and returns what restores it; it does nothing to a pipe or file.
func RawTerminal(f *os.File) (restore func(), err error) {
	fd := int(f.Fd())
	if !term.IsTerminal(fd) {
		return func() {}, nil
	}
	old, err := term.MakeRaw(fd)
	if err != nil {
		return nil, fmt.Errorf("raw terminal: %w", err)
	}
	return func() { _ = term.Restore(fd, old) }, nil
}
