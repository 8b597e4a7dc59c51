package cmdserver

import (
	"context"
	"errors"
	"fmt"
	"net"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	kubevirtv1 "kubevirt.io/api/core/v1"

	"github.com/d8virt/kubevirt-core/pkg/launcherapi"
	"github.com/d8virt/kubevirt-core/pkg/virtlauncher/feed"
	"github.com/d8virt/kubevirt-core/pkg/virtlauncher/launcher"
)

// fakeDomain records what the server asks for and fails every command with err.
type fakeDomain struct {
	feed *feed.Feed[launcherapi.DomainStatus]

	mu      sync.Mutex
	started []string
	graces  []time.Duration
	err     error
}

func (d *fakeDomain) Start(_ context.Context, vmi *kubevirtv1.VirtualMachineInstance) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.started = append(d.started, vmi.Name)
	if d.err == nil {
		d.feed.Publish(launcherapi.DomainStatus{Defined: true, State: launcherapi.StateRunning})
	}
	return d.err
}

func (d *fakeDomain) Shutdown(grace time.Duration) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.graces = append(d.graces, grace)
	return d.err
}

func (d *fakeDomain) fail() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.err
}

func (d *fakeDomain) Kill() error                                    { return d.fail() }
func (d *fakeDomain) Pause() error                                   { return d.fail() }
func (d *fakeDomain) Unpause() error                                 { return d.fail() }
func (d *fakeDomain) SoftReboot() error                              { return d.fail() }
func (d *fakeDomain) Reset() error                                   { return d.fail() }
func (d *fakeDomain) Freeze() error                                  { return d.fail() }
func (d *fakeDomain) Unfreeze() error                                { return d.fail() }
func (d *fakeDomain) Status() launcherapi.DomainStatus               { return d.feed.Current() }
func (d *fakeDomain) Watch() *feed.Watcher[launcherapi.DomainStatus] { return d.feed.Watch() }

func (d *fakeDomain) setErr(err error) {
	d.mu.Lock()
	d.err = err
	d.mu.Unlock()
}

var id = Identity{Name: "vm", Namespace: "ns", UID: "uid-1"}

func vmi(name, namespace, uid string) *kubevirtv1.VirtualMachineInstance {
	return &kubevirtv1.VirtualMachineInstance{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace, UID: types.UID(uid)}}
}

// serve runs a Server for a fake domain on a unix socket and returns a client of it.
func serve(t *testing.T) (*fakeDomain, *Server, *launcherapi.Client) {
	t.Helper()
	dom := &fakeDomain{feed: feed.New(launcherapi.DomainStatus{})}
	srv := New(dom, id, 30*time.Second, nil)
	sock := filepath.Join(t.TempDir(), launcherapi.SocketName)
	lis, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	gs := launcherapi.NewGRPCServer(srv)
	go func() { _ = gs.Serve(lis) }()
	t.Cleanup(func() {
		dom.feed.Close()
		gs.Stop()
	})
	c, err := launcherapi.Dial(sock)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return dom, srv, c
}

func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	return c
}

func TestSync(t *testing.T) {
	dom, _, c := serve(t)
	tests := []struct {
		name string
		vmi  *kubevirtv1.VirtualMachineInstance
		want codes.Code
	}{
		{"no VMI", nil, codes.InvalidArgument},
		{"other name", vmi("other", "ns", "uid-1"), codes.InvalidArgument},
		{"other namespace", vmi("vm", "other", "uid-1"), codes.InvalidArgument},
		{"the launcher's VMI", vmi("vm", "ns", "uid-1"), codes.OK},
		{"again", vmi("vm", "ns", "uid-1"), codes.OK},
	}
	for _, tt := range tests {
		st, err := c.Sync(ctx(t), &launcherapi.SyncRequest{VMI: tt.vmi})
		if status.Code(err) != tt.want {
			t.Fatalf("%s: Sync error %v, want code %s", tt.name, err, tt.want)
		}
		if err == nil && (!st.Defined || st.State != launcherapi.StateRunning) {
			t.Errorf("%s: Sync returned %+v, want the running domain's status", tt.name, st)
		}
	}
	if _, err := c.Sync(ctx(t), &launcherapi.SyncRequest{VMI: vmi("vm", "ns", "uid-2")}); status.Code(err) != codes.InvalidArgument {
		t.Errorf("Sync of another UID: %v, want InvalidArgument", err)
	}
	// Only matching VMIs reach the domain; repeating the Sync is the domain's to ignore.
	if fmt.Sprint(dom.started) != "[vm vm]" {
		t.Errorf("domain started %v, want [vm vm]", dom.started)
	}
}

