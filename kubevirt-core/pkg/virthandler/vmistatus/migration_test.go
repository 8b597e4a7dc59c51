package vmistatus

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kubevirtv1 "kubevirt.io/api/core/v1"

	"github.com/d8virt/kubevirt-core/pkg/launcherapi"
)

var (
	migNow   = time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	migStart = metav1.NewTime(migNow.Add(-time.Minute))
	migEnd   = metav1.NewTime(migNow.Add(-time.Second))
)

// migratingVMI runs on n1 and is handed over for a migration to n2.
func migratingVMI(mut ...func(*kubevirtv1.VirtualMachineInstanceMigrationState)) *kubevirtv1.VirtualMachineInstance {
	v := testVMI(kubevirtv1.Running)
	v.Status.NodeName = "n1"
	v.Spec.Volumes = []kubevirtv1.Volume{{Name: "root", VolumeSource: kubevirtv1.VolumeSource{ContainerDisk: &kubevirtv1.ContainerDiskSource{Image: "img"}}}}
	v.Status.Conditions = []kubevirtv1.VirtualMachineInstanceCondition{{Type: kubevirtv1.VirtualMachineInstanceReady, Status: corev1.ConditionTrue}}
	ms := &kubevirtv1.VirtualMachineInstanceMigrationState{MigrationUID: "m1", SourceNode: "n1", SourcePod: "src", TargetNode: "n2", TargetPod: "tgt"}
	for _, f := range mut {
		f(ms)
	}
	v.Status.MigrationState = ms
	return v
}

var (
	targetKnown = func(ms *kubevirtv1.VirtualMachineInstanceMigrationState) {
		ms.TargetNodeAddress = "10.213.0.9"
		ms.TargetDirectMigrationNodePorts = launcherapi.DefaultMigrationPorts.NodePorts()
	}
	started = func(ms *kubevirtv1.VirtualMachineInstanceMigrationState) { ms.StartTimestamp = migStart.DeepCopy() }
	abort   = func(ms *kubevirtv1.VirtualMachineInstanceMigrationState) { ms.AbortRequested = true }
	done    = func(ms *kubevirtv1.VirtualMachineInstanceMigrationState) {
		ms.Completed = true
		ms.EndTimestamp = migEnd.DeepCopy()
	}
)

func sourceDom(m *launcherapi.MigrationStatus) *launcherapi.DomainStatus {
	d := dom(launcherapi.StateRunning)
	if m != nil {
		m.Role = launcherapi.MigrationRoleSource
		if m.UID == "" {
			m.UID = "m1"
		}
	}
	d.Migration = m
	return d
}

func TestSourceCommand(t *testing.T) {
	for _, tc := range []struct {
		name    string
		vmi     *kubevirtv1.VirtualMachineInstance
		dom     *launcherapi.DomainStatus
		migrate bool
		cancel  bool
	}{
		{name: "no migration", vmi: testVMI(kubevirtv1.Running), dom: dom(launcherapi.StateRunning)},
		{name: "target not ready yet", vmi: migratingVMI(), dom: sourceDom(nil)},
		{name: "target ready: migrate", vmi: migratingVMI(targetKnown), dom: sourceDom(nil), migrate: true},
		{name: "an earlier migration brought the guest here", vmi: migratingVMI(targetKnown),
			dom: sourceDom(&launcherapi.MigrationStatus{UID: "m0", Completed: true}), migrate: true},
		{name: "already migrating", vmi: migratingVMI(targetKnown, started), dom: sourceDom(&launcherapi.MigrationStatus{StartTime: &migStart})},
		{name: "guest gone from the launcher", vmi: migratingVMI(targetKnown), dom: ended(0, ReasonMigrated)},
		{name: "not reported yet", vmi: migratingVMI(targetKnown)},
		{name: "abort while running", vmi: migratingVMI(targetKnown, started, abort), dom: sourceDom(&launcherapi.MigrationStatus{StartTime: &migStart}), cancel: true},
		{name: "abort before the start", vmi: migratingVMI(targetKnown, abort), dom: sourceDom(nil), cancel: true},
		{name: "abort after the end", vmi: migratingVMI(targetKnown, started, abort), dom: sourceDom(&launcherapi.MigrationStatus{Failed: true})},
		{name: "ports missing", vmi: migratingVMI(func(ms *kubevirtv1.VirtualMachineInstanceMigrationState) { ms.TargetNodeAddress = "10.213.0.9" }), dom: sourceDom(nil)},
		{name: "VMI being deleted", vmi: func() *kubevirtv1.VirtualMachineInstance {
			v := migratingVMI(targetKnown)
			v.DeletionTimestamp = &migEnd
			return v
		}(), dom: sourceDom(nil)},
		{name: "the target's node", vmi: func() *kubevirtv1.VirtualMachineInstance {
			v := migratingVMI(targetKnown)
			v.Status.NodeName = "n2"
			return v
		}(), dom: sourceDom(nil)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m, c := SourceCommand(tc.vmi, tc.dom)
			if (m != nil) != tc.migrate || (c != nil) != tc.cancel {
				t.Fatalf("migrate %+v cancel %+v, want %v %v", m, c, tc.migrate, tc.cancel)
			}
			if m != nil && (m.MigrationUID != "m1" || m.TargetAddress != "10.213.0.9" || m.Ports != launcherapi.DefaultMigrationPorts) {
				t.Errorf("request %+v", m)
			}
			if c != nil && c.MigrationUID != "m1" {
				t.Errorf("cancel %+v", c)
			}
		})
	}
}

