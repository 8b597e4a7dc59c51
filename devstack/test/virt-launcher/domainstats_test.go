package virtlauncher

import (
	"context"
	"testing"

	"github.com/d8virt/kubevirt-core/pkg/launcherapi"
)

// checkDomainStats reads the running guest's statistics from libvirt through the launcher, as
// virt-handler does on a scrape: the guest has booted from its disks and has its memory, so the
// counters are there, named after the VMI's devices.
func checkDomainStats(ctx context.Context, t *testing.T, l *launcherProc) {
	t.Helper()
	st, err := l.client.DomainStats(ctx)
	if err != nil {
		t.Fatalf("DomainStats: %v", err)
	}
	if st.CPU == nil || st.CPU.TimeNanoseconds == nil || *st.CPU.TimeNanoseconds == 0 {
		t.Errorf("CPU %+v: want the time the booted guest used", st.CPU)
	}
	if len(st.VCPUs) != 1 || st.VCPUs[0].TimeNanoseconds == nil || *st.VCPUs[0].TimeNanoseconds == 0 || st.VCPUs[0].State == launcherapi.VCPUUnknown {
		t.Errorf("vCPUs %+v: want one that ran", st.VCPUs)
	}
	if m := st.Memory; m == nil || m.DomainBytes == nil || *m.DomainBytes != 128<<20 || m.ResidentBytes == nil || *m.ResidentBytes == 0 {
		t.Errorf("memory %+v: want 128 MiB and a resident set", st.Memory)
	}
	disks := map[string]launcherapi.DiskStats{}
	for _, d := range st.Disks {
		disks[d.Name] = d
	}
	if d, ok := disks["containerdisk"]; !ok || d.ReadBytes == nil || *d.ReadBytes == 0 {
		t.Errorf("disks %+v: want containerdisk, read at boot", st.Disks)
	}
	if _, ok := disks["cloudinitdisk"]; !ok || len(disks) != 2 {
		t.Errorf("disks %+v: want containerdisk and cloudinitdisk", st.Disks)
	}
	if len(st.Interfaces) != 1 || st.Interfaces[0].Name != "default" || st.Interfaces[0].TxBytes == nil {
		t.Errorf("interfaces %+v: want default", st.Interfaces)
	}
}
