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
		if c == ',' {
			m.comma |= bit
		}
		if c == ':' {
			m.colon |= bit
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
