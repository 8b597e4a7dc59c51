package rewrite

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"strings"
	"sync"
)

// ObjectStream rewrites one JSON document read from src and writes it to dst
// without holding the whole document: a List's items are read, rewritten and
// written one at a time (hidden ones dropped on Restore), so memory stays in
// the order of one item. Other documents are rewritten like Object. It returns
// the first read, write or syntax error; on a syntax error part of the output
// may already be written.
func (rw *Rewriter) ObjectStream(d Direction, dst io.Writer, src io.Reader, t Target) error {
	bp := streamBufs.Get().(*[]byte)
	sr := &streamReader{r: src, buf: (*bp)[:0]}
	defer func() {
		if cap(sr.buf) <= maxPooledStreamBuf {
			*bp = sr.buf[:0]
			streamBufs.Put(bp)
		}
	}()
	if err := sr.skipWS(); err != nil {
		return err
	}
	c, err := sr.peek()
	if err != nil {
		return err
	}
	if c != '{' {
		all, err := io.ReadAll(io.MultiReader(bytes.NewReader(sr.buf[sr.pos:]), src))
		if err != nil {
			return err
		}
		out, err := rw.Object(d, all, t)
		if err != nil {
			return err
		}
		_, err = dst.Write(out)
		return err
	}
	sr.pos++
	var pre, post []byte // raw "k":v pairs before and after items
	var out []byte
	sawItems := false
	var lg, lk string
	var lhas bool
	for first := true; ; first = false {
		if err := sr.skipWS(); err != nil {
			return err
		}
		c, err := sr.peek()
		if err != nil {
			return err
		}
		if c == '}' {
			sr.pos++
			break
		}
		if !first {
			if c != ',' {
				return &SyntaxError{Offset: sr.off + sr.pos, Msg: "expected ',' or '}'"}
			}
			sr.pos++
			if err := sr.skipWS(); err != nil {
				return err
			}
		}
		key, err := sr.next()
		if err != nil {
			return err
		}
		isItems := string(key) == `"items"`
		keyCopy := append([]byte(nil), key...)
		if err := sr.skipWS(); err != nil {
			return err
		}
		if c, err := sr.peek(); err != nil || c != ':' {
			return &SyntaxError{Offset: sr.off + sr.pos, Msg: "expected ':'"}
		}
		sr.pos++
		if err := sr.skipWS(); err != nil {
			return err
		}
		if c, err := sr.peek(); err == nil && isItems && c == '[' && !sawItems {
			sawItems = true
			// header: everything before items
			hdr, g, k, has, own, err := rw.streamPart(d, pre, t.Group, t.Kind, t.Kind != "")
			if err != nil {
				return err
			}
			if own && k != "" && !strings.HasSuffix(k, "List") {
				// Not a list (the walker leaves the items of other kinds alone): the document is
				// rewritten whole, as Object does.
				doc := append([]byte{'{'}, pre...)
				if len(pre) > 0 {
					doc = append(doc, ',')
				}
				doc = append(append(doc, keyCopy...), ':')
				rest, err := io.ReadAll(io.MultiReader(bytes.NewReader(sr.buf[sr.pos:]), src))
				if err != nil {
					return err
				}
				o, err := rw.Object(d, append(doc, rest...), t)
				if err != nil {
					return err
				}
				_, err = dst.Write(o)
				return err
			}
			sr.pos++
			lg, lk, lhas = g, k, has
			out = append(out[:0], '{')
			out = append(out, hdr...)
			if len(hdr) > 0 {
				out = append(out, ',')
			}
			out = append(out, keyCopy...)
			out = append(out, ':', '[')
			if _, err := dst.Write(out); err != nil {
				return err
			}
			if err := rw.streamItems(d, dst, sr, lg, lk, lhas); err != nil {
				return err
			}
			continue
		}
		val, err := sr.next()
		if err != nil {
			return err
		}
		p := &pre
		if sawItems {
			p = &post
		}
		if len(*p) > 0 {
			*p = append(*p, ',')
		}
		*p = append(*p, keyCopy...)
		*p = append(*p, ':')
		*p = append(*p, val...)
	}
	if err := sr.skipWS(); err != nil && err != io.EOF {
		return err
	}
	if sr.pos < len(sr.buf) {
		return &SyntaxError{Offset: sr.off + sr.pos, Msg: "unexpected data after the JSON value"}
	}
	if !sawItems {
		o, err := rw.Object(d, append(append([]byte{'{'}, pre...), '}'), t)
		if err != nil {
			return err
		}
		_, err = dst.Write(o)
		return err
	}
	tail, _, _, _, _, err := rw.streamPart(d, post, lg, lk, lhas)
	if err != nil {
		return err
	}
	out = append(out[:0], ']')
	if len(tail) > 0 {
		out = append(out, ',')
		out = append(out, tail...)
	}
	out = append(out, '}')
	_, err = dst.Write(out)
	return err
}

