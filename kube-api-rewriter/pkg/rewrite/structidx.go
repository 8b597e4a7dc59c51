package rewrite

import "math/bits"

// The structural index (simdjson's stage 1): the input is classified 64 bytes at a time into
// bitmaps, one bit a byte, so that the skip of an array or object finds the ends of its strings
// and its structural characters by counting zero bits instead of testing byte after byte. On
// amd64 with AVX2 the classification is Go assembly (structidx_amd64.s); elsewhere it is
// classifyGo, eight bytes at a time. FuzzClassify holds the two to the same bitmaps.

// blockMasks classifies 64 input bytes: bit i stands for byte i.
type blockMasks struct {
	quote      uint64 // '"'
	backslash  uint64 // '\\'
	control    uint64 // bytes below 0x20
	structural uint64 // '{', '}', '[', ']', ',', ':'
	space      uint64 // ' ', '\t', '\n', '\r'
}

const blockSize = 64

// maxBlocks is how many blocks a skip classifies at a time after its first one.
const maxBlocks = 8

// swarEq flags, in bit 7 of each byte, the bytes of v equal to c, exactly.
func swarEq(v uint64, c byte) uint64 {
	x := v ^ (swarLo * uint64(c))
	return ^(((x &^ swarHi) + swarLo*0x7f) | x) & swarHi
}

// swarMask gathers the bit 7 flags of a word (swarEq) into the low eight bits, byte i to bit i.
func swarMask(flags uint64) uint64 {
	return (flags >> 7) * 0x0102040810204080 >> 56
}

// classifyGo is the portable classification of len(m) blocks of b (len(b) == 64*len(m)).
func classifyGo(b []byte, m []blockMasks) {
	for k := range m {
		var bm blockMasks
		for i := 0; i < blockSize; i += 8 {
			v := load64(b, k*blockSize+i)
			lower := v | swarLo*0x20 // '[' and ']' become '{' and '}'
			control := ^(((v &^ swarHi) + swarLo*(0x80-0x20)) | v) & swarHi
			bm.quote |= swarMask(swarEq(v, '"')) << i
			bm.backslash |= swarMask(swarEq(v, '\\')) << i
			bm.control |= swarMask(control) << i
			bm.structural |= swarMask(swarEq(lower, '{')|swarEq(lower, '}')|swarEq(v, ',')|swarEq(v, ':')) << i
			bm.space |= swarMask(swarEq(v, ' ')|swarEq(v, '\t')|swarEq(v, '\n')|swarEq(v, '\r')) << i
		}
		m[k] = bm
	}
}

// prefixXor sets bit i to the parity of the bits 0..i of x: with x the unescaped quotes, the
// bits inside strings, opening quote included and closing quote excluded.
func prefixXor(x uint64) uint64 {
	x ^= x << 1
	x ^= x << 2
	x ^= x << 4
	x ^= x << 8
	x ^= x << 16
	x ^= x << 32
	return x
}

// escapedBytes returns the bytes of a block escaped by a backslash, given its backslashes and
// carry (1 when the block's first byte is escaped by the last backslash of the block before), and
// the carry into the next block.
func escapedBytes(backslash, carry uint64) (escaped, next uint64) {
	escaped = carry
	backslash &^= carry
	for backslash != 0 {
		i := bits.TrailingZeros64(backslash)
		if i == blockSize-1 {
			return escaped, 1
		}
		escaped |= 2 << i
		backslash &^= 3 << i
	}
	return escaped, 0
}

// notScalar marks the bytes that end a number or a literal.
var notScalar = func() (t [256]bool) {
	for _, c := range []byte("{}[],: \t\n\r\"") {
		t[c] = true
	}
	return t
}()

// structIndex is the state of skipIndexed between blocks.
type structIndex struct {
	base     int    // the input position of tok[0]
	i, k     int    // tok[i:k] are still to be handed out
	batch    int    // how many blocks to classify at a time
	escCarry uint64 // 1 when the first byte of the next block is escaped
	carries
	fault bool // the tokens of tok[k-1] end before a fault in a string
	// skipIndexed's innermost closer and its tokens, kept here across calls so that its
	// registers are not saved on every token's path
	top    byte
	tokens uint64
	at     int
	masks  [1]blockMasks
	tok    [maxBlocks]uint64
	tail   [blockSize]byte // the last bytes of the input, padded with spaces
}

