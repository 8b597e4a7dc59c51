//go:build !amd64

package rewrite

// classify fills m with the classification of the blocks of b (len(b) == 64*len(m)).
func classify(b []byte, m []blockMasks) { classifyGo(b, m) }

// findTokens leaves every block to blockTokens.
func findTokens(b []byte, tok []uint64, c *carries) int { return 0 }
