package launcher

import "testing"

func TestVersionString(t *testing.T) {
	for _, tc := range []struct {
		v    uint32
		want string
	}{
		{9002000, "9.2.0"},
		{7002004, "7.2.4"},
		{10010000, "10.10.0"},
		{1000, "0.1.0"},
		{0, "0.0.0"},
	} {
		if got := versionString(tc.v); got != tc.want {
			t.Errorf("versionString(%d) = %q, want %q", tc.v, got, tc.want)
		}
	}
}
