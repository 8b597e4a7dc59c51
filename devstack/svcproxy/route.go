package svcproxy

import (
	"fmt"
	"net/netip"
	"os/exec"
	"strings"
)

// AddLocalRoute makes every address of cidr local to this machine (`ip route replace local CIDR
// dev lo`), so listeners bind cluster IPs without an address each, and pods reach them through
// the bridge.
func AddLocalRoute(cidr netip.Prefix) error {
	return ipRoute("replace", "local", cidr.String(), "dev", "lo")
}

// DeleteLocalRoute removes the route of AddLocalRoute; a missing route is no error.
func DeleteLocalRoute(cidr netip.Prefix) error {
	err := ipRoute("del", "local", cidr.String(), "dev", "lo", "table", "local")
	if err != nil && strings.Contains(err.Error(), "No such process") {
		return nil
	}
	return err
}

func ipRoute(args ...string) error {
	out, err := exec.Command("ip", append([]string{"route"}, args...)...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("ip route %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}
