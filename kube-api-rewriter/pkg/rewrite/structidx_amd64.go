package rewrite

import "golang.org/x/sys/cpu"

// hasAVX2 selects classifyAVX2; it is a variable so that tests can compare both.
var hasAVX2 = cpu.X86.HasAVX2

// classifyAVX2 is classifyGo in AVX2 (structidx_amd64.s).
//
//go:noescape
func classifyAVX2(b []byte, m []blockMasks)

// classify fills m with the classification of the blocks of b (len(b) == 64*len(m)).
func classify(b []byte, m []blockMasks) {
	if hasAVX2 {
		classifyAVX2(b, m)
		return
	}
	classifyGo(b, m)
}
