package launcher

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strconv"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kubevirtv1 "kubevirt.io/api/core/v1"
	"libvirt.org/go/libvirt"
	"libvirt.org/go/libvirtxml"

	"github.com/d8virt/kubevirt-core/pkg/launcherapi"
	"github.com/d8virt/kubevirt-core/pkg/virtlauncher/converter"
)

// Migrate starts moving the running guest to the target and returns; the outcome shows in the
// status. Asking again for the same migration does nothing.
func (m *Manager) Migrate(p MigrationParams) error {
	if err := p.validate(); err != nil {
		return invalidVMI(fmt.Errorf("migration: %w", err))
	}
	dom, err := m.domain()
	if err != nil {
		return err
	}
	xml, err := dom.GetXMLDesc(0)
	if err != nil {
		return fmt.Errorf("migration: read the domain XML: %w", err)
	}
	m.mu.Lock()
	disks, err := planDisks(xml, m.vmi)
	if err != nil {
		m.mu.Unlock()
		return fmt.Errorf("migration: %w", err)
	}
	if cur := m.mig; cur != nil {
		switch {
		case cur.status.UID == p.UID:
			m.mu.Unlock()
			return nil
		case cur.status.Role == launcherapi.MigrationRoleSource && !cur.status.Completed && !cur.status.Failed:
			m.mu.Unlock()
			return fmt.Errorf("%w (%s)", ErrMigrationInProgress, cur.status.UID)
		}
		// An earlier migration brought the guest here, or one out failed: this one replaces it.
	}
	now := metav1.Now()
	m.mig = &migration{
		status: launcherapi.MigrationStatus{Role: launcherapi.MigrationRoleSource, UID: p.UID, StartTime: &now},
		target: p.TargetAddress,
	}
	mig := m.mig
	log := m.log.With("migration", p.UID, "target", p.TargetAddress)
	m.mu.Unlock()
	// Published before returning: the caller's next look at the status shows the migration.
	m.publishMigration()
	go m.migrateOut(dom, mig, p, disks, log)
	return nil
}

// migrationFlags and parameters of a peer-to-peer live migration to p, copying disks.Copy (the
// launcher-local ones; their backing images exist on the target). Shared disks that the host
// caches make libvirt refuse the migration as unsafe; KubeVirt then asks for it anyway
// (VIR_MIGRATE_UNSAFE), and so does this: a claim's volume is the same file on both sides.
func migrationRequest(p MigrationParams, disks diskPlan) (string, *libvirt.DomainMigrateParameters, libvirt.DomainMigrateFlags) {
	host := func(port int) string { return net.JoinHostPort(p.TargetAddress, strconv.Itoa(port)) }
	dconn := "qemu+tcp://" + host(p.Ports.Libvirt) + "/system"
	params := &libvirt.DomainMigrateParameters{URISet: true, URI: "tcp://" + host(p.Ports.Migration)}
	flags := libvirt.MIGRATE_LIVE | libvirt.MIGRATE_PEER2PEER | libvirt.MIGRATE_ABORT_ON_ERROR
	if len(disks.Copy) > 0 {
		flags |= libvirt.MIGRATE_NON_SHARED_INC
		params.MigrateDisksSet, params.MigrateDisks = true, disks.Copy
		params.DisksPortSet, params.DisksPort = true, p.Ports.Block
	}
	if len(disks.SharedCached) > 0 {
		flags |= libvirt.MIGRATE_UNSAFE
	}
	if p.BandwidthMiB > 0 {
		params.BandwidthSet, params.Bandwidth = true, p.BandwidthMiB
	}
	return dconn, params, flags
}

// migrateOut runs the migration job and records its outcome. On success the domain is gone here
// and the loop ends the launcher with ReasonMigrated; on failure the guest goes on running here.
func (m *Manager) migrateOut(dom *libvirt.Domain, mig *migration, p MigrationParams, disks diskPlan, log *slog.Logger) {
	dconn, params, flags := migrationRequest(p, disks)
	log.Info("migrating the guest", "dest", dconn, "uri", params.URI, "copied", disks.Copy, "sharedCached", disks.SharedCached)
	stop := make(chan struct{})
	go m.followJob(dom, mig, stop)
	err := dom.MigrateToURI3(dconn, params, flags)
	close(stop)
	now := metav1.Now()
	m.mu.Lock()
	if err != nil {
		mig.status.Failed = true
		mig.status.Aborted = mig.cancelled
		mig.status.Message = err.Error()
		if mig.timedOut != "" {
			mig.status.Message = "migration aborted: " + mig.timedOut + ": " + err.Error()
		}
	} else {
		mig.status.Completed = true
		mig.status.Progress = nil
	}
	if mig.status.EndTime == nil {
		mig.status.EndTime = &now
	}
	m.mu.Unlock()
	if err != nil {
		log.Error("migration failed; the guest goes on running here", "err", err, "cancelled", mig.cancelled)
	} else {
		log.Info("migration completed", "took", now.Sub(mig.status.StartTime.Time).Round(time.Millisecond).String())
	}
	m.pokeLoop()
}

// KubeVirt's default migration timeouts: a job whose remaining data has not shrunk for
// ProgressTimeout is aborted, and so is one that takes longer than CompletionTimeoutPerGiB for
// every GiB it moves.
const (
	ProgressTimeout         = 150 * time.Second
	CompletionTimeoutPerGiB = 150 * time.Second
)

