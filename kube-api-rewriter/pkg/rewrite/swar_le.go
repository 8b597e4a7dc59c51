//go:build 386 || amd64 || arm || arm64 || loong64 || mips64le || mipsle || ppc64le || riscv64 || wasm

package rewrite

import "unsafe"

// load64 returns b[i:i+8] as a little-endian word. The caller guarantees 0 <= i && i+8 <= len(b):
// the load has no bounds check, which in the string loops of the scanner is a tenth of the
// instructions of a whole restore.
func load64(b []byte, i int) uint64 {
	return *(*uint64)(unsafe.Add(unsafe.Pointer(unsafe.SliceData(b)), i))
}
