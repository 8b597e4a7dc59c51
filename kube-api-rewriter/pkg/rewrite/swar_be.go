//go:build !(386 || amd64 || arm || arm64 || loong64 || mips64le || mipsle || ppc64le || riscv64 || wasm)

package rewrite

import "encoding/binary"

// load64 returns b[i:i+8] as a little-endian word (see swar_le.go).
func load64(b []byte, i int) uint64 {
	return binary.LittleEndian.Uint64(b[i : i+8])
}
