package rewrite

import (
	"bytes"
	"math/rand/v2"
	"testing"
)

// classifyRef is the classification byte by byte, the definition both implementations are held to.
func classifyRef(b []byte) blockMasks {
	var m blockMasks
	for i, c := range b {
		bit := uint64(1) << i
		switch {
		case c == '"':
			m.quote |= bit
		case c == '\\':
			m.backslash |= bit
		case c == '{' || c == '}' || c == '[' || c == ']' || c == ',' || c == ':':
			m.structural |= bit
		}
		if c < 0x20 {
			m.control |= bit
		}
		if c == ' ' || c == '\t' || c == '\n' || c == '\r' {
			m.space |= bit
		}
	}
	return m
}

// checkClassify holds classifyGo, and classifyAVX2 where the CPU has it, to classifyRef over the
// whole blocks of data, in one call and a block at a time.
func checkClassify(t *testing.T, data []byte) {
	t.Helper()
	k := len(data) / blockSize
	data = data[:k*blockSize]
	impls := map[string]func([]byte, []blockMasks){"classifyGo": classifyGo}
	if hasAVX2 {
		impls["classifyAVX2"] = classifyAVX2
	}
	for name, classify := range impls {
		all := make([]blockMasks, k)
		classify(data, all)
		for i := range k {
			block := data[i*blockSize : (i+1)*blockSize]
			var one [1]blockMasks
			classify(block, one[:])
			if want := classifyRef(block); all[i] != want || one[0] != want {
				t.Fatalf("%s(%q) = %+v (alone %+v), want %+v", name, block, all[i], one[0], want)
			}
		}
	}
}

func TestClassify(t *testing.T) {
	if !hasAVX2 {
		t.Log("no AVX2 on this CPU: classifyGo only")
	}
	// every byte at every place of a block
	every := make([]byte, 0, 256*blockSize)
	for c := range 256 {
		for at := range blockSize {
			block := bytes.Repeat([]byte("a"), blockSize)
			block[at] = byte(c)
			every = append(every, block...)
		}
	}
	checkClassify(t, every)
	checkClassify(t, podList(3))
	r := rand.New(rand.NewPCG(5, 6))
	random := make([]byte, 64*blockSize)
	for i := range random {
		random[i] = byte(r.Uint32())
	}
	checkClassify(t, random)
}

func FuzzClassify(f *testing.F) {
	f.Add(podList(1))
	f.Add(bytes.Repeat([]byte{'"', '\\', 0x1f, 0x20, 0x5b, 0x7b, 0xdb, 0xfb, 0x80, 0xff, 0x09, 0x0d}, 20))
	f.Fuzz(checkClassify)
}

// skipOutcome is what a skip of data at pos did: the position after the value, or the error
// it panicked with.
type skipOutcome struct {
	pos int
	err string
}

func runSkip(data []byte, pos int, skip func(*scanner) bool) (o skipOutcome, ok bool) {
	defer func() {
		if p := recover(); p != nil {
			o, ok = skipOutcome{err: p.(scanError).err.Error()}, true
		}
	}()
	s := &scanner{src: data, pos: pos}
	if !skip(s) {
		return skipOutcome{}, false
	}
	return skipOutcome{pos: s.pos}, true
}

// checkSkipIndexed holds skipIndexed to skipScalar at every '{' and '[' of data: where the index
// decides (an end, or the error of a number or literal), skipScalar decides the same.
func checkSkipIndexed(t *testing.T, data []byte) {
	t.Helper()
	for i, c := range data {
		if c != '{' && c != '[' {
			continue
		}
		got, ok := runSkip(data, i, (*scanner).skipIndexed)
		if !ok {
			continue
		}
		want, _ := runSkip(data, i, func(s *scanner) bool { s.skipScalar(); return true })
		if got != want {
			t.Fatalf("skip of %q at %d: indexed %+v, scalar %+v", data, i, got, want)
		}
	}
}

