package rewrite

import (
	"encoding/json"
	"fmt"
	"math/bits"
	"unicode/utf8"
	"unsafe"
)

// The scanner is a single pass over the input. Bytes that are not rewritten are
// copied in large chunks: out always holds the rewritten form of src[:flushed].

// SyntaxError is returned for malformed JSON.
type SyntaxError struct {
	Offset int
	Msg    string
}

var _ error = (*SyntaxError)(nil)

func (e *SyntaxError) Error() string {
	return fmt.Sprintf("rewrite: malformed JSON at offset %d: %s", e.Offset, e.Msg)
}

// scanError carries a syntax error out of the walk. short is true when the
// input ended before the value did: a streamed reader that has more input can
// read it and walk the value again.
type scanError struct {
	err   error
	short bool
}

const maxDepth = 512

type scanner struct {
	src     []byte
	pos     int
	out     []byte
	flushed int
	depth   int
	stack   []byte
}

func (s *scanner) fail(msg string) {
	panic(scanError{err: &SyntaxError{Offset: s.pos, Msg: msg}})
}

// failShort reports input that ends in the middle of a value.
func (s *scanner) failShort(msg string) {
	panic(scanError{err: &SyntaxError{Offset: s.pos, Msg: msg}, short: true})
}

// skipWS returns the index of the first byte at or after i that is not JSON
// whitespace.
func skipWS(src []byte, i int) int {
	for i < len(src) {
		c := src[i]
		if c > ' ' || (c != ' ' && c != '\n' && c != '\t' && c != '\r') {
			return i
		}
		i++
	}
	return i
}

func (s *scanner) ws() { s.pos = skipWS(s.src, s.pos) }

// isSpace reports JSON whitespace; the first test settles the common case of any other byte.
func isSpace(c byte) bool { return c <= ' ' && (c == ' ' || c == '\n' || c == '\t' || c == '\r') }

func (s *scanner) peek() byte {
	if s.pos >= len(s.src) {
		s.failShort("unexpected end of input")
	}
	return s.src[s.pos]
}

func (s *scanner) expect(c byte) {
	if s.pos >= len(s.src) {
		s.failShort("expected '" + string(c) + "'")
	}
	if s.src[s.pos] != c {
		s.fail("expected '" + string(c) + "'")
	}
	s.pos++
}

// flushTo copies src[flushed:i] to out.
func (s *scanner) flushTo(i int) {
	if i > s.flushed {
		s.out = append(s.out, s.src[s.flushed:i]...)
		s.flushed = i
	}
}

// replaceString replaces the string token src[start:end] (quotes included) by
// the JSON encoding of v.
func (s *scanner) replaceString(start, end int, v string) {
	s.flushTo(start)
	s.out = appendQuoted(s.out, v)
	s.flushed = end
}

// replaceRaw replaces src[start:end] by raw bytes.
func (s *scanner) replaceRaw(start, end int, raw []byte) {
	s.flushTo(start)
	s.out = append(s.out, raw...)
	s.flushed = end
}

// str reads a string token at pos. It returns the token bounds and the decoded
// value. The value aliases src when the token has no escapes: it must not be
// kept beyond the lifetime of src.
func (s *scanner) str() (start, end int, v string) {
	start = s.pos
	if s.pos >= len(s.src) {
		s.failShort("expected string")
	}
	if s.src[s.pos] != '"' {
		s.fail("expected string")
	}
	// the common case, a string without escapes, without calling stringEnd
	if j := start + 1 + plainLen(s.src[start+1:]); j < len(s.src) && s.src[j] == '"' {
		s.pos = j + 1
		raw := s.src[start+1 : j]
		return start, j + 1, unsafe.String(unsafe.SliceData(raw), len(raw))
	}
	end, esc := s.stringAt(start)
	s.pos = end
	raw := s.src[start+1 : end-1]
	if !esc {
		return start, end, unsafe.String(unsafe.SliceData(raw), len(raw))
	}
	var d string
	if err := json.Unmarshal(s.src[start:end], &d); err != nil {
		s.pos = start
		s.fail("invalid string: " + err.Error())
	}
	return start, end, d
}

