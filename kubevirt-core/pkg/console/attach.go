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
	done := make(chan error, 2)
	go func() {
		_, err := io.Copy(out, stream)
		done <- err
	}()
	go func() { done <- forward(stream, in) }()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		return nil
	}
}

// forward sends what in reads to w up to Escape or in's end.
func forward(w io.Writer, in io.Reader) error {
	buf := make([]byte, 1024)
	for {
		n, err := in.Read(buf)
		chunk := buf[:n]
		i := bytes.IndexByte(chunk, Escape)
		if i >= 0 {
			chunk = chunk[:i]
		}
		if len(chunk) > 0 {
			if _, werr := w.Write(chunk); werr != nil {
				return werr
			}
		}
		if i >= 0 || err != nil {
			return nil
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