// carries is what the tokens of a block depend on in the blocks before it, but for escapes.
type carries struct {
	inString uint64 // all ones when the block before ended inside a string
	scCarry  uint64 // 1 when the block before ended in a number or literal
}

// tokens returns the tokens of the next block that has any, as bits, and the block's position.
// It returns no tokens at the end of the input and after a fault.
func (s *scanner) tokens() (tokens uint64, base int) {
	x := &s.idx
	for {
		if x.i == x.k {
			if x.fault || !s.classifyNext() {
				return 0, 0
			}
		}
		tokens, base = x.tok[x.i], x.base+x.i*blockSize
		x.i++
		if tokens != 0 {
			return tokens, base
		}
	}
}

// classifyNext finds the tokens of the blocks after the ones handed out. It returns false at the
// end of the input.
func (s *scanner) classifyNext() bool {
	x := &s.idx
	src := s.src
	n := len(src)
	next := x.base + x.k*blockSize
	if next >= n {
		return false
	}
	k := min(x.batch, (n-next)/blockSize)
	x.batch = maxBlocks
	blocks := src[next:]
	if k == 0 {
		k = 1
		copy(x.tail[:], blocks)
		for i := n - next; i < blockSize; i++ {
			x.tail[i] = ' '
		}
		blocks = x.tail[:]
	}
	x.base, x.i, x.k = next, 0, k
	for b := 0; b < k; b++ {
		if x.escCarry == 0 {
			// the blocks without backslashes and faults, all at once where the CPU can
			if b += findTokens(blocks[b*blockSize:k*blockSize], x.tok[b:k], &x.carries); b == k {
				break
			}
		}
		block := blocks[b*blockSize : (b+1)*blockSize]
		classify(block, x.masks[:])
		var ok bool
		if x.tok[b], ok = s.blockTokens(&x.masks[0], next+b*blockSize); !ok {
			x.fault, x.k = true, b+1
			break
		}
	}
	return true
}

// blockTokens returns the tokens of the block at base classified as m, and false when they end
// before a fault in a string. It updates the carries.
func (s *scanner) blockTokens(m *blockMasks, base int) (tokens uint64, ok bool) {
	x := &s.idx
	var escaped uint64
	if m.backslash|x.escCarry != 0 {
		escaped, x.escCarry = escapedBytes(m.backslash, x.escCarry)
	}
	quote := m.quote &^ escaped
	inside := prefixXor(quote) ^ x.inString
	x.inString = uint64(int64(inside) >> 63)
	// The tokens at and after the first fault in a string are not handed out: the value may
	// still end before it.
	valid := ^uint64(0)
	if bad := m.control & inside; bad != 0 {
		valid = 1<<bits.TrailingZeros64(bad) - 1
	}
	if esc := m.backslash &^ escaped & inside & valid; esc != 0 {
		valid &= s.validEscapes(base, esc)
	}
	outside := ^(inside | quote)
	other := outside &^ (m.structural | m.space | m.quote)
	scalars := other &^ (other<<1 | x.scCarry)
	x.scCarry = other >> 63
	return (m.structural&outside | quote&inside | scalars) & valid, valid == ^uint64(0)
}