// stringAt is stringEnd for the string at src[i], failing on errors.
func (s *scanner) stringAt(i int) (end int, esc bool) {
	end, esc, msg := stringEnd(s.src, i)
	if end < 0 {
		s.pos = i
		if end == -2 {
			s.failShort(msg)
		}
		s.fail(msg)
	}
	return end, esc
}

const (
	swarLo = 0x0101010101010101
	swarHi = 0x8080808080808080
)

// specialBytes flags, in bit 7 of each byte, the bytes of v (eight input bytes,
// little endian) that end a run of plain string bytes: '"', '\\' and control
// characters. The lowest flagged byte is exact; flags above it may be false.
//
// It is two "byte less than" tests, (x-lo*k)&^x&hi: xoring with 0x02 maps '"' to 0x20 and keeps
// the control characters below it (and the space and '!' above it), so one test below 0x21
// finds both; a backslash is the byte that xors to zero. Xoring with a byte below 0x80 keeps bit
// 7, so &^x is &^v for both. Seven operations a word: the string loops are most of a restore's
// instructions.
func specialBytes(v uint64) uint64 {
	t := v ^ (swarLo * 0x02)
	y := v ^ (swarLo * '\\')
	return ((t - swarLo*0x21) | (y - swarLo)) &^ v & swarHi
}

// plainLen returns the length of the run of plain string bytes at the start of
// b: the index of its first '"', '\\' or control character, or len(b).
func plainLen(b []byte) int {
	i := 0
	for i+8 <= len(b) {
		if m := specialBytes(load64(b, i)); m != 0 {
			return i + bits.TrailingZeros64(m)>>3
		}
		i += 8
	}
	for ; i < len(b); i++ {
		if c := b[i]; c == '"' || c == '\\' || c < 0x20 {
			return i
		}
	}
	return len(b)
}

// stringEnd returns the index just after the closing quote of the string that
// starts at src[i] == '"', and whether it has escapes. It rejects control
// characters and invalid escapes: it then returns -1 (msg says why), or -2 when
// the input ends inside the string.
func stringEnd(src []byte, i int) (end int, esc bool, msg string) {
	j := i + 1
	n := len(src)
	for {
		// Eight bytes at a time up to the first '"', '\\' or control character.
		for j+8 <= n {
			if m := specialBytes(load64(src, j)); m != 0 {
				j += bits.TrailingZeros64(m) >> 3
				break
			}
			j += 8
		}
		for j < n && src[j] != '"' && src[j] != '\\' && src[j] >= 0x20 {
			j++
		}
		if j >= n {
			return -2, esc, "unterminated string"
		}
		switch c := src[j]; {
		case c == '"':
			return j + 1, esc, ""
		case c < 0x20:
			return -1, esc, "control character in string"
		}
		// backslash
		esc = true
		if j+1 >= n {
			return -2, esc, "unterminated string"
		}
		switch src[j+1] {
		case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
			j += 2
		case 'u':
			k := j + 2
			for ; k < j+6 && k < n; k++ {
				if h := src[k]; !(h >= '0' && h <= '9' || h >= 'a' && h <= 'f' || h >= 'A' && h <= 'F') {
					return -1, esc, "invalid \\u escape"
				}
			}
			if k < j+6 {
				return -2, esc, "unterminated string"
			}
			j += 6
		default:
			return -1, esc, "invalid escape"
		}
	}
}

