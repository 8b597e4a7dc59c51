// Package humansize writes byte counts as the reference module shows sizes in status: binary
// units with one decimal (17.9Mi).
package humansize

import "strconv"

// Format is n bytes in binary units with one decimal (17.9Mi); below 1 KiB it is n and B.
func Format(n int64) string {
	const unit = 1024
	if n < unit {
		return strconv.FormatInt(n, 10) + "B"
	}
	div, exp := int64(unit), 0
	for m := n / unit; m >= unit && exp < 5; m /= unit {
		div *= unit
		exp++
	}
	return strconv.FormatFloat(float64(n)/float64(div), 'f', 1, 64) + string("KMGTPE"[exp]) + "i"
}