func TestSkipIndexedMatchesSkipScalar(t *testing.T) {
	for _, c := range skipCorpus {
		checkSkipIndexed(t, []byte(c))
	}
	list := podList(5)
	checkSkipIndexed(t, list)
	// Strings, escapes and numbers across block boundaries: every shift of one document.
	doc := []byte(`{"a":"` + string(bytes.Repeat([]byte(`x\\\"`), 30)) + `","b":[1,-2.5e3,true,null,{"c":"\u00e9"}],"d":"` + "\x01" + `"}`)
	for shift := range blockSize {
		checkSkipIndexed(t, append(bytes.Repeat([]byte(" "), shift), doc...))
	}
	r := rand.New(rand.NewPCG(7, 8))
	alphabet := []byte(`{}[],:"\ -+.0123456789eEtrufalsnu` + "x\x00\x1f\t\n")
	for range 20000 {
		d := bytes.Clone(list[:200+r.IntN(800)])
		for range 1 + r.IntN(4) {
			d[r.IntN(len(d))] = alphabet[r.IntN(len(alphabet))]
		}
		checkSkipIndexed(t, d)
	}
}

func FuzzSkipIndexed(f *testing.F) {
	for _, c := range skipCorpus {
		f.Add([]byte(c))
	}
	f.Add(podList(1))
	f.Fuzz(checkSkipIndexed)
}

// checkTokens holds tokensAVX2 to classifyGo and blockTokens over the whole blocks of data, from
// each kind of carry: the same tokens and carries for every block it does, and the block it stops
// before has a backslash or a control character inside a string.
func checkTokens(t *testing.T, data []byte) {
	t.Helper()
	if !hasAVX2 {
		t.Skip("no AVX2 on this CPU")
	}
	k := len(data) / blockSize
	data = data[:k*blockSize]
	for _, start := range []carries{{}, {inString: ^uint64(0)}, {scCarry: 1}} {
		tok := make([]uint64, k)
		got := start
		done := tokensAVX2(data, tok, &got)
		s := &scanner{src: data}
		s.idx.carries = start
		for b := 0; b <= done && b < k; b++ {
			block := data[b*blockSize : (b+1)*blockSize]
			var m [1]blockMasks
			classifyGo(block, m[:])
			if b == done && s.idx.carries != got {
				t.Fatalf("tokensAVX2 carries %+v after %d blocks, want %+v", got, done, s.idx.carries)
			}
			want, ok := s.blockTokens(&m[0], b*blockSize)
			if b == done {
				if ok && m[0].backslash == 0 {
					t.Fatalf("tokensAVX2 stopped before block %d %q (from %+v)", b, block, start)
				}
				break
			}
			if !ok || m[0].backslash != 0 || want != tok[b] {
				t.Fatalf("tokensAVX2 block %d %q (from %+v): %064b, want %064b (ok %v)", b, block, start, tok[b], want, ok)
			}
		}
		if done == k && s.idx.carries != got {
			t.Fatalf("tokensAVX2 carries %+v after all %d blocks, want %+v", got, done, s.idx.carries)
		}
	}
}

func TestTokens(t *testing.T) {
	checkTokens(t, podList(3))
	checkTokens(t, bytes.Repeat([]byte(`{"a":"b c","d":[1,-2.5e3,true,null],"e":"`+"\x01"+`"}`), 40))
	r := rand.New(rand.NewPCG(9, 10))
	alphabet := []byte(`{}[],:" -0123456789etrufalsn` + "x\t\n")
	for range 2000 {
		d := make([]byte, blockSize*(1+r.IntN(4)))
		for i := range d {
			d[i] = alphabet[r.IntN(len(alphabet))]
		}
		checkTokens(t, d)
	}
}

func FuzzTokens(f *testing.F) {
	f.Add(podList(1))
	f.Add(bytes.Repeat([]byte(`"a\"b":[1,"x"],`), 20))
	f.Fuzz(checkTokens)
}
