package rewrite

import (
	"bytes"
	"encoding/json"
	"math/bits"
	"math/rand/v2"
	"testing"
)

// skipValid reports whether the scanner accepts data as one JSON document, and whether it
// failed because the input ended too early.
func skipValid(data []byte) (ok, short bool) {
	defer func() {
		if p := recover(); p != nil {
			ok, short = false, p.(scanError).short
		}
	}()
	s := &scanner{src: data}
	s.ws()
	s.skip()
	s.ws()
	return s.pos == len(data), false
}

// deep reports nesting beyond the skipper's limit, where it rejects what encoding/json accepts.
func deep(data []byte) bool {
	return bytes.Count(data, []byte("["))+bytes.Count(data, []byte("{")) >= maxDepth*8
}

func checkSkip(t *testing.T, data []byte) {
	t.Helper()
	if deep(data) {
		return
	}
	ok, short := skipValid(data)
	if want := json.Valid(data); ok != want {
		t.Fatalf("skip accepts %q: %v, json.Valid: %v", data, ok, want)
	}
	if short && json.Valid(data) {
		t.Fatalf("%q reported as cut short", data)
	}
	// A prefix of a valid document that is not a document itself must be reported as cut
	// short, so that a streamed reader reads on instead of failing.
	if json.Valid(data) && len(data) <= 2000 {
		for i := range len(data) {
			p := data[:i]
			if json.Valid(p) {
				continue
			}
			if ok, short := skipValid(p); ok || !short {
				t.Fatalf("prefix %q of %q: ok %v, short %v", p, data, ok, short)
			}
		}
	}
}

var skipCorpus = []string{
	`{}`, `[]`, `""`, `0`, `-0`, `-0.5e+10`, `1E5`, `12.25`, `true`, `false`, `null`,
	`{"a":1,"b":[true,false,null,{"c":"d"}],"e":{}}`,
	`[1, 2 ,3 , [ ] , { } ,"x\"y\\z\/\b\f\n\r\t\u00e9\uD83D\uDE00"]`,
	" \t\n\r{ \"a\" : [ 1 , 2 ] } \n",
	`{"a":"` + "\xff\xfe" + `"}`, `"abcdefghijklmnopqrstuvwxyz0123456789\"after"`,
	`01`, `-`, `1.`, `1e`, `1e+`, `.5`, `+1`, `0x10`, `tru`, `nul`, `truex`, `[1,]`, `{"a":1,}`,
	`{"a" 1}`, `{1:2}`, `[1 2]`, `{"a":1}}`, `[[]`, `]`, `"\x"`, `"\u12"`, `"\u12g4"`, "\"\x01\"",
	"\"a\tb\"", `{"a":"b"`, `[`, `{`, `{"a"`, `{"a":`, `"abc`, `"abc\`, `[1,2`, `[-`, `{,}`, `[,1]`,
	`{"a":[}`, `{"a":{]}`, `{"a":1 "b":2}`,
}

func TestSkipMatchesEncodingJSON(t *testing.T) {
	for _, c := range skipCorpus {
		checkSkip(t, []byte(c))
	}
	// Random mutations of valid documents: cut, dropped, doubled and replaced bytes.
	r := rand.New(rand.NewPCG(3, 4))
	alphabet := []byte(`{}[],:"\ -+.0123456789eEtrufalsn` + "x\x00\x1f\x7f\xff\t\n")
	docs := [][]byte{podList(2), []byte(skipCorpus[11]), []byte(skipCorpus[12])}
	for n := 0; n < 20000; n++ {
		d := bytes.Clone(docs[r.IntN(len(docs))])
		if len(d) > 600 {
			off := r.IntN(len(d) - 500)
			d = d[off : off+r.IntN(500)]
		}
		for range r.IntN(4) {
			if len(d) == 0 {
				break
			}
			i := r.IntN(len(d))
			switch r.IntN(3) {
			case 0:
				d = append(d[:i], d[i+1:]...)
			case 1:
				d = append(d[:i+1], d[i:]...)
			default:
				d[i] = alphabet[r.IntN(len(alphabet))]
			}
		}
		ok, _ := skipValid(d)
		if want := json.Valid(d); ok != want && !deep(d) {
			t.Fatalf("skip accepts %q: %v, json.Valid: %v", d, ok, want)
		}
	}
}

func FuzzSkip(f *testing.F) {
	for _, c := range skipCorpus {
		f.Add([]byte(c))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		checkSkip(t, data)
		// and the walker on top of it: malformed input is an error in both directions
		if !json.Valid(data) {
			for _, d := range []Direction{Rename, Restore} {
				if out, err := rw.Object(d, data, Target{}); err == nil {
					t.Fatalf("%v: malformed %q accepted: %q", d, data, out)
				}
			}
		}
	})
}

// TestSpecialBytes: for every byte at every place of a word (the others plain, or special as
// well above it), the lowest flagged byte is the first '"', '\\' or control character.
func TestSpecialBytes(t *testing.T) {
	special := func(c byte) bool { return c == '"' || c == '\\' || c < 0x20 }
	var w [8]byte
	for c := range 256 {
		for at := range 8 {
			for _, fill := range []byte{'a', ' ', '!', 0x80, 0xff, '"', 0} {
				for i := range w {
					switch {
					case i < at:
						w[i] = 'x'
					case i == at:
						w[i] = byte(c)
					default:
						w[i] = fill
					}
				}
				want := 8
				for i, b := range w {
					if special(b) {
						want = i
						break
					}
				}
				got := 8
				if m := specialBytes(load64(w[:], 0)); m != 0 {
					got = bits.TrailingZeros64(m) >> 3
				}
				if got != want {
					t.Fatalf("word %q: first special byte at %d, want %d", w, got, want)
				}
			}
		}
	}
}
