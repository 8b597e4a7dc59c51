package e2e

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	kubevirtv1 "kubevirt.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/d8virt/devstack/guest/guesttest"
	"github.com/d8virt/kubevirt-core/pkg/console"
)

// testPortForward forwards a TCP port of a guest through virt-api and virt-handler, as `virtctl
// port-forward` does for each connection, by the VMI and by the VM, and checks KubeVirt's answers
// to forwards that cannot work.
func testPortForward(t *testing.T, c *cluster, kc client.Client, ns string) {
	ctx := context.Background()
	halted := newVM(ns, "pf-halted")
	halt := kubevirtv1.RunStrategyHalted
	halted.Spec.RunStrategy = &halt
	createVM(t, kc, halted)
	vm := newVM(ns, "pf")
	createVM(t, kc, vm)
	waitRunning(t, kc, ns, vm.Name, "")
	con := guestConsole(t, c, vm)
	guestRun(t, con, guesttest.PingServer)

	for _, resource := range []string{console.VMIs, console.VMs} {
		t.Run(resource, func(t *testing.T) {
			var fwd *guesttest.Console
			// The guest's DHCP lease, and so the forward, may still be on its way.
			eventually(t, 2*time.Minute, "forward to the guest", func(ctx context.Context) error {
				conn, err := console.PortForward(ctx, c.rest, resource, ns, vm.Name, guesttest.PingServerPort, "tcp")
				if err != nil {
					return err
				}
				fc := guesttest.NewConsole(conn)
				if _, err := fc.WaitFor(guesttest.PingGreeting, 10*time.Second); err != nil {
					_ = fc.Close()
					return err
				}
				fwd = fc
				return nil
			})
			defer fwd.Close()
			if err := guesttest.Ping(fwd, 30*time.Second); err != nil {
				t.Fatal(err)
			}
		})
	}

	for _, tc := range []struct {
		name               string
		resource, vmName   string
		port, protocol     string
		wantCode           int
		wantMessagePattern string
	}{
		{"closed port", console.VMIs, vm.Name, "4243", "tcp", http.StatusInternalServerError, "can't dial tcp"},
		{"port out of range", console.VMIs, vm.Name, "70000", "tcp", http.StatusNotFound, "not a number from 1 to 65535"},
		{"port not a number", console.VMIs, vm.Name, "ssh", "tcp", http.StatusNotFound, "not a number"},
		{"unknown protocol", console.VMIs, vm.Name, "4242", "sctp", http.StatusNotFound, "not tcp or udp"},
		{"no such VMI", console.VMIs, "pf-missing", "4242", "tcp", http.StatusNotFound, "not found"},
		{"no such VM", console.VMs, "pf-missing", "4242", "tcp", http.StatusNotFound, "not found"},
		{"VM not started", console.VMs, halted.Name, "4242", "tcp", http.StatusConflict, "VMI is not started"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			conn, err := console.OpenResource(ctx, c.rest, tc.resource, ns, tc.vmName, "portforward/"+tc.port+"/"+tc.protocol)
			if err == nil {
				conn.Close()
				t.Fatal("the forward opened")
			}
			var refused *console.RefusedError
			if !errors.As(err, &refused) || refused.Code != tc.wantCode || !strings.Contains(refused.Message, tc.wantMessagePattern) {
				t.Errorf("got %v, want %d with %q", err, tc.wantCode, tc.wantMessagePattern)
			}
		})
	}
}
