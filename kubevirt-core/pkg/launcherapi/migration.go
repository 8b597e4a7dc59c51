package launcherapi

import (
	"context"
	"strconv"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	kubevirtv1 "kubevirt.io/api/core/v1"
)

// Roles a launcher plays in a live migration (MigrationStatus.Role).
const (
	MigrationRoleSource = "source"
	MigrationRoleTarget = "target"
)

// Ports a migration target opens on its pod IP, as KubeVirt numbers them. The masquerade binding
// never forwards them to the guest.
const (
	// LibvirtConnectionPort reaches the target launcher's libvirtd, which the source's libvirtd
	// drives in a peer-to-peer migration.
	LibvirtConnectionPort = 22222
	// DirectMigrationPort receives QEMU's migration stream.
	DirectMigrationPort = 49152
	// BlockMigrationPort is the target QEMU's NBD server, which receives the local disks.
	BlockMigrationPort = 49153
)

// MigrationPorts are the ports of a migration target.
type MigrationPorts struct {
	Libvirt   int `json:"libvirt"`
	Migration int `json:"migration"`
	Block     int `json:"block"`
}

// DefaultMigrationPorts are the ports every target launcher uses.
var DefaultMigrationPorts = MigrationPorts{Libvirt: LibvirtConnectionPort, Migration: DirectMigrationPort, Block: BlockMigrationPort}

// NodePorts renders the ports as KubeVirt's migrationState.targetDirectMigrationNodePorts: each
// port the source connects to, mapped to the port it stands for in the target launcher (0 for the
// migration stream itself). Here the source reaches the target's ports directly.
func (p MigrationPorts) NodePorts() map[string]int {
	return map[string]int{
		strconv.Itoa(p.Libvirt):   LibvirtConnectionPort,
		strconv.Itoa(p.Migration): 0,
		strconv.Itoa(p.Block):     BlockMigrationPort,
	}
}

// PortsFromNodePorts reads NodePorts back. A map that misses a role returns false.
func PortsFromNodePorts(m map[string]int) (MigrationPorts, bool) {
	var p MigrationPorts
	for k, v := range m {
		port, err := strconv.Atoi(k)
		if err != nil || port <= 0 {
			continue
		}
		switch v {
		case LibvirtConnectionPort:
			p.Libvirt = port
		case 0:
			p.Migration = port
		case BlockMigrationPort:
			p.Block = port
		}
	}
	return p, p.Libvirt > 0 && p.Migration > 0 && p.Block > 0
}

// PrepareMigrationTargetRequest makes a launcher that has not started a guest wait for one
// migrated from another launcher: it prepares the VMI's disks and network as a start would, opens
// its libvirtd to the source, and reports TargetReady. The guest then arrives through libvirt.
type PrepareMigrationTargetRequest struct {
	VMI          *kubevirtv1.VirtualMachineInstance `json:"vmi"`
	MigrationUID string                             `json:"migrationUID"`
}

// MigrateRequest makes the launcher of a running guest move it, live, to the target launcher at
// TargetAddress. The call returns once the migration started; its progress and outcome show in
// DomainStatus.Migration.
type MigrateRequest struct {
	MigrationUID  string         `json:"migrationUID"`
	TargetAddress string         `json:"targetAddress"`
	Ports         MigrationPorts `json:"ports"`
	// BandwidthMiB limits the migration stream in MiB/s; zero leaves it unlimited.
	BandwidthMiB uint64 `json:"bandwidthMiB,omitempty"`
}

// CancelMigrationRequest aborts the source's migration with that UID, if it still runs.
type CancelMigrationRequest struct {
	MigrationUID string `json:"migrationUID"`
}

// MigrationServer is the launcher's side of live migration.
type MigrationServer interface {
	PrepareMigrationTarget(context.Context, *PrepareMigrationTargetRequest) (*DomainStatus, error)
	Migrate(context.Context, *MigrateRequest) (*DomainStatus, error)
	CancelMigration(context.Context, *CancelMigrationRequest) (*Empty, error)
}

// UnimplementedMigrationServer answers every migration call with Unimplemented, for launchers
// (and fakes) that cannot migrate.
type UnimplementedMigrationServer struct{}

func (UnimplementedMigrationServer) PrepareMigrationTarget(context.Context, *PrepareMigrationTargetRequest) (*DomainStatus, error) {
	return nil, status.Error(codes.Unimplemented, "this launcher cannot receive migrations")
}

func (UnimplementedMigrationServer) Migrate(context.Context, *MigrateRequest) (*DomainStatus, error) {
	return nil, status.Error(codes.Unimplemented, "this launcher cannot migrate")
}

func (UnimplementedMigrationServer) CancelMigration(context.Context, *CancelMigrationRequest) (*Empty, error) {
	return nil, status.Error(codes.Unimplemented, "this launcher cannot migrate")
}

func (c *Client) PrepareMigrationTarget(ctx context.Context, req *PrepareMigrationTargetRequest) (*DomainStatus, error) {
	return invoke[DomainStatus](ctx, c, "PrepareMigrationTarget", req)
}

func (c *Client) Migrate(ctx context.Context, req *MigrateRequest) (*DomainStatus, error) {
	return invoke[DomainStatus](ctx, c, "Migrate", req)
}

func (c *Client) CancelMigration(ctx context.Context, req *CancelMigrationRequest) error {
	_, err := invoke[Empty](ctx, c, "CancelMigration", req)
	return err
}

// MigrationProgress is how far a source's migration got, from libvirt's job statistics.
type MigrationProgress struct {
	DataTotal     uint64 `json:"dataTotal,omitempty"`
	DataProcessed uint64 `json:"dataProcessed,omitempty"`
	DataRemaining uint64 `json:"dataRemaining,omitempty"`
}