// TestComputeOnTheSource maps the source launcher's migration into the VMI, and keeps a VMI whose
// guest moved away from ending with its launcher.
func TestComputeOnTheSource(t *testing.T) {
	pod := testPod(corev1.PodRunning)
	gone := testPod(corev1.PodSucceeded)
	final := ended(0, ReasonMigrated)
	final.Migration = &launcherapi.MigrationStatus{Role: launcherapi.MigrationRoleSource, UID: "m1", Completed: true, StartTime: &migStart, EndTime: &migEnd}
	for _, tc := range []struct {
		name   string
		vmi    *kubevirtv1.VirtualMachineInstance
		pod    *corev1.Pod
		dom    *launcherapi.DomainStatus
		phase  kubevirtv1.VirtualMachineInstancePhase
		check  func(*kubevirtv1.VirtualMachineInstanceMigrationState) bool
		method kubevirtv1.VirtualMachineInstanceMigrationMethod
	}{
		{
			name: "job started", vmi: migratingVMI(targetKnown), pod: pod, dom: sourceDom(&launcherapi.MigrationStatus{StartTime: &migStart}),
			phase: kubevirtv1.Running, method: kubevirtv1.BlockMigration,
			check: func(ms *kubevirtv1.VirtualMachineInstanceMigrationState) bool {
				return ms.StartTimestamp.Equal(&migStart) && ms.Mode == kubevirtv1.MigrationPreCopy && !ms.Completed
			},
		},
		{
			name: "another migration's report is not ours", vmi: migratingVMI(targetKnown), pod: pod, dom: sourceDom(&launcherapi.MigrationStatus{UID: "m0", StartTime: &migStart}),
			phase: kubevirtv1.Running,
			check: func(ms *kubevirtv1.VirtualMachineInstanceMigrationState) bool { return ms.StartTimestamp == nil },
		},
		{
			name: "failed: the guest goes on here", vmi: migratingVMI(targetKnown, started), pod: pod,
			dom:   sourceDom(&launcherapi.MigrationStatus{StartTime: &migStart, Failed: true, Message: "boom", EndTime: &migEnd}),
			phase: kubevirtv1.Running, method: kubevirtv1.BlockMigration,
			check: func(ms *kubevirtv1.VirtualMachineInstanceMigrationState) bool {
				return ms.Failed && ms.FailureReason == "boom" && ms.EndTimestamp.Equal(&migEnd) && ms.AbortStatus == ""
			},
		},
		{
			name: "aborted", vmi: migratingVMI(targetKnown, started, abort), pod: pod,
			dom:   sourceDom(&launcherapi.MigrationStatus{StartTime: &migStart, Failed: true, Aborted: true, Message: "cancelled"}),
			phase: kubevirtv1.Running, method: kubevirtv1.BlockMigration,
			check: func(ms *kubevirtv1.VirtualMachineInstanceMigrationState) bool {
				return ms.Failed && ms.AbortStatus == kubevirtv1.MigrationAbortSucceeded && ms.EndTimestamp.Equal(&metav1.Time{Time: migNow})
			},
		},
		{
			name: "abort in progress", vmi: migratingVMI(targetKnown, started, abort), pod: pod, dom: sourceDom(&launcherapi.MigrationStatus{StartTime: &migStart}),
			phase: kubevirtv1.Running, method: kubevirtv1.BlockMigration,
			check: func(ms *kubevirtv1.VirtualMachineInstanceMigrationState) bool {
				return ms.AbortStatus == kubevirtv1.MigrationAbortInProgress
			},
		},
		{
			name: "moved away: the launcher's end is not the guest's", vmi: migratingVMI(targetKnown, started), pod: pod, dom: final,
			phase: kubevirtv1.Running, method: kubevirtv1.BlockMigration,
			check: func(ms *kubevirtv1.VirtualMachineInstanceMigrationState) bool {
				return ms.Completed && ms.EndTimestamp.Equal(&migEnd)
			},
		},
		{
			name: "moved away and the source pod ended", vmi: migratingVMI(targetKnown, started, done), pod: gone, dom: final,
			phase: kubevirtv1.Running,
			check: func(ms *kubevirtv1.VirtualMachineInstanceMigrationState) bool { return ms.Completed },
		},
		{
			name: "the final report missed, the termination message tells", vmi: migratingVMI(targetKnown, started), pod: migratedPod(),
			phase: kubevirtv1.Running,
			check: func(ms *kubevirtv1.VirtualMachineInstanceMigrationState) bool { return !ms.Completed && !ms.Failed },
		},
		{
			name: "the source pod vanished before the end: the guest is lost", vmi: migratingVMI(targetKnown, started), pod: nil,
			phase: kubevirtv1.Failed,
			check: func(ms *kubevirtv1.VirtualMachineInstanceMigrationState) bool { return !ms.Completed },
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st := Compute(tc.vmi, tc.pod, tc.dom, migNow)
			if st.Phase != tc.phase || st.MigrationMethod != tc.method || !tc.check(st.MigrationState) {
				t.Errorf("phase %s method %q state %+v", st.Phase, st.MigrationMethod, st.MigrationState)
			}
			if tc.phase == kubevirtv1.Running && cond(st, kubevirtv1.VirtualMachineInstanceReady) != "True/" {
				t.Errorf("Ready %s", cond(st, kubevirtv1.VirtualMachineInstanceReady))
			}
		})
	}
}

