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
	comma      uint64 // ','
	colon      uint64 // ':'
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
			comma, colon := swarEq(v, ','), swarEq(v, ':')
			bm.structural |= swarMask(swarEq(lower, '{')|swarEq(lower, '}')|comma|colon) << i
			bm.comma |= swarMask(comma) << i
			bm.colon |= swarMask(colon) << i
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
	inString uint64 // all ones when the block before ended inside a string
	escCarry uint64 // 1 when the first byte of the next block is escaped
	scCarry  uint64 // 1 when the block before ended in a number or literal
	cqCarry  uint64 // 1 when the block before ended in a closing quote
	fault    bool   // the tokens of tok[k-1] end before a fault in a string
	top      byte   // skipIndexed's innermost closer, kept here across calls
	masks    [maxBlocks]blockMasks
	tok      [maxBlocks]uint64
	tail     [blockSize]byte // the last bytes of the input, padded with spaces
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

// classifyNext classifies the blocks after the ones handed out and finds their tokens. It
// returns false at the end of the input.
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
	if k > 0 {
		classify(src[next:next+k*blockSize], x.masks[:k])
	} else {
		k = 1
		copy(x.tail[:], src[next:])
		for i := n - next; i < blockSize; i++ {
			x.tail[i] = ' '
		}
		classify(x.tail[:], x.masks[:1])
	}
	x.base, x.i, x.k = next, 0, k
	inString, escCarry, scCarry, cqCarry := x.inString, x.escCarry, x.scCarry, x.cqCarry
	for b := range k {
		m := &x.masks[b]
		var escaped uint64
		if m.backslash|escCarry != 0 {
			escaped, escCarry = escapedBytes(m.backslash, escCarry)
		}
		quote := m.quote &^ escaped
		inside := prefixXor(quote) ^ inString
		inString = uint64(int64(inside) >> 63)
		// The tokens at and after the first fault in a string are not handed out: the value
		// may still end before it.
		valid := ^uint64(0)
		if bad := m.control & inside; bad != 0 {
			valid = 1<<bits.TrailingZeros64(bad) - 1
		}
		if esc := m.backslash &^ escaped & inside & valid; esc != 0 {
			valid &= s.validEscapes(next+b*blockSize, esc)
		}
		outside := ^(inside | quote)
		other := outside &^ (m.structural | m.space | m.quote)
		scalars := other &^ (other<<1 | scCarry)
		scCarry = other >> 63
		// A colon right after a closing quote and a comma right before an opening quote in
		// the same block are not tokens (two tokens fewer for most keys): skipIndexed finds
		// them as the byte before the token that follows.
		closing, opening := quote&^inside, quote&inside
		compact := m.colon&(closing<<1|cqCarry) | m.comma&(opening>>1)
		cqCarry = closing >> 63
		x.tok[b] = (m.structural&outside&^compact | opening | scalars) & valid
		if valid != ^uint64(0) {
			x.fault, x.k = true, b+1
			break
		}
	}
	x.inString, x.escCarry, x.scCarry, x.cqCarry = inString, escCarry, scCarry, cqCarry
	return true
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
	s.idx.inString, s.idx.escCarry, s.idx.scCarry, s.idx.cqCarry, s.idx.fault = 0, 0, 0, 0, false
	var (
		tokens uint64
		base   int
		p, j   int
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
		if src[p-1] == ',' && p != base { // a comma that is no token, where no comma may be
			return false
		}
		goto after
	case '{', '[':
		if top != 0 {
			s.stack = append(s.stack, top)
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
	s.idx.top = top
	s.scalar(c)
	src, top = s.src, s.idx.top
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
	if c == '"' && src[p-1] == ',' { // after a comma that is no token
		if top == ']' {
			goto after
		}
		goto keyed
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
	if c != '"' || src[p-1] == ',' && p != base {
		return false
	}
keyed: // a key started at p: ':' and a value follow, the ':' a token or not (right after the key)
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
	// The last byte before the token that is not whitespace: the key's closing quote if the
	// token is the ':', else the ':' (which is no token only right after the closing quote).
	j = p - 1
	for isSpace(src[j]) {
		j--
	}
	if c == ':' {
		if src[j] != '"' {
			return false
		}
		goto value
	}
	if src[j] != ':' {
		return false
	}
	goto valueAt
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