// skip skips one JSON value at pos (whitespace already skipped) and checks that
// it is well formed: strings and their escapes, numbers, literals, and the
// alternation of keys, values and separators in objects and arrays, so that a
// truncated or garbled input is reported instead of being copied.
//
// This is where a restore spends most of its time (most of an object is not
// rewritten), so it is one loop over the bytes with an explicit stack of open
// brackets instead of a recursive descent. Every place tests for the byte it expects first and
// looks for whitespace only when that fails: the apiserver writes none.
func (s *scanner) skip() {
	// Only the position and the innermost bracket live in registers; the stack of outer
	// brackets is in s.stack, and every call below is followed by reloading what it could
	// have clobbered, so that the hot path keeps no values on the stack frame.
	src := s.src
	n := len(src)
	pos := s.pos
	s.stack = s.stack[:0]
	var top byte // closer of the innermost open bracket, 0 outside any
	var c byte
	var inKey bool
	var j int
value: // a value starts at pos, after whitespace
	if pos >= n {
		s.pos = pos
		s.failShort("unexpected end of input")
	}
	c = src[pos]
	if c == '"' {
		inKey = false
		goto str
	}
	if c == '{' || c == '[' {
		if top != 0 {
			s.stack = append(s.stack, top)
			if len(s.stack) >= maxDepth*8 {
				s.pos = pos
				s.fail("nesting too deep")
			}
		}
		top = c + 2 // '}' and ']'
		pos++
		if pos < n && isSpace(src[pos]) {
			pos = skipWS(src, pos)
		}
		if pos < n && src[pos] == top {
			pos++
			goto closed
		}
		if top == ']' {
			goto value
		}
		goto key
	}
	if isSpace(c) {
		pos = skipWS(src, pos)
		goto value
	}
	s.pos = pos
	s.scalar(c)
	src = s.src
	n = len(src)
	pos = s.pos
after: // a value ended at pos, before whitespace
	if top == 0 {
		s.pos = pos
		return
	}
	if pos >= n {
		s.pos = pos
		s.failShort("unexpected end of input")
	}
	c = src[pos]
	if c == ',' {
		pos++
		if top == ']' {
			goto value
		}
		goto key
	}
	if c != top {
		if isSpace(c) {
			pos = skipWS(src, pos)
			goto after
		}
		s.pos = pos
		s.fail("unexpected '" + string(c) + "'")
	}
	pos++
closed: // the innermost bracket was closed just before pos
	top = 0
	if k := len(s.stack); k > 0 {
		top = s.stack[k-1]
		s.stack = s.stack[:k-1]
	}
	goto after
key: // an object key starts at pos, after whitespace
	if pos >= n {
		s.pos = pos
		s.failShort("unexpected end of input")
	}
	if src[pos] != '"' {
		if isSpace(src[pos]) {
			pos = skipWS(src, pos)
			goto key
		}
		s.pos = pos
		s.fail("expected string")
	}
	inKey = true
str: // a string starts at pos; inKey says whether it is a key
	// stringEnd, inlined for strings without escapes: most of the bytes of an object are in
	// its strings. The closing quote is taken where the word that holds it is tested, so that
	// the common path does not meet the slow one (whose call makes the compiler save registers).
	j = pos + 1
	for j+8 <= n {
		if m := specialBytes(load64(src, j)); m != 0 {
			j += bits.TrailingZeros64(m) >> 3
			if src[j] == '"' {
				pos = j + 1
				goto strEnd
			}
			break
		}
		j += 8
	}
	// escapes, errors, and the last bytes of the input
	s.pos = pos
	s.skipString()
	src = s.src
	n = len(src)
	pos = s.pos
strEnd:
	if !inKey {
		goto after
	}
colon: // a key ended at pos, before whitespace
	if pos >= n {
		s.pos = pos
		s.failShort("unexpected end of input")
	}
	if src[pos] != ':' {
		if isSpace(src[pos]) {
			pos = skipWS(src, pos)
			goto colon
		}
		s.pos = pos
		s.fail("expected ':'")
	}
	pos++
	goto value
}

// skipString skips the string at pos.
func (s *scanner) skipString() {
	s.pos, _ = s.stringAt(s.pos)
}

// scalar skips the literal or number at pos, which starts with c.
func (s *scanner) scalar(c byte) {
	switch {
	case c == 't':
		s.pos = s.literalAt(s.pos, "true")
	case c == 'f':
		s.pos = s.literalAt(s.pos, "false")
	case c == 'n':
		s.pos = s.literalAt(s.pos, "null")
	case c == '-' || c >= '0' && c <= '9':
		s.pos = s.numberAt(s.pos)
	default:
		s.fail(fmt.Sprintf("invalid character %q", c))
	}
}