// skipIndexed skips the array or object at pos as skipScalar does, walking the structural index
// (tokens): the tokens are the structural characters outside strings, the opening quotes and the
// first bytes of numbers and literals, and the string contents are checked a block at a time (no
// control characters, valid escapes). It returns false when the input is malformed or ends
// before the value does, where the index cannot tell why: skipScalar then finds and reports the
// error. A number or literal is checked by scalar, so a malformed one panics with the error
// skipScalar reports for it: every byte before it was found well formed.
//
// As in skipScalar, the state is where the code is: each label takes the next token and goes
// on to the label of what may follow it.
func (s *scanner) skipIndexed() bool {
	src := s.src
	s.stack = s.stack[:0]
	s.idx.base, s.idx.i, s.idx.k, s.idx.batch = s.pos, 0, 0, 1
	s.idx.carries, s.idx.escCarry, s.idx.fault = carries{}, 0, false
	var (
		tokens uint64
		base   int
		p      int
		c      byte
		top    byte // closer of the innermost open bracket, 0 outside any
	)
value: // a value
	if tokens == 0 {
		s.idx.top = top
		if tokens, base = s.tokens(); tokens == 0 {
			return false
		}
		src, top = s.src, s.idx.top
	}
	p = base + bits.TrailingZeros64(tokens)
	tokens &= tokens - 1
	c = src[p]
valueAt: // a value starts with c at p
	switch c {
	case '"':
		goto after
	case '{', '[':
		if top != 0 {
			if len(s.stack) == cap(s.stack) {
				s.idx.top, s.idx.tokens, s.idx.at = top, tokens, base
				s.stack = append(s.stack, 0)[:len(s.stack)]
				src, top, tokens, base = s.src, s.idx.top, s.idx.tokens, s.idx.at
			}
			s.stack = s.stack[:len(s.stack)+1]
			s.stack[len(s.stack)-1] = top
			if len(s.stack) >= maxDepth*8 {
				return false
			}
		}
		top = c + 2
		if c == '[' {
			goto valueOrClose
		}
		goto keyOrClose
	case '}', ']', ',', ':':
		return false
	}
	s.pos = p
	s.idx.top, s.idx.tokens, s.idx.at = top, tokens, base
	s.scalar(c)
	src, top, tokens, base = s.src, s.idx.top, s.idx.tokens, s.idx.at
	if s.pos >= len(src) || !notScalar[src[s.pos]] {
		return false
	}
after: // ',' or the closing bracket
	if tokens == 0 {
		s.idx.top = top
		if tokens, base = s.tokens(); tokens == 0 {
			return false
		}
		src, top = s.src, s.idx.top
	}
	p = base + bits.TrailingZeros64(tokens)
	tokens &= tokens - 1
	c = src[p]
	if c == ',' {
		if top == ']' {
			goto value
		}
		goto key
	}
	if c != top {
		return false
	}
closed: // the innermost bracket closed at p
	if len(s.stack) == 0 {
		s.pos = p + 1
		return true
	}
	top = s.stack[len(s.stack)-1]
	s.stack = s.stack[:len(s.stack)-1]
	goto after
valueOrClose: // a value or ']'
	if tokens == 0 {
		s.idx.top = top
		if tokens, base = s.tokens(); tokens == 0 {
			return false
		}
		src, top = s.src, s.idx.top
	}
	p = base + bits.TrailingZeros64(tokens)
	tokens &= tokens - 1
	c = src[p]
	if c == ']' {
		goto closed
	}
	goto valueAt
keyOrClose: // a key or '}'
	if tokens == 0 {
		s.idx.top = top
		if tokens, base = s.tokens(); tokens == 0 {
			return false
		}
		src, top = s.src, s.idx.top
	}
	p = base + bits.TrailingZeros64(tokens)
	tokens &= tokens - 1
	c = src[p]
	if c == '}' {
		goto closed
	}
	goto keyAt
key: // a key
	if tokens == 0 {
		s.idx.top = top
		if tokens, base = s.tokens(); tokens == 0 {
			return false
		}
		src, top = s.src, s.idx.top
	}
	p = base + bits.TrailingZeros64(tokens)
	tokens &= tokens - 1
	c = src[p]
keyAt:
	if c != '"' {
		return false
	}
	// ':'
	if tokens == 0 {
		s.idx.top = top
		if tokens, base = s.tokens(); tokens == 0 {
			return false
		}
		src, top = s.src, s.idx.top
	}
	p = base + bits.TrailingZeros64(tokens)
	tokens &= tokens - 1
	if src[p] != ':' {
		return false
	}
	goto value
}

// validEscapes checks the escapes that start at the backslashes esc of the block at base. It
// returns the bits below the first invalid one (all bits when all are valid).
func (s *scanner) validEscapes(base int, esc uint64) uint64 {
	src := s.src
	for esc != 0 {
		i := bits.TrailingZeros64(esc)
		esc &= esc - 1
		if !validEscape(src, base+i) {
			return 1<<i - 1
		}
	}
	return ^uint64(0)
}

// validEscape reports whether the backslash at src[j] starts a valid escape.
func validEscape(src []byte, j int) bool {
	if j+1 >= len(src) {
		return false
	}
	switch src[j+1] {
	case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
		return true
	case 'u':
		if j+6 > len(src) {
			return false
		}
		for _, h := range src[j+2 : j+6] {
			if !(h >= '0' && h <= '9' || h >= 'a' && h <= 'f' || h >= 'A' && h <= 'F') {
				return false
			}
		}
		return true
	}
	return false
}
