package rewrite

import (
	"bytes"
	"math/rand/v2"
	"testing"
)

func TestIndexQuoteOrBackslashMatchesIndexAny(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	alphabet := []byte("ab\"\\c\x00\x80\xff ")
	for n := 0; n < 5000; n++ {
		b := make([]byte, r.IntN(40))
		for i := range b {
			b[i] = alphabet[r.IntN(len(alphabet))]
		}
		if got, want := indexQuoteOrBackslash(b), bytes.IndexAny(b, "\"\\"); got != want {
			t.Fatalf("indexQuoteOrBackslash(%q) = %d, want %d", b, got, want)
		}
	}
}

func FuzzIndexQuoteOrBackslash(f *testing.F) {
	f.Add([]byte(`abcdefgh"ijk`))
	f.Fuzz(func(t *testing.T, b []byte) {
		if got, want := indexQuoteOrBackslash(b), bytes.IndexAny(b, "\"\\"); got != want {
			t.Fatalf("indexQuoteOrBackslash(%q) = %d, want %d", b, got, want)
		}
	})
}