// literalAt checks the literal l at src[i] and returns the index after it.
func (s *scanner) literalAt(i int, l string) int {
	src := s.src
	if len(src)-i < len(l) {
		s.pos = i
		if string(src[i:]) == l[:len(src)-i] {
			s.failShort("invalid literal")
		}
		s.fail("invalid literal")
	}
	if string(src[i:i+len(l)]) != l {
		s.pos = i
		s.fail("invalid literal")
	}
	return i + len(l)
}

// numberAt checks the number at src[i] and returns the index after it. What
// follows the number is checked by the caller (a ',' or a closing bracket).
func (s *scanner) numberAt(i int) int {
	src := s.src
	n := len(src)
	start := i
	if i < n && src[i] == '-' {
		i++
	}
	switch {
	case i >= n:
		s.pos = start
		s.failShort("invalid number")
	case src[i] == '0':
		i++
	case src[i] >= '1' && src[i] <= '9':
		i++
		for i < n && src[i] >= '0' && src[i] <= '9' {
			i++
		}
	default:
		s.pos = start
		s.fail("invalid number")
	}
	if i < n && src[i] == '.' {
		i++
		d := i
		for i < n && src[i] >= '0' && src[i] <= '9' {
			i++
		}
		if i == d {
			s.pos = start
			if i >= n {
				s.failShort("invalid number")
			}
			s.fail("invalid number")
		}
	}
	if i < n && (src[i] == 'e' || src[i] == 'E') {
		i++
		if i < n && (src[i] == '+' || src[i] == '-') {
			i++
		}
		d := i
		for i < n && src[i] >= '0' && src[i] <= '9' {
			i++
		}
		if i == d {
			s.pos = start
			if i >= n {
				s.failShort("invalid number")
			}
			s.fail("invalid number")
		}
	}
	return i
}

// appendQuoted appends the JSON encoding of v.
func appendQuoted(dst []byte, v string) []byte {
	return append(appendEscaped(append(dst, '"'), v), '"')
}

// escaped marks the bytes that appendEscaped cannot copy as they are: quotes, backslashes,
// control characters and non-ASCII bytes (checked for valid UTF-8).
var escaped = func() (t [256]bool) {
	for c := range 256 {
		t[c] = c < 0x20 || c == '"' || c == '\\' || c >= utf8.RuneSelf
	}
	return t
}()

// appendEscaped appends the JSON encoding of v without its quotes.
func appendEscaped(dst []byte, v string) []byte {
	plain := true
	for i := 0; i < len(v); i++ {
		if escaped[v[i]] {
			plain = false
			break
		}
	}
	if plain {
		return append(dst, v...)
	}
	start := 0
	for i := 0; i < len(v); {
		c := v[i]
		if c >= 0x20 && c != '"' && c != '\\' && c < utf8.RuneSelf {
			i++
			continue
		}
		if c >= utf8.RuneSelf {
			r, size := utf8.DecodeRuneInString(v[i:])
			if r == utf8.RuneError && size == 1 {
				dst = append(dst, v[start:i]...)
				dst = append(dst, `\ufffd`...)
				i++
				start = i
				continue
			}
			i += size
			continue
		}
		dst = append(dst, v[start:i]...)
		switch c {
		case '"':
			dst = append(dst, '\\', '"')
		case '\\':
			dst = append(dst, '\\', '\\')
		case '\n':
			dst = append(dst, '\\', 'n')
		case '\r':
			dst = append(dst, '\\', 'r')
		case '\t':
			dst = append(dst, '\\', 't')
		default:
			const hex = "0123456789abcdef"
			dst = append(dst, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xf])
		}
		i++
		start = i
	}
	return append(dst, v[start:]...)
}

func isDelim(c byte) bool {
	switch c {
	case ',', '}', ']', ' ', '\n', '\t', '\r', ':':
		return true
	}
	return false
}
