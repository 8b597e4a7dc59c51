package console

import (
	"bytes"
	"context"
	"io"
	"strings"
	"testing"
)

// pipeStream is a stream whose reads block until the test ends and whose writes are kept.
type pipeStream struct {
	sent bytes.Buffer
	r    io.Reader
}

func (p *pipeStream) Read(b []byte) (int, error)  { return p.r.Read(b) }
func (p *pipeStream) Write(b []byte) (int, error) { return p.sent.Write(b) }

func TestAttach(t *testing.T) {
	cases := []struct {
		name, in, sent string
	}{
		{"escape ends it, what came before is sent", "ls\r\x1dnot sent", "ls\r"},
		{"escape first", "\x1d", ""},
		{"a closed input ends it", "echo hi\r", "echo hi\r"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			block, unblock := io.Pipe()
			defer unblock.Close()
			s := &pipeStream{r: block}
			var out bytes.Buffer
			if err := Attach(context.Background(), s, strings.NewReader(c.in), &out); err != nil {
				t.Fatal(err)
			}
			if got := s.sent.String(); got != c.sent {
				t.Errorf("sent %q, want %q", got, c.sent)
			}
		})
	}
}

func TestAttachCopiesTheStreamOut(t *testing.T) {
	s := &pipeStream{r: strings.NewReader("login: ")}
	in, hold := io.Pipe()
	defer hold.Close()
	var out bytes.Buffer
	if err := Attach(context.Background(), s, in, &out); err != nil {
		t.Fatal(err)
	}
	if out.String() != "login: " {
		t.Errorf("out %q", out.String())
	}
}

// brokenStream fails every write, as a stream whose other end went away.
type brokenStream struct{}

func (brokenStream) Read([]byte) (int, error)  { return 0, io.ErrClosedPipe }
func (brokenStream) Write([]byte) (int, error) { return 0, io.ErrClosedPipe }

// One Input serves one stream after another: what the user typed while a stream broke reaches
// the next one, and leaving ends the next Attach at once.
func TestInputOutlivesAStream(t *testing.T) {
	keys, typing := io.Pipe()
	in := NewInput(keys)
	go func() { _, _ = typing.Write([]byte("date\r")) }()
	// The broken stream's reader may end first, or its write fail; either way the keys wait.
	for {
		left, err := in.Attach(context.Background(), brokenStream{}, io.Discard)
		if left || err == nil {
			t.Fatalf("a broken stream: left %v, err %v", left, err)
		}
		if in.pending != nil {
			break
		}
	}
	block, unblock := io.Pipe()
	defer unblock.Close()
	next := &pipeStream{r: block}
	go func() { _, _ = typing.Write([]byte("\x1d")) }()
	left, err := in.Attach(context.Background(), next, io.Discard)
	if !left || err != nil {
		t.Fatalf("Ctrl+]: left %v, err %v", left, err)
	}
	if got := next.sent.String(); got != "date\r" {
		t.Errorf("the next stream got %q, want the keys typed for the broken one", got)
	}
}
