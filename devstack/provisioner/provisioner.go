package provisioner

import (
	"context"
	"fmt"
	"log/slog"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/sig-storage-lib-external-provisioner/v13/controller"
)

// Store is the part of hostvol.Store the provisioner and the resizer use.
type Store interface {
	Path(name string, mode corev1.PersistentVolumeMode) string
	Exists(name string) bool
	Create(ctx context.Context, name string, mode corev1.PersistentVolumeMode, size int64) error
	Ensure(ctx context.Context, name string, mode corev1.PersistentVolumeMode) error
	Grow(ctx context.Context, name string, mode corev1.PersistentVolumeMode, size int64) error
	ResizeFS(ctx context.Context, name string) error
	Remove(ctx context.Context, name string) error
}

// Provisioner makes and deletes volumes for the library's ProvisionController.
type Provisioner struct {
	store Store
	log   *slog.Logger
}

var _ controller.BlockProvisioner = (*Provisioner)(nil)

// New returns a provisioner of volumes in store.
func New(store Store, log *slog.Logger) *Provisioner {
	return &Provisioner{store: store, log: log}
}

// SupportsBlock says yes: Block claims get the loop device.
func (p *Provisioner) SupportsBlock(context.Context) bool { return true }

// Provision makes the claim's volume and returns its PV.
func (p *Provisioner) Provision(ctx context.Context, opts controller.ProvisionOptions) (*corev1.PersistentVolume, controller.ProvisioningState, error) {
	req, err := RequestFor(opts)
	if err != nil {
		return nil, controller.ProvisioningFinished, err
	}
	if err := p.store.Create(ctx, req.Name, req.Mode, req.Size); err != nil {
		// The volume may be half made: try again.
		return nil, controller.ProvisioningInBackground, fmt.Errorf("create volume: %w", err)
	}
	p.log.Info("volume provisioned", "pv", req.Name, "claim", opts.PVC.Namespace+"/"+opts.PVC.Name,
		"mode", req.Mode, "bytes", req.Size, "node", opts.SelectedNodeName)
	return NewPV(opts, req, p.store.Path(req.Name, req.Mode)), controller.ProvisioningFinished, nil
}

// Delete removes a released volume: its mount, loop device and file.
func (p *Provisioner) Delete(ctx context.Context, pv *corev1.PersistentVolume) error {
	if !Ours(pv) {
		return &controller.IgnoredError{Reason: "not made by " + Name}
	}
	if err := p.store.Remove(ctx, pv.Name); err != nil {
		return fmt.Errorf("delete volume: %w", err)
	}
	p.log.Info("volume deleted", "pv", pv.Name)
	return nil
}

// Recover attaches (and mounts) the volume of every PV of this provisioner whose file is in the
// store, as after a reboot or `devcluster down`, so that pods find them when their nodes start.
// PVs whose file is missing are reported; they are not deleted.
func Recover(ctx context.Context, store Store, pvs []corev1.PersistentVolume, log *slog.Logger) error {
	var missing []string
	for i := range pvs {
		pv := &pvs[i]
		if !Ours(pv) {
			continue
		}
		if !store.Exists(pv.Name) {
			missing = append(missing, pv.Name)
			continue
		}
		if err := store.Ensure(ctx, pv.Name, pvMode(pv)); err != nil {
			return fmt.Errorf("recover %s: %w", pv.Name, err)
		}
		log.Info("volume attached", "pv", pv.Name, "mode", pvMode(pv))
	}
	if len(missing) > 0 {
		log.Error("volumes lost: their files are not in the store", "pvs", missing)
	}
	return nil
}
