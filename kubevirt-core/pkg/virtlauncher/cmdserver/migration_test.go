package cmdserver

import (
	"context"
	"fmt"
	"net"
	"path/filepath"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	kubevirtv1 "kubevirt.io/api/core/v1"

	"github.com/d8virt/kubevirt-core/pkg/launcherapi"
	"github.com/d8virt/kubevirt-core/pkg/virtlauncher/feed"
	"github.com/d8virt/kubevirt-core/pkg/virtlauncher/launcher"
)

// fakeMigrator is a fake domain that migrates, failing with err.
type fakeMigrator struct {
	*fakeDomain
	prepared, migrated, cancelled []string
	err                           error
}

func (m *fakeMigrator) PrepareIncoming(_ context.Context, vmi *kubevirtv1.VirtualMachineInstance, uid string) error {
	m.prepared = append(m.prepared, vmi.Name+"/"+uid)
	if m.err == nil {
		m.feed.Publish(launcherapi.DomainStatus{Migration: &launcherapi.MigrationStatus{Role: launcherapi.MigrationRoleTarget, UID: uid, TargetReady: true}})
	}
	return m.err
}

func (m *fakeMigrator) Migrate(p launcher.MigrationParams) error {
	m.migrated = append(m.migrated, fmt.Sprintf("%s->%s:%d", p.UID, p.TargetAddress, p.Ports.Libvirt))
	return m.err
}

func (m *fakeMigrator) CancelMigration(uid string) error {
	m.cancelled = append(m.cancelled, uid)
	return m.err
}

func serveDomain(t *testing.T, dom Domain) *launcherapi.Client {
	t.Helper()
	srv := New(dom, id, 30*time.Second, nil)
	sock := filepath.Join(t.TempDir(), launcherapi.SocketName)
	lis, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	gs := launcherapi.NewGRPCServer(srv)
	go func() { _ = gs.Serve(lis) }()
	t.Cleanup(gs.Stop)
	c, err := launcherapi.Dial(sock)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func TestMigrationCalls(t *testing.T) {
	ports := launcherapi.DefaultMigrationPorts
	for _, tc := range []struct {
		name    string
		migrate bool // the domain implements Migrator
		err     error
		call    func(context.Context, *launcherapi.Client) error
		code    codes.Code
		want    func(*fakeMigrator) string
	}{
		{
			name: "prepare", migrate: true,
			call: func(ctx context.Context, c *launcherapi.Client) error {
				st, err := c.PrepareMigrationTarget(ctx, &launcherapi.PrepareMigrationTargetRequest{VMI: vmi("vm", "ns", "uid-1"), MigrationUID: "m1"})
				if err == nil && (st.Migration == nil || !st.Migration.TargetReady) {
					return fmt.Errorf("status %+v", st)
				}
				return err
			},
			want: func(m *fakeMigrator) string { return fmt.Sprint(m.prepared) },
		},
		{
			name: "prepare for another VMI", migrate: true, code: codes.InvalidArgument,
			call: func(ctx context.Context, c *launcherapi.Client) error {
				_, err := c.PrepareMigrationTarget(ctx, &launcherapi.PrepareMigrationTargetRequest{VMI: vmi("vm", "ns", "uid-2"), MigrationUID: "m1"})
				return err
			},
		},
		{
			name: "prepare without a migration", migrate: true, code: codes.InvalidArgument,
			call: func(ctx context.Context, c *launcherapi.Client) error {
				_, err := c.PrepareMigrationTarget(ctx, &launcherapi.PrepareMigrationTargetRequest{VMI: vmi("vm", "ns", "uid-1")})
				return err
			},
		},
		{
			name: "prepare on a launcher that runs a guest", migrate: true, err: launcher.ErrAlreadyRunning, code: codes.FailedPrecondition,
			call: func(ctx context.Context, c *launcherapi.Client) error {
				_, err := c.PrepareMigrationTarget(ctx, &launcherapi.PrepareMigrationTargetRequest{VMI: vmi("vm", "ns", "uid-1"), MigrationUID: "m1"})
				return err
			},
		},
		{
			name: "migrate", migrate: true,
			call: func(ctx context.Context, c *launcherapi.Client) error {
				_, err := c.Migrate(ctx, &launcherapi.MigrateRequest{MigrationUID: "m1", TargetAddress: "10.213.0.9", Ports: ports})
				return err
			},
			want: func(m *fakeMigrator) string { return fmt.Sprint(m.migrated) },
		},
		{
			name: "migrate while another runs", migrate: true, err: launcher.ErrMigrationInProgress, code: codes.FailedPrecondition,
			call: func(ctx context.Context, c *launcherapi.Client) error {
				_, err := c.Migrate(ctx, &launcherapi.MigrateRequest{MigrationUID: "m2", TargetAddress: "10.213.0.9", Ports: ports})
				return err
			},
		},
		{
			name: "migrate to nowhere", migrate: true, err: &launcher.InvalidVMIError{Err: fmt.Errorf("no address")}, code: codes.InvalidArgument,
			call: func(ctx context.Context, c *launcherapi.Client) error {
				_, err := c.Migrate(ctx, &launcherapi.MigrateRequest{MigrationUID: "m2"})
				return err
			},
		},
		{
			name: "cancel", migrate: true,
			call: func(ctx context.Context, c *launcherapi.Client) error {
				return c.CancelMigration(ctx, &launcherapi.CancelMigrationRequest{MigrationUID: "m1"})
			},
			want: func(m *fakeMigrator) string { return fmt.Sprint(m.cancelled) },
		},
		{
			name: "a domain that cannot migrate", code: codes.Unimplemented,
			call: func(ctx context.Context, c *launcherapi.Client) error {
				_, err := c.Migrate(ctx, &launcherapi.MigrateRequest{MigrationUID: "m1", TargetAddress: "10.213.0.9", Ports: ports})
				return err
			},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			base := &fakeDomain{feed: feed.New(launcherapi.DomainStatus{})}
			t.Cleanup(base.feed.Close)
			m := &fakeMigrator{fakeDomain: base, err: tc.err}
			var dom Domain = base
			if tc.migrate {
				dom = m
			}
			c := serveDomain(t, dom)
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			if err := tc.call(ctx, c); status.Code(err) != tc.code {
				t.Fatalf("error %v, want %v", err, tc.code)
			}
			if tc.want != nil {
				if got := tc.want(m); got != map[string]string{"prepare": "[vm/m1]", "migrate": "[m1->10.213.0.9:22222]", "cancel": "[m1]"}[tc.name] {
					t.Errorf("the domain saw %s", got)
				}
			}
		})
	}
}