func targetDom(m launcherapi.MigrationStatus, defined bool) *launcherapi.DomainStatus {
	m.Role = launcherapi.MigrationRoleTarget
	if m.UID == "" {
		m.UID = "m1"
	}
	d := &launcherapi.DomainStatus{Migration: &m}
	if defined {
		d = dom(launcherapi.StateRunning)
		d.Reason = "Migrated"
		d.Migration = &m
	}
	return d
}

func TestTarget(t *testing.T) {
	pod := testPod(corev1.PodRunning)
	pod.Status.PodIP, pod.Status.PodIPs = "10.213.0.9", []corev1.PodIP{{IP: "10.213.0.9"}}
	ready := launcherapi.MigrationStatus{TargetReady: true, Ports: &launcherapi.DefaultMigrationPorts}
	arrived := ready
	arrived.Completed = true
	for _, tc := range []struct {
		name     string
		vmi      *kubevirtv1.VirtualMachineInstance
		dom      *launcherapi.DomainStatus
		takeOver bool
		address  string
	}{
		{name: "preparing", vmi: migratingVMI(), dom: targetDom(launcherapi.MigrationStatus{}, false)},
		{name: "ready: the address goes out", vmi: migratingVMI(), dom: targetDom(ready, false), address: "10.213.0.9"},
		{name: "another migration's launcher", vmi: migratingVMI(), dom: targetDom(launcherapi.MigrationStatus{UID: "m0", TargetReady: true}, false)},
		{name: "not reported yet", vmi: migratingVMI()},
		{name: "the guest runs here: take over", vmi: migratingVMI(targetKnown, started), dom: targetDom(arrived, true), takeOver: true, address: "10.213.0.9"},
		{name: "also when the source's report is in", vmi: migratingVMI(targetKnown, started, done), dom: targetDom(arrived, true), takeOver: true, address: "10.213.0.9"},
		{name: "failed migrations are not followed", vmi: migratingVMI(targetKnown, func(ms *kubevirtv1.VirtualMachineInstanceMigrationState) { ms.Failed = true }),
			dom: targetDom(arrived, true), address: "10.213.0.9"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st, took := Target(tc.vmi, pod, tc.dom, "n2", migNow)
			ms := st.MigrationState
			if took != tc.takeOver || ms.TargetNodeAddress != tc.address {
				t.Fatalf("take over %v address %q, want %v %q", took, ms.TargetNodeAddress, tc.takeOver, tc.address)
			}
			if tc.address != "" && len(ms.TargetDirectMigrationNodePorts) != 3 {
				t.Errorf("ports %v", ms.TargetDirectMigrationNodePorts)
			}
			if !took {
				if st.NodeName != "n1" {
					t.Errorf("node %s before the take-over", st.NodeName)
				}
				return
			}
			if st.NodeName != "n2" || !ms.Completed || !ms.TargetNodeDomainDetected || ms.TargetNodeDomainReadyTimestamp == nil || ms.EndTimestamp == nil ||
				st.Phase != kubevirtv1.Running || len(st.Interfaces) == 0 || st.Interfaces[0].IP != "10.213.0.9" {
				t.Errorf("after the take-over: node %s phase %s interfaces %+v state %+v", st.NodeName, st.Phase, st.Interfaces, ms)
			}
			if MigrationTarget(&kubevirtv1.VirtualMachineInstance{Status: st}, "n2") {
				t.Error("still a migration target after the take-over")
			}
		})
	}
}

// migratedPod is a source launcher Pod that ended after its guest moved away.
func migratedPod() *corev1.Pod {
	p := testPod(corev1.PodSucceeded)
	p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "compute", State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{
		ExitCode: 0, Reason: "Completed", Message: `{"reason":"Migrated","message":"the guest moved to 10.213.0.9 (migration m1)","exitCode":0}`,
	}}}}
	return p
}