// streamPart rewrites the pairs of a list outside its items and returns them
// without braces, with the list's group and kind, and whether the pairs named the kind.
func (rw *Rewriter) streamPart(d Direction, pairs []byte, g, k string, has bool) (out []byte, group, kind string, hasGroup, ownKind bool, err error) {
	src := append(append([]byte{'{'}, pairs...), '}')
	o, err := rw.run(d, nil, src, Target{}, func(w *walker) {
		w.ws()
		w.top(g, k, has)
		// The scope goes back to the pool with the walker; its names alias src, which is ours.
		group, kind, hasGroup, ownKind = w.lastTop.group, w.lastTop.kind, w.lastTop.hasGroup, w.lastTop.ownKind
	})
	if err != nil {
		return nil, "", "", false, false, err
	}
	return o[1 : len(o)-1], group, kind, hasGroup, ownKind, nil
}

// streamAhead is how much of the input streamItems keeps buffered ahead of the item it walks:
// an item is walked where it lies in the buffer, in one pass, unless it runs past the end of
// what is buffered; that item is then walked again once it is complete.
var streamAhead = 32 << 10

// streamBufs holds the read buffers of ObjectStream.
var streamBufs = sync.Pool{New: func() any { b := make([]byte, 0, 2*streamAhead); return &b }}

// maxPooledStreamBuf keeps a buffer grown for one huge item out of the pool.
const maxPooledStreamBuf = 1 << 20

func (rw *Rewriter) streamItems(d Direction, dst io.Writer, sr *streamReader, g, k string, has bool) error {
	kind := ""
	if len(k) > 4 && k[len(k)-4:] == "List" {
		kind = k[:len(k)-4]
	}
	var out []byte
	kept := 0
	if err := sr.skipWS(); err != nil {
		return err
	}
	if c, err := sr.peek(); err != nil {
		return err
	} else if c == ']' {
		sr.pos++
		return nil
	}
	hidden := false
	walkItem := func(w *walker) {
		w.ws()
		if w.peek() != '{' {
			w.skip()
			return
		}
		sc := w.push()
		sc.element = true
		w.top(g, kind, has && kind != "")
		w.pop()
		hidden = sc.hide && d == Restore
	}
	for {
		if err := sr.skipWS(); err != nil {
			return err
		}
		if err := sr.ahead(streamAhead); err != nil {
			return err
		}
		out = out[:0]
		if kept > 0 {
			out = append(out, ',')
		}
		const mark = 0
		hidden = false
		o, n, short, err := rw.walkPrefix(d, out, sr.buf[sr.pos:], !sr.eof, walkItem)
		if short {
			// The item runs past what is buffered: read up to its end, then walk it whole.
			item, err := sr.next()
			if err != nil {
				return err
			}
			hidden = false
			o, err = rw.run(d, out, item, Target{}, walkItem)
			if err != nil {
				return err
			}
		} else if err != nil {
			return err
		} else {
			sr.pos += n
		}
		out = o
		if hidden {
			out = out[:mark]
		} else {
			kept++
		}
		if len(out) > 0 {
			if _, err := dst.Write(out); err != nil {
				return err
			}
		}
		if err := sr.skipWS(); err != nil {
			return err
		}
		c, err := sr.peek()
		if err != nil {
			return err
		}
		sr.pos++
		switch c {
		case ',':
		case ']':
			return nil
		default:
			return &SyntaxError{Offset: sr.off + sr.pos - 1, Msg: "expected ',' or ']'"}
		}
	}
}

// walkPrefix walks the value at the start of src with fn, appending its rewritten form to dst,
// and returns how many bytes of src it took. When more input may follow src (more), a value that
// runs up to the end of src may not be complete: short asks the caller to read on and walk it
// again.
func (rw *Rewriter) walkPrefix(d Direction, dst, src []byte, more bool, fn func(w *walker)) (out []byte, n int, short bool, err error) {
	w := rw.walkers.Get().(*walker)
	w.reset(rw, d, src, dst, Target{})
	defer func() {
		if p := recover(); p != nil {
			se, ok := p.(scanError)
			if !ok {
				panic(p)
			}
			out, n, short, err = nil, 0, se.short && more, se.err
			if short {
				err = nil
			}
		}
		w.release()
		rw.walkers.Put(w)
	}()
	fn(w)
	if more && w.pos == len(src) && w.pos > 0 && src[w.pos-1] >= '0' && src[w.pos-1] <= '9' {
		return nil, 0, true, nil // a number may go on in the next bytes
	}
	w.flushTo(w.pos)
	return w.out, w.pos, false, nil
}

