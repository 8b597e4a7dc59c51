package wsrelay

import (
	"fmt"
	"strconv"
	"strings"
)

// PortForward is the target of a port-forward stream, from the path's {port} and optional
// {protocol} (KubeVirt's .../portforward/{port:[0-9]+}/{protocol:tcp|udp}).
type PortForward struct {
	Port int
	// Protocol is "tcp" or "udp", which are also the networks net.Dial takes.
	Protocol string
}

// ParsePortForward checks the path's port and protocol; an empty protocol is tcp. The error
// says what is wrong, for a 404 (KubeVirt's routes do not match such paths).
func ParsePortForward(port, protocol string) (PortForward, error) {
	if protocol == "" {
		protocol = "tcp"
	}
	if protocol != "tcp" && protocol != "udp" {
		return PortForward{}, fmt.Errorf("protocol %q is not tcp or udp", protocol)
	}
	n, err := strconv.Atoi(port)
	if err != nil || n < 1 || n > 65535 || strings.Trim(port, "0123456789") != "" {
		return PortForward{}, fmt.Errorf("port %q is not a number from 1 to 65535", port)
	}
	return PortForward{Port: n, Protocol: protocol}, nil
}

// Path is the stream's path suffix after the VMI: portforward/<port>/<protocol>.
func (p PortForward) Path() string {
	return "portforward/" + strconv.Itoa(p.Port) + "/" + p.Protocol
}
