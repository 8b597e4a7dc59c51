package kubename

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"
	"testing"
)

func TestJoin(t *testing.T) {
	long := strings.Repeat("a", 251)
	cases := []struct {
		name  string
		parts []string
		want  string
	}{
		{"short", []string{"vd", "disk", "uid"}, "vd-disk-uid"},
		{"exactly the limit", []string{"vd", strings.Repeat("b", 250)}, "vd-" + strings.Repeat("b", 250)},
		{"too long", []string{"vd", long}, "vd-" + strings.Repeat("a", 239) + "-" + sha("vd-"+long)},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := Join(tc.parts...)
			if got != tc.want {
				t.Errorf("Join = %q, want %q", got, tc.want)
			}
			if len(got) > MaxLength {
				t.Errorf("%d characters", len(got))
			}
		})
	}
	if Join("vd", long+"x") == Join("vd", long+"y") {
		t.Error("two long names shorten to one")
	}
}

func sha(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])[:10]
}
