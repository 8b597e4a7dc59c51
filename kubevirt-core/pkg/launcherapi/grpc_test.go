package launcherapi

import (
	"context"
	"net"
	"path/filepath"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kubevirtv1 "kubevirt.io/api/core/v1"
)

// recorder is a launcher that remembers the VMI it got and streams two states.
type recorder struct {
	UnimplementedMigrationServer
	UnimplementedGuestAgentServer
	synced string
}

func (r *recorder) Ping(context.Context, *Empty) (*Empty, error) { return &Empty{}, nil }
func (r *recorder) Sync(_ context.Context, req *SyncRequest) (*DomainStatus, error) {
	r.synced = req.VMI.Name
	return &DomainStatus{Defined: true, State: StateRunning}, nil
}
func (r *recorder) Shutdown(context.Context, *ShutdownRequest) (*Empty, error) { return &Empty{}, nil }
func (r *recorder) Kill(context.Context, *Empty) (*Empty, error)               { return &Empty{}, nil }
func (r *recorder) Pause(context.Context, *Empty) (*Empty, error)              { return &Empty{}, nil }
func (r *recorder) Unpause(context.Context, *Empty) (*Empty, error)            { return &Empty{}, nil }
func (r *recorder) Freeze(context.Context, *Empty) (*Empty, error) {
	return nil, status.Error(codes.FailedPrecondition, "guest agent not connected")
}
func (r *recorder) Unfreeze(context.Context, *Empty) (*Empty, error)   { return &Empty{}, nil }
func (r *recorder) SoftReboot(context.Context, *Empty) (*Empty, error) { return &Empty{}, nil }
func (r *recorder) Reset(context.Context, *Empty) (*Empty, error)      { return &Empty{}, nil }
func (r *recorder) Status(context.Context, *Empty) (*DomainStatus, error) {
	return &DomainStatus{Defined: true, State: StatePaused}, nil
}
func (r *recorder) DomainStats(context.Context, *Empty) (*DomainStats, error) {
	zero, rx := uint64(0), uint64(1500)
	return &DomainStats{VCPUs: []VCPUStats{{ID: 0, State: VCPURunning, TimeNanoseconds: &zero}},
		Interfaces: []InterfaceStats{{Name: "default", RxBytes: &rx}}}, nil
}
func (r *recorder) Watch(_ *Empty, s grpc.ServerStreamingServer[DomainStatus]) error {
	for _, st := range []DomainState{StateRunning, StateShutoff} {
		if err := s.Send(&DomainStatus{Defined: true, State: st}); err != nil {
			return err
		}
	}
	return nil
}

func TestRoundTrip(t *testing.T) {
	sock := filepath.Join(t.TempDir(), SocketName)
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	rec := &recorder{}
	srv := NewGRPCServer(rec)
	go func() { _ = srv.Serve(l) }()
	defer srv.Stop()

	c, err := Dial(sock)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	if err := c.Ping(ctx); err != nil {
		t.Fatalf("Ping: %v", err)
	}
	vmi := &kubevirtv1.VirtualMachineInstance{ObjectMeta: metav1.ObjectMeta{Name: "guest"}}
	st, err := c.Sync(ctx, &SyncRequest{VMI: vmi})
	if err != nil || st.State != StateRunning || rec.synced != "guest" {
		t.Fatalf("Sync = %+v, %v; server saw %q", st, err, rec.synced)
	}
	if st, err := c.Status(ctx); err != nil || st.State != StatePaused {
		t.Fatalf("Status = %+v, %v", st, err)
	}
	// A zero counter stays a zero, an unreported one stays unreported.
	if st, err := c.DomainStats(ctx); err != nil || len(st.VCPUs) != 1 || st.VCPUs[0].TimeNanoseconds == nil || *st.VCPUs[0].TimeNanoseconds != 0 ||
		st.VCPUs[0].WaitNanoseconds != nil || len(st.Interfaces) != 1 || *st.Interfaces[0].RxBytes != 1500 || st.Interfaces[0].TxBytes != nil {
		t.Fatalf("DomainStats = %+v, %v", st, err)
	}
	// Errors keep their gRPC code, so the handler can tell a refusal from a broken launcher.
	if err := c.Freeze(ctx); status.Code(err) != codes.FailedPrecondition {
		t.Fatalf("Freeze error = %v, want FailedPrecondition", err)
	}
	w, err := c.Watch(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var got []DomainState
	for {
		st, err := w.Recv()
		if err != nil {
			break
		}
		got = append(got, st.State)
	}
	if len(got) != 2 || got[0] != StateRunning || got[1] != StateShutoff {
		t.Fatalf("Watch = %v", got)
	}
}
