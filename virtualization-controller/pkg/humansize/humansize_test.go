package humansize

import "testing"

func TestFormat(t *testing.T) {
	for _, tc := range []struct {
		n    int64
		want string
	}{
		{0, "0B"}, {1023, "1023B"}, {1024, "1.0Ki"}, {18796544, "17.9Mi"}, {1 << 30, "1.0Gi"}, {1 << 62, "4.0Ei"},
	} {
		if got := Format(tc.n); got != tc.want {
			t.Errorf("Format(%d) = %q, want %q", tc.n, got, tc.want)
		}
	}
}
