package rewrite

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
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

func (e *SyntaxError) Error() string {
	return fmt.Sprintf("rewrite: malformed JSON at offset %d: %s", e.Offset, e.Msg)
}

type scanError struct{ err error }

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
	panic(scanError{&SyntaxError{Offset: s.pos, Msg: msg}})
}

func (s *scanner) ws() {
	for s.pos < len(s.src) {
		switch s.src[s.pos] {
		case ' ', '\n', '\t', '\r':
			s.pos++
		default:
			return
		}
	}
}

func (s *scanner) peek() byte {
	if s.pos >= len(s.src) {
		s.fail("unexpected end of input")
	}
	return s.src[s.pos]
}

func (s *scanner) expect(c byte) {
	if s.pos >= len(s.src) || s.src[s.pos] != c {
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
	if s.pos >= len(s.src) || s.src[s.pos] != '"' {
		s.fail("expected string")
	}
	end, esc, msg := stringEnd(s.src, start)
	if end < 0 {
		s.fail(msg)
	}
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

// stringEnd returns the index just after the closing quote of the string that
// starts at src[i] == '"', and whether it has escapes. It rejects control
// characters and invalid escapes. It returns -1 on error (msg says why).
func stringEnd(src []byte, i int) (end int, esc bool, msg string) {
	j := i + 1
	for {
		// eight bytes at a time while there is no '"', '\\' or control character
		for j+8 <= len(src) {
			v := binary.LittleEndian.Uint64(src[j:])
			x := v ^ 0x2222222222222222
			y := v ^ 0x5c5c5c5c5c5c5c5c
			if ((x-0x0101010101010101)&^x|(y-0x0101010101010101)&^y|(v-0x2020202020202020)&^v)&0x8080808080808080 != 0 {
				break
			}
			j += 8
		}
		for j < len(src) && src[j] != '"' && src[j] != '\\' && src[j] >= 0x20 {
			j++
		}
		if j >= len(src) {
			return -1, esc, "unterminated string"
		}
		switch c := src[j]; {
		case c == '"':
			return j + 1, esc, ""
		case c < 0x20:
			return -1, esc, "control character in string"
		}
		// backslash
		esc = true
		if j+1 >= len(src) {
			return -1, esc, "unterminated string"
		}
		switch src[j+1] {
		case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
			j += 2
		case 'u':
			if j+6 > len(src) {
				return -1, esc, "unterminated string"
			}
			for _, h := range src[j+2 : j+6] {
				if !(h >= '0' && h <= '9' || h >= 'a' && h <= 'f' || h >= 'A' && h <= 'F') {
					return -1, esc, "invalid \\u escape"
				}
			}
			j += 6
		default:
			return -1, esc, "invalid escape"
		}
	}
}

// skip skips one JSON value at pos (whitespace already skipped).
func (s *scanner) skip() {
	if s.pos >= len(s.src) {
		s.fail("unexpected end of input")
	}
	switch c := s.src[s.pos]; c {
	case '"':
		s.skipString()
	case '{', '[':
		s.skipComposite()
	case 't':
		s.literal("true")
	case 'f':
		s.literal("false")
	case 'n':
		s.literal("null")
	default:
		if c == '-' || (c >= '0' && c <= '9') {
			s.number()
			return
		}
		s.fail("invalid character " + fmt.Sprintf("%q", c))
	}
}

func (s *scanner) literal(l string) {
	if len(s.src)-s.pos < len(l) || string(s.src[s.pos:s.pos+len(l)]) != l {
		s.fail("invalid literal")
	}
	s.pos += len(l)
	if s.pos < len(s.src) && !isDelim(s.src[s.pos]) {
		s.fail("invalid literal")
	}
}

func isDelim(c byte) bool {
	switch c {
	case ',', '}', ']', ' ', '\n', '\t', '\r', ':':
		return true
	}
	return false
}

func (s *scanner) number() {
	start := s.pos
	for s.pos < len(s.src) {
		c := s.src[s.pos]
		if (c >= '0' && c <= '9') || c == '-' || c == '+' || c == '.' || c == 'e' || c == 'E' {
			s.pos++
			continue
		}
		break
	}
	if s.pos < len(s.src) && !isDelim(s.src[s.pos]) {
		s.fail("invalid number")
	}
	if !validNumber(s.src[start:s.pos]) {
		s.pos = start
		s.fail("invalid number")
	}
}

func validNumber(b []byte) bool {
	i := 0
	if i < len(b) && b[i] == '-' {
		i++
	}
	if i >= len(b) {
		return false
	}
	if b[i] == '0' {
		i++
	} else if b[i] >= '1' && b[i] <= '9' {
		for i < len(b) && b[i] >= '0' && b[i] <= '9' {
			i++
		}
	} else {
		return false
	}
	if i < len(b) && b[i] == '.' {
		i++
		d := i
		for i < len(b) && b[i] >= '0' && b[i] <= '9' {
			i++
		}
		if i == d {
			return false
		}
	}
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		i++
		if i < len(b) && (b[i] == '+' || b[i] == '-') {
			i++
		}
		d := i
		for i < len(b) && b[i] >= '0' && b[i] <= '9' {
			i++
		}
		if i == d {
			return false
		}
	}
	return i == len(b)
}

func (s *scanner) skipString() {
	end, _, msg := stringEnd(s.src, s.pos)
	if end < 0 {
		s.fail(msg)
	}
	s.pos = end
}

// skipComposite skips an object or array. It checks bracket balance and the
// alternation of keys, values and separators, so truncated or garbled input is
// reported instead of being copied.
//
// States: 0 after '[' (value or ']'), 1 after a value (',' or close),
// 2 after '{' (key or '}'), 3 after a key (':'), 4 after ',' in an object
// (key), 5 after ':' or after ',' in an array (value).
func (s *scanner) skipComposite() {
	src := s.src
	stack := s.stack[:0]
	var state byte
	var top byte
	pos := s.pos
	for pos < len(src) {
		c := src[pos]
		switch c {
		case ' ', '\n', '\t', '\r':
			pos++
			continue
		case '"':
			isKey := top == '}' && (state == 2 || state == 4)
			if !isKey && !(len(stack) == 0 || state == 5 || (state == 0 && top == ']')) {
				s.pos = pos
				s.fail("unexpected string")
			}
			j, _, msg := stringEnd(src, pos)
			if j < 0 {
				s.pos = pos
				s.fail(msg)
			}
			pos = j
			if isKey {
				state = 3
			} else {
				state = 1
			}
			continue
		case '{', '[':
			if !(len(stack) == 0 || state == 5 || (state == 0 && top == ']')) {
				s.pos = pos
				s.fail("unexpected '" + string(c) + "'")
			}
			if c == '{' {
				top = '}'
				state = 2
			} else {
				top = ']'
				state = 0
			}
			stack = append(stack, top)
			pos++
			if len(stack) > maxDepth*8 {
				s.pos = pos
				s.fail("nesting too deep")
			}
			continue
		case '}', ']':
			if top != c || !(state == 1 || (state == 0 && c == ']') || (state == 2 && c == '}')) {
				s.pos = pos
				s.fail("unexpected '" + string(c) + "'")
			}
			stack = stack[:len(stack)-1]
			pos++
			state = 1
			if len(stack) == 0 {
				s.stack = stack
				s.pos = pos
				return
			}
			top = stack[len(stack)-1]
			continue
		case ',':
			if state != 1 {
				s.pos = pos
				s.fail("unexpected ','")
			}
			pos++
			if top == '}' {
				state = 4
			} else {
				state = 5
			}
			continue
		case ':':
			if state != 3 {
				s.pos = pos
				s.fail("unexpected ':'")
			}
			pos++
			state = 5
			continue
		}
		if !(state == 5 || (state == 0 && top == ']')) {
			s.pos = pos
			s.fail("unexpected value")
		}
		s.pos = pos
		s.skip()
		pos = s.pos
		state = 1
	}
	s.pos = pos
	s.fail("unexpected end of input")
}

// appendQuoted appends the JSON encoding of v.
func appendQuoted(dst []byte, v string) []byte {
	dst = append(dst, '"')
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
	dst = append(dst, v[start:]...)
	return append(dst, '"')
}
