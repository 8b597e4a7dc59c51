package rewrite

import "golang.org/x/sys/cpu"

// hasAVX2 selects the assembly; it is a variable so that tests can compare it with Go.
var hasAVX2 = cpu.X86.HasAVX2

// classifyAVX2 is classifyGo in AVX2 (structidx_amd64.s).
//
//go:noescape
func classifyAVX2(b []byte, m []blockMasks)

// tokensAVX2 is findTokens in AVX2 (structidx_amd64.s).
//
//go:noescape
func tokensAVX2(b []byte, tok []uint64, c *carries) int

// classify fills m with the classification of the blocks of b (len(b) == 64*len(m)).
func classify(b []byte, m []blockMasks) {
	if hasAVX2 {
		classifyAVX2(b, m)
		return
	}
	classifyGo(b, m)
}

// findTokens writes the tokens of the blocks of b (len(b) == 64*len(tok)) to tok, as blockTokens
// would, up to the first block with a backslash or a control character inside a string, and
// returns how many blocks it did. The escape carry must be 0.
func findTokens(b []byte, tok []uint64, c *carries) int {
	if hasAVX2 {
		return tokensAVX2(b, tok, c)
	}
	return 0
}