// TestErrorCodes checks that the handler can tell a refusal it may retry later from a VMI that
// can never run and from a broken launcher.
func TestErrorCodes(t *testing.T) {
	dom, _, c := serve(t)
	tests := []struct {
		err  error
		want codes.Code
	}{
		{nil, codes.OK},
		{launcher.ErrNoGuestAgent, codes.FailedPrecondition},
		{launcher.ErrNotStarted, codes.FailedPrecondition},
		{fmt.Errorf("pause: %w", launcher.ErrFinished), codes.FailedPrecondition},
		{launcher.ErrPaused, codes.FailedPrecondition},
		{&launcher.InvalidVMIError{Err: errors.New("spec.domain.devices.disks[0]: volume not found")}, codes.InvalidArgument},
		{errors.New("libvirt says no"), codes.Internal},
	}
	calls := map[string]func(context.Context) error{
		"Freeze":     c.Freeze,
		"Unfreeze":   c.Unfreeze,
		"Pause":      c.Pause,
		"Unpause":    c.Unpause,
		"SoftReboot": c.SoftReboot,
		"Reset":      c.Reset,
		"Kill":       c.Kill,
		"Shutdown":   func(ctx context.Context) error { return c.Shutdown(ctx, &launcherapi.ShutdownRequest{}) },
		"Sync": func(ctx context.Context) error {
			_, err := c.Sync(ctx, &launcherapi.SyncRequest{VMI: vmi("vm", "ns", "uid-1")})
			return err
		},
	}
	for _, tt := range tests {
		dom.setErr(tt.err)
		for name, call := range calls {
			err := call(ctx(t))
			if status.Code(err) != tt.want {
				t.Errorf("%s with domain error %v: got %v, want code %s", name, tt.err, err, tt.want)
			}
			if tt.err != nil && err != nil && !strings.HasSuffix(err.Error(), "desc = "+tt.err.Error()) {
				t.Errorf("%s: error %q, want the domain's message %q", name, err, tt.err.Error())
			}
		}
	}
}

func TestShutdownGrace(t *testing.T) {
	dom, _, c := serve(t)
	for _, g := range []int64{0, 5} {
		if err := c.Shutdown(ctx(t), &launcherapi.ShutdownRequest{GracePeriodSeconds: g}); err != nil {
			t.Fatal(err)
		}
	}
	if want := []time.Duration{30 * time.Second, 5 * time.Second}; fmt.Sprint(dom.graces) != fmt.Sprint(want) {
		t.Errorf("grace periods %v, want %v (the launcher's own when the request names none)", dom.graces, want)
	}
}

// TestWatch checks the fan-out to several watchers, that the final status ends each stream, and
// that delivering it releases the launcher.
func TestWatch(t *testing.T) {
	dom, srv, c := serve(t)
	const watchers = 3
	type seen struct {
		states []launcherapi.DomainState
		err    error
	}
	results := make(chan seen, watchers)
	ready := make(chan struct{}, watchers)
	for range watchers {
		w, err := c.Watch(ctx(t))
		if err != nil {
			t.Fatal(err)
		}
		go func() {
			var s seen
			for {
				st, err := w.Recv()
				if err != nil {
					s.err = err
					results <- s
					return
				}
				if len(s.states) == 0 {
					ready <- struct{}{}
				}
				s.states = append(s.states, st.State)
			}
		}()
	}
	// Every watcher got the current status before anything changes.
	for range watchers {
		select {
		case <-ready:
		case <-time.After(5 * time.Second):
			t.Fatal("a watcher got no initial status")
		}
	}
	select {
	case <-srv.FinalDelivered():
		t.Fatal("final status delivered before there was one")
	default:
	}
	dom.feed.Publish(launcherapi.DomainStatus{Defined: true, State: launcherapi.StateRunning})
	time.Sleep(100 * time.Millisecond)
	dom.feed.Publish(launcherapi.DomainStatus{Defined: true, State: launcherapi.StateShutoff,
		Result: &launcherapi.Result{Reason: "Shutdown", ExitCode: 0}})
	for range watchers {
		select {
		case s := <-results:
			// The stream ends cleanly (EOF) right after the final status; intermediate ones may be
			// skipped by a slow watcher, the final one never.
			if s.err == nil || s.err.Error() != "EOF" {
				t.Errorf("stream ended with %v, want EOF", s.err)
			}
			if len(s.states) < 2 || s.states[0] != "" || s.states[len(s.states)-1] != launcherapi.StateShutoff {
				t.Errorf("watcher saw %v, want the initial status first and Shutoff last", s.states)
			}
		case <-time.After(5 * time.Second):
			t.Fatal("a watch stream did not end after the final status")
		}
	}
	select {
	case <-srv.FinalDelivered():
	case <-time.After(time.Second):
		t.Fatal("FinalDelivered not closed after the watchers got the final status")
	}
}

func TestStatusDeliversFinal(t *testing.T) {
	dom, srv, c := serve(t)
	if _, err := c.Status(ctx(t)); err != nil {
		t.Fatal(err)
	}
	select {
	case <-srv.FinalDelivered():
		t.Fatal("FinalDelivered closed without a final status")
	default:
	}
	dom.feed.Publish(launcherapi.DomainStatus{Result: &launcherapi.Result{Reason: "Crashed", ExitCode: 2}})
	st, err := c.Status(ctx(t))
	if err != nil || st.Result == nil || st.Result.ExitCode != 2 {
		t.Fatalf("Status = %+v, %v", st, err)
	}
	select {
	case <-srv.FinalDelivered():
	case <-time.After(time.Second):
		t.Fatal("FinalDelivered not closed after Status returned the final status")
	}
}
