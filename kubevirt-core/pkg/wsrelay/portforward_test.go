package wsrelay

import "testing"

func TestParsePortForward(t *testing.T) {
	for _, tc := range []struct {
		port, protocol string
		want           PortForward
		ok             bool
	}{
		{"8080", "", PortForward{8080, "tcp"}, true},
		{"53", "udp", PortForward{53, "udp"}, true},
		{"1", "tcp", PortForward{1, "tcp"}, true},
		{"65535", "tcp", PortForward{65535, "tcp"}, true},
		{"0", "tcp", PortForward{}, false},
		{"65536", "", PortForward{}, false},
		{"-1", "", PortForward{}, false},
		{"+80", "", PortForward{}, false},
		{"080", "", PortForward{80, "tcp"}, true},
		{"http", "", PortForward{}, false},
		{"80", "sctp", PortForward{}, false},
		{"80", "TCP", PortForward{}, false},
	} {
		got, err := ParsePortForward(tc.port, tc.protocol)
		if (err == nil) != tc.ok || got != tc.want {
			t.Errorf("ParsePortForward(%q, %q) = %+v, %v; want %+v, ok %v", tc.port, tc.protocol, got, err, tc.want, tc.ok)
		}
	}
	if p := (PortForward{22, "tcp"}).Path(); p != "portforward/22/tcp" {
		t.Errorf("path %q", p)
	}
}
