package vmip

import (
	"context"
	"fmt"
	"time"

	"k8s.io/client-go/tools/events"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	v1alpha2 "github.com/d8virt/api/core/v1alpha2"
	"github.com/d8virt/virtualization-controller/pkg/ipam"
)

// Config is what the three reconcilers need beyond the manager.
type Config struct {
	Range ipam.Range
	// Retention is how long a released lease is kept before it is deleted.
	Retention time.Duration
	Clock     clock.PassiveClock
	Recorder  events.EventRecorder
}

// IndexLease is the IndexLeaseByRef index function.
func IndexLease(o client.Object) []string {
	if k := LeaseRefKey(o.(*v1alpha2.VirtualMachineIPAddressLease)); k != "" {
		return []string{k}
	}
	return nil
}

// Setup adds the lease index and the three reconcilers to mgr.
func Setup(ctx context.Context, mgr manager.Manager, cfg Config) error {
	if err := mgr.GetFieldIndexer().IndexField(ctx, &v1alpha2.VirtualMachineIPAddressLease{}, IndexLeaseByRef, IndexLease); err != nil {
		return fmt.Errorf("index leases: %w", err)
	}
	c, reader := mgr.GetClient(), mgr.GetAPIReader()
	if err := NewAddressReconciler(c, reader, cfg.Range, cfg.Clock, cfg.Recorder).SetupWithManager(mgr); err != nil {
		return fmt.Errorf("virtualmachineipaddress controller: %w", err)
	}
	if err := NewLeaseReconciler(c, reader, cfg.Retention, cfg.Clock, cfg.Recorder).SetupWithManager(mgr); err != nil {
		return fmt.Errorf("virtualmachineipaddresslease controller: %w", err)
	}
	if err := NewMachineReconciler(c).SetupWithManager(mgr); err != nil {
		return fmt.Errorf("virtualmachine address controller: %w", err)
	}
	return nil
}