// streamReader reads JSON values from an io.Reader one at a time.
type streamReader struct {
	r   io.Reader
	buf []byte
	pos int
	off int // input offset of buf[0]
	eof bool
	err error
}

var errUnexpectedEOF = errors.New("rewrite: unexpected end of JSON input")

// fill reads more data, discarding bytes before pos.
func (s *streamReader) fill() error {
	if s.eof {
		// The input ended (possibly together with its last bytes, as net/http bodies of a known
		// length do): callers that still need bytes turn this into errUnexpectedEOF.
		if s.err != nil {
			return s.err
		}
		return io.EOF
	}
	if s.pos > 0 {
		n := copy(s.buf, s.buf[s.pos:])
		s.off += s.pos
		s.buf = s.buf[:n]
		s.pos = 0
	}
	if cap(s.buf)-len(s.buf) < 32<<10 {
		nb := make([]byte, len(s.buf), 2*cap(s.buf)+64<<10)
		copy(nb, s.buf)
		s.buf = nb
	}
	n, err := s.r.Read(s.buf[len(s.buf):cap(s.buf)])
	s.buf = s.buf[:len(s.buf)+n]
	if err != nil {
		s.eof = true
		if err != io.EOF {
			s.err = err
			return err
		}
		if n == 0 {
			return io.EOF
		}
	}
	return nil
}

// ahead reads until n bytes are buffered past pos, or the input ends.
func (s *streamReader) ahead(n int) error {
	for !s.eof && len(s.buf)-s.pos < n {
		if err := s.fill(); err != nil && err != io.EOF {
			return err
		}
	}
	return nil
}

func (s *streamReader) skipWS() error {
	for {
		for s.pos < len(s.buf) {
			switch s.buf[s.pos] {
			case ' ', '\n', '\t', '\r':
				s.pos++
				continue
			}
			return nil
		}
		if err := s.fill(); err != nil {
			return err
		}
	}
}

func (s *streamReader) peek() (byte, error) {
	for s.pos >= len(s.buf) {
		if err := s.fill(); err != nil {
			if err == io.EOF {
				return 0, errUnexpectedEOF
			}
			return 0, err
		}
	}
	return s.buf[s.pos], nil
}

// next returns the raw bytes of the next value (valid until the next call).
func (s *streamReader) next() ([]byte, error) {
	var vs valueScanner
	for {
		if e := vs.scan(s.buf[s.pos:], s.eof); e >= 0 {
			v := s.buf[s.pos : s.pos+e]
			s.pos += e
			return v, nil
		}
		if err := s.fill(); err != nil {
			if err == io.EOF {
				return nil, errUnexpectedEOF
			}
			return nil, err
		}
	}
}

// valueScanner finds the end of one JSON value incrementally. It only tracks
// strings and brackets; the value itself is validated by the walker.
type valueScanner struct {
	i      int
	depth  int
	inStr  bool
	esc    bool
	scalar bool
}

func (v *valueScanner) scan(b []byte, eof bool) int {
	for v.i < len(b) {
		c := b[v.i]
		if v.inStr {
			if v.esc {
				v.esc = false
			} else if c == '\\' {
				v.esc = true
			} else if c == '"' {
				v.inStr = false
				if v.depth == 0 {
					v.i++
					return v.i
				}
			} else {
				k := indexQuoteOrBackslash(b[v.i:])
				if k < 0 {
					v.i = len(b)
				} else {
					v.i += k
				}
				continue
			}
			v.i++
			continue
		}
		if v.scalar {
			if isDelim(c) {
				return v.i
			}
			v.i++
			continue
		}
		switch c {
		case '"':
			v.inStr = true
		case '{', '[':
			v.depth++
		case '}', ']':
			v.depth--
			if v.depth <= 0 {
				v.i++
				return v.i
			}
		default:
			if v.depth == 0 && !isDelim(c) {
				v.scalar = true
			}
		}
		v.i++
	}
	if v.scalar && eof {
		return v.i
	}
	return -1
}

// indexQuoteOrBackslash is bytes.IndexAny(b, `"\`) without building a byte set on every call,
// eight bytes at a time: list items are mostly long strings, and this is their inner loop.
func indexQuoteOrBackslash(b []byte) int {
	j := 0
	for j+8 <= len(b) {
		v := binary.LittleEndian.Uint64(b[j:])
		x := v ^ 0x2222222222222222
		y := v ^ 0x5c5c5c5c5c5c5c5c
		if ((x-0x0101010101010101)&^x|(y-0x0101010101010101)&^y)&0x8080808080808080 != 0 {
			break
		}
		j += 8
	}
	for ; j < len(b); j++ {
		if b[j] == '"' || b[j] == '\\' {
			return j
		}
	}
	return -1
}