// jobWatch decides when a migration job is stuck, from its statistics.
type jobWatch struct {
	start, lastProgress time.Time
	leastRemaining      uint64
}

// check takes the job's statistics at now and returns why to abort it, or "".
func (w *jobWatch) check(now time.Time, total, remaining uint64) string {
	if w.lastProgress.IsZero() || remaining < w.leastRemaining {
		w.leastRemaining, w.lastProgress = remaining, now
	}
	if d := now.Sub(w.lastProgress); d >= ProgressTimeout {
		return fmt.Sprintf("no progress for %s", d.Round(time.Second))
	}
	gib := (total + 1<<30 - 1) >> 30
	limit := CompletionTimeoutPerGiB * time.Duration(max(gib, 1))
	if d := now.Sub(w.start); d >= limit {
		return fmt.Sprintf("not completed within %s (%s per GiB of %d GiB)", limit, CompletionTimeoutPerGiB, max(gib, 1))
	}
	return ""
}

// followJob publishes the job's progress every second until stop, and aborts a stuck job.
func (m *Manager) followJob(dom *libvirt.Domain, mig *migration, stop <-chan struct{}) {
	t := time.NewTicker(time.Second)
	defer t.Stop()
	w := &jobWatch{start: time.Now()}
	for {
		select {
		case <-stop:
			return
		case <-t.C:
		}
		info, err := dom.GetJobStats(0)
		if err != nil || info.Type == libvirt.DOMAIN_JOB_NONE {
			continue
		}
		m.mu.Lock()
		if !mig.status.Completed && !mig.status.Failed {
			mig.status.Progress = &launcherapi.MigrationProgress{
				DataTotal: info.DataTotal, DataProcessed: info.DataProcessed, DataRemaining: info.DataRemaining,
			}
		}
		m.mu.Unlock()
		m.pokeLoop()
		if why := w.check(time.Now(), info.DataTotal, info.DataRemaining); why != "" {
			m.log.Warn("aborting the migration", "why", why, "migration", mig.status.UID)
			m.mu.Lock()
			mig.timedOut = why
			m.mu.Unlock()
			if err := dom.AbortJob(); err != nil {
				m.log.Error("abort migration", "err", err)
			}
			return
		}
	}
}

// CancelMigration aborts the outgoing migration uid if it still runs; the guest stays here. A
// migration not started yet is recorded as aborted, so that a late Migrate for it does nothing:
// whoever asked to cancel learns the outcome from the status either way.
func (m *Manager) CancelMigration(uid string) error {
	if uid == "" {
		return invalidVMI(errors.New("migration: no UID"))
	}
	m.mu.Lock()
	mig, dom := m.mig, m.dom
	switch {
	case m.result != nil || dom == nil:
		m.mu.Unlock()
		return nil
	case mig == nil || mig.status.UID != uid && (mig.status.Role != launcherapi.MigrationRoleSource || mig.status.Completed || mig.status.Failed):
		now := metav1.Now()
		m.mig = &migration{status: launcherapi.MigrationStatus{
			Role: launcherapi.MigrationRoleSource, UID: uid, Failed: true, Aborted: true,
			Message: "cancelled before it started", StartTime: &now, EndTime: &now,
		}}
		m.mu.Unlock()
		m.publishMigration()
		return nil
	case mig.status.UID != uid || mig.status.Completed || mig.status.Failed:
		m.mu.Unlock()
		return nil
	}
	mig.cancelled = true
	m.mu.Unlock()
	if err := dom.AbortJob(); err != nil {
		var lerr libvirt.Error
		if errors.As(err, &lerr) && lerr.Code == libvirt.ERR_OPERATION_INVALID {
			return nil // no job (any more): finished either way
		}
		return fmt.Errorf("abort migration: %w", err)
	}
	return nil
}

// diskPlan is what a migration does with the domain's disks, by target device.
type diskPlan struct {
	// Copy are the disks the launcher made for this run (containerDisk and ephemeral overlays,
	// emptyDisks): the migration copies them.
	Copy []string
	// SharedCached are the writable disks that are the same file on both sides (a claim's) and
	// that the host caches (a cache mode other than none or directsync).
	SharedCached []string
}

// planDisks sorts the domain's writable disks: the VMI's launcher-local volumes are copied,
// the others are shared. Read-only disks (cloud-init, config ISOs) are neither copied nor
// written.
func planDisks(domXML string, vmi *kubevirtv1.VirtualMachineInstance) (diskPlan, error) {
	var dom libvirtxml.Domain
	if err := dom.Unmarshal(domXML); err != nil {
		return diskPlan{}, fmt.Errorf("parse domain XML: %w", err)
	}
	local := map[string]bool{}
	if vmi != nil {
		for _, v := range vmi.Spec.Volumes {
			if v.ContainerDisk != nil || v.EmptyDisk != nil || v.Ephemeral != nil {
				local[v.Name] = true
			}
		}
	}
	var plan diskPlan
	if dom.Devices == nil {
		return plan, nil
	}
	for _, d := range dom.Devices.Disks {
		if d.Alias == nil || d.Target == nil || d.ReadOnly != nil {
			continue
		}
		switch {
		case local[strings.TrimPrefix(d.Alias.Name, converter.AliasPrefix)]:
			plan.Copy = append(plan.Copy, d.Target.Dev)
		case d.Driver == nil || (d.Driver.Cache != "none" && d.Driver.Cache != "directsync"):
			plan.SharedCached = append(plan.SharedCached, d.Target.Dev)
		}
	}
	return plan, nil
}
