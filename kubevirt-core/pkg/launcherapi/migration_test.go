package launcherapi

import (
	"context"
	"net"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestMigrationPorts(t *testing.T) {
	for _, tc := range []struct {
		name  string
		ports map[string]int
		want  MigrationPorts
		ok    bool
	}{
		{name: "defaults", ports: DefaultMigrationPorts.NodePorts(), want: DefaultMigrationPorts, ok: true},
		{
			name:  "other ports, KubeVirt's roles",
			ports: map[string]int{"40001": LibvirtConnectionPort, "40002": 0, "40003": BlockMigrationPort},
			want:  MigrationPorts{Libvirt: 40001, Migration: 40002, Block: 40003}, ok: true,
		},
		{name: "no block port", ports: map[string]int{"40001": LibvirtConnectionPort, "40002": 0}, want: MigrationPorts{Libvirt: 40001, Migration: 40002}},
		{name: "garbage keys", ports: map[string]int{"x": 0, "-5": LibvirtConnectionPort, "40003": BlockMigrationPort}, want: MigrationPorts{Block: 40003}},
		{name: "none"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := PortsFromNodePorts(tc.ports)
			if got != tc.want || ok != tc.ok {
				t.Errorf("got %+v %v, want %+v %v", got, ok, tc.want, tc.ok)
			}
		})
	}
	want := map[string]int{"22222": 22222, "49152": 0, "49153": 49153}
	if got := DefaultMigrationPorts.NodePorts(); !reflect.DeepEqual(got, want) {
		t.Errorf("NodePorts %v, want KubeVirt's %v", got, want)
	}
}

// migrator answers the migration calls.
type migrator struct {
	recorder
	migrated *MigrateRequest
}

func (m *migrator) PrepareMigrationTarget(_ context.Context, req *PrepareMigrationTargetRequest) (*DomainStatus, error) {
	return &DomainStatus{Migration: &MigrationStatus{Role: MigrationRoleTarget, UID: req.MigrationUID, TargetReady: true, Ports: &DefaultMigrationPorts}}, nil
}

func (m *migrator) Migrate(_ context.Context, req *MigrateRequest) (*DomainStatus, error) {
	m.migrated = req
	start := metav1.NewTime(time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC))
	return &DomainStatus{Defined: true, State: StateRunning, Migration: &MigrationStatus{Role: MigrationRoleSource, UID: req.MigrationUID, StartTime: &start}}, nil
}

func (m *migrator) CancelMigration(context.Context, *CancelMigrationRequest) (*Empty, error) {
	return nil, status.Error(codes.FailedPrecondition, "nothing to cancel")
}

func TestMigrationRoundTrip(t *testing.T) {
	for _, tc := range []struct {
		name   string
		server Server
		code   codes.Code
	}{
		{name: "a launcher that cannot migrate", server: &recorder{}, code: codes.Unimplemented},
		{name: "a launcher that migrates", server: &migrator{}, code: codes.OK},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sock := filepath.Join(t.TempDir(), SocketName)
			l, err := net.Listen("unix", sock)
			if err != nil {
				t.Fatal(err)
			}
			srv := NewGRPCServer(tc.server)
			go func() { _ = srv.Serve(l) }()
			defer srv.Stop()
			c, err := Dial(sock)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()

			st, err := c.PrepareMigrationTarget(ctx, &PrepareMigrationTargetRequest{MigrationUID: "m1"})
			if status.Code(err) != tc.code {
				t.Fatalf("PrepareMigrationTarget: %v, want %v", err, tc.code)
			}
			if err == nil && (st.Migration == nil || !st.Migration.TargetReady || *st.Migration.Ports != DefaultMigrationPorts) {
				t.Errorf("PrepareMigrationTarget status %+v", st.Migration)
			}
			req := &MigrateRequest{MigrationUID: "m1", TargetAddress: "10.213.0.9", Ports: DefaultMigrationPorts, BandwidthMiB: 64}
			st, err = c.Migrate(ctx, req)
			if status.Code(err) != tc.code {
				t.Fatalf("Migrate: %v, want %v", err, tc.code)
			}
			if m, ok := tc.server.(*migrator); ok {
				if !reflect.DeepEqual(m.migrated, req) || st.Migration.StartTime == nil || !st.Migration.StartTime.Equal(&metav1.Time{Time: time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)}) {
					t.Errorf("Migrate: server got %+v, client %+v", m.migrated, st.Migration)
				}
			}
			want := codes.FailedPrecondition
			if tc.code != codes.OK {
				want = tc.code
			}
			if err := c.CancelMigration(ctx, &CancelMigrationRequest{MigrationUID: "m1"}); status.Code(err) != want {
				t.Errorf("CancelMigration: %v, want %v", err, want)
			}
		})
	}
}
