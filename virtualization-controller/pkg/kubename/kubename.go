// Package kubename makes object names from parts: joined with '-', and shortened with a hash of
// the whole when that would exceed what a name may have, so distinct parts stay distinct.
package kubename

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"
)

// MaxLength is the most characters of a DNS subdomain name (Pods, claims, Secrets).
const MaxLength = 253

// Join is the parts joined with '-'; past MaxLength it is cut and ends in '-' and ten hex
// digits of the joined name's sha256.
func Join(parts ...string) string {
	n := strings.Join(parts, "-")
	if len(n) <= MaxLength {
		return n
	}
	sum := sha256.Sum256([]byte(n))
	h := hex.EncodeToString(sum[:])[:10]
	return strings.TrimRight(n[:MaxLength-len(h)-1], "-.") + "-" + h
}
