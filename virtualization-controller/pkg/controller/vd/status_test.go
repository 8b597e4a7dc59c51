package vd

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	v1alpha2 "github.com/d8virt/api/core/v1alpha2"
	"github.com/d8virt/api/core/v1alpha2/vdcondition"
	"github.com/d8virt/virtualization-controller/pkg/importer/contract"
	"github.com/d8virt/virtualization-controller/pkg/importerprogress"
	"github.com/d8virt/virtualization-controller/pkg/phasegauge"
)

func boundClaim(request, capacity string, conds ...corev1.PersistentVolumeClaimConditionType) *corev1.PersistentVolumeClaim {
	pvc := &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: "vd-tiny-uid-1"},
		Spec: corev1.PersistentVolumeClaimSpec{StorageClassName: ptr.To("local"), VolumeMode: ptr.To(corev1.PersistentVolumeFilesystem),
			Resources: corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse(request)}}},
		Status: corev1.PersistentVolumeClaimStatus{Phase: corev1.ClaimBound, Capacity: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse(capacity)}},
	}
	for _, c := range conds {
		pvc.Status.Conditions = append(pvc.Status.Conditions, corev1.PersistentVolumeClaimCondition{Type: c, Status: corev1.ConditionTrue})
	}
	return pvc
}

func TestStatus(t *testing.T) {
	now := metav1.NewTime(time.Unix(100, 0))
	d := disk(httpSource, "100Mi", "")
	pendingClaim := boundClaim("139Mi", "0")
	pendingClaim.Status = corev1.PersistentVolumeClaimStatus{Phase: corev1.ClaimPending}
	lostClaim := boundClaim("139Mi", "139Mi")
	lostClaim.Status.Phase = corev1.ClaimLost
	cases := []struct {
		name     string
		got      v1alpha2.VirtualDiskStatus
		phase    v1alpha2.DiskPhase
		ready    metav1.ConditionStatus
		reason   string
		message  string
		capacity string
		progress string
		claim    string
	}{
		{name: "pending for the source", got: ProblemStatus(d, &Problem{Phase: v1alpha2.DiskPending, Condition: vdcondition.DatasourceReadyType, Reason: "ImageNotFound", Message: "not found"}, now),
			phase: v1alpha2.DiskPending, ready: metav1.ConditionFalse, reason: string(vdcondition.DatasourceIsNotReady), message: "not found"},
		{name: "importing", got: ProvisioningStatus(d, "vd-tiny-uid-1", "local", &importerprogress.Progress{Ratio: 0.452, SpeedBytes: 2048, AverageSpeedBytes: 1024}, now),
			phase: v1alpha2.DiskProvisioning, ready: metav1.ConditionFalse, reason: string(vdcondition.Provisioning), message: "filling PersistentVolumeClaim vd-tiny-uid-1", progress: "45.2%", claim: "vd-tiny-uid-1"},
		{name: "checksum mismatch", got: FailedStatus(d, contract.Result{Reason: contract.ReasonChecksumMismatch, Message: "the sha256 differs"}, now),
			phase: v1alpha2.DiskFailed, ready: metav1.ConditionFalse, reason: string(vdcondition.ProvisioningFailed), message: "ChecksumMismatch: the sha256 differs"},
		{name: "too large", got: FailedStatus(d, contract.Result{Reason: contract.ReasonTooLarge, Message: "larger"}, now),
			phase: v1alpha2.DiskFailed, ready: metav1.ConditionFalse, reason: string(vdcondition.ProvisioningFailed), message: "grow spec.persistentVolumeClaim.size"},
		{name: "an ISO", got: FailedStatus(d, contract.Result{Reason: contract.ReasonCompleted, CDROM: true}, now),
			phase: v1alpha2.DiskFailed, ready: metav1.ConditionFalse, reason: string(vdcondition.ProvisioningFailed), message: "ISO image (a CD-ROM), which cannot be a disk"},
		{name: "ready", got: ClaimStatus(d, boundClaim("139Mi", "139Mi"), true, now),
			phase: v1alpha2.DiskReady, ready: metav1.ConditionTrue, reason: string(vdcondition.Ready), capacity: "139Mi", progress: "100%", claim: "vd-tiny-uid-1"},
		{name: "resizing offline", got: ClaimStatus(d, boundClaim("200Mi", "139Mi", corev1.PersistentVolumeClaimFileSystemResizePending), true, now),
			phase: v1alpha2.DiskResizing, ready: metav1.ConditionTrue, reason: string(vdcondition.Ready), capacity: "139Mi", progress: "100%", claim: "vd-tiny-uid-1"},
		{name: "blank waits for its consumer", got: ClaimStatus(disk(nil, "1Gi", ""), pendingClaim, true, now),
			phase: v1alpha2.DiskWaitForFirstConsumer, ready: metav1.ConditionFalse, reason: string(vdcondition.WaitingForFirstConsumer), message: "StorageClass local binds the volume where the first virtual machine", claim: "vd-tiny-uid-1"},
		{name: "blank, immediate class", got: ClaimStatus(disk(nil, "1Gi", ""), pendingClaim, false, now),
			phase: v1alpha2.DiskProvisioning, ready: metav1.ConditionFalse, reason: string(vdcondition.Provisioning), message: "waits for its volume", claim: "vd-tiny-uid-1"},
		{name: "claim lost", got: ClaimStatus(d, lostClaim, false, now),
			phase: v1alpha2.DiskLost, ready: metav1.ConditionFalse, reason: string(vdcondition.Lost), message: "delete the disk and make it again"},
		{name: "in use while deleted", got: TerminatingStatus(d, []string{"Pod virt-launcher-a"}, now),
			phase: v1alpha2.DiskTerminating, message: "used by Pod virt-launcher-a"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := tc.got
			if s.Phase != tc.phase || s.ObservedGeneration != d.Generation || s.Capacity != tc.capacity || s.Progress != tc.progress || s.Target.PersistentVolumeClaimName != tc.claim {
				t.Fatalf("status %+v", s)
			}
			if tc.ready == "" {
				c := meta.FindStatusCondition(s.Conditions, string(vdcondition.InUseType))
				if c == nil || c.Status != metav1.ConditionTrue || !strings.Contains(c.Message, tc.message) {
					t.Fatalf("InUse %+v", c)
				}
				return
			}
			c := meta.FindStatusCondition(s.Conditions, string(vdcondition.ReadyType))
			if c == nil || c.Status != tc.ready || c.Reason != tc.reason || !strings.Contains(c.Message, tc.message) || c.LastTransitionTime != now {
				t.Fatalf("Ready %+v", c)
			}
		})
	}
	resizing := ClaimStatus(d, boundClaim("200Mi", "139Mi", corev1.PersistentVolumeClaimFileSystemResizePending), true, now)
	if c := meta.FindStatusCondition(resizing.Conditions, string(vdcondition.ResizingType)); c == nil || !strings.Contains(c.Message, "grows offline") {
		t.Errorf("Resizing %+v", c)
	}
	d.Status = resizing
	if c := meta.FindStatusCondition(ClaimStatus(d, boundClaim("200Mi", "200Mi"), true, now).Conditions, string(vdcondition.ResizingType)); c != nil {
		t.Errorf("Resizing stays when done: %+v", c)
	}
}

func TestResizeTo(t *testing.T) {
	block := boundClaim("100Mi", "100Mi")
	block.Spec.VolumeMode = ptr.To(corev1.PersistentVolumeBlock)
	for _, tc := range []struct {
		name string
		size string
		pvc  *corev1.PersistentVolumeClaim
		want string
	}{
		{"as planned", "100Mi", boundClaim("100Mi", "100Mi"), ""},
		{"grown", "200Mi", boundClaim("100Mi", "100Mi"), "200Mi"},
		{"an older claim, larger than the disk", "120Mi", boundClaim("139Mi", "139Mi"), ""},
		{"block grown", "150Mi", block, "150Mi"},
		{"sized from the image", "", boundClaim("139Mi", "139Mi"), ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := ResizeTo(disk(httpSource, tc.size, ""), tc.pvc)
			switch {
			case tc.want == "" && got != nil:
				t.Fatalf("ResizeTo = %s, want none", got.String())
			case tc.want != "" && (got == nil || got.Cmp(resource.MustParse(tc.want)) != 0):
				t.Fatalf("ResizeTo = %v, want %s", got, tc.want)
			}
		})
	}
}

func TestPhaseValues(t *testing.T) {
	d := disk(nil, "1Gi", "")
	check := func(want v1alpha2.DiskPhase) {
		t.Helper()
		m := phasegauge.Values(Phases, GaugePhase(d))
		if len(m) != len(Phases) {
			t.Fatalf("%d series", len(m))
		}
		for p, v := range m {
			if (p == want) != (v == 1) {
				t.Errorf("%s = %v with phase %s", p, v, want)
			}
		}
	}
	check(v1alpha2.DiskPending)
	d.Status.Phase = v1alpha2.DiskReady
	check(v1alpha2.DiskReady)
	d.DeletionTimestamp = &metav1.Time{}
	check(v1alpha2.DiskTerminating)
}

func TestPhaseCollector(t *testing.T) {
	d := disk(nil, "1Gi", "")
	d.ResourceVersion = ""
	d.Status.Phase = v1alpha2.DiskReady
	w := newWorld(t, d)
	var want strings.Builder
	want.WriteString("# HELP d8_virtualization_virtualdisk_status_phase The phase of a VirtualDisk: 1 for its phase, 0 for the others.\n# TYPE d8_virtualization_virtualdisk_status_phase gauge\n")
	phases := make([]string, 0, len(Phases))
	for _, p := range Phases {
		phases = append(phases, string(p))
	}
	slices.Sort(phases)
	for _, p := range phases {
		v := 0
		if p == string(v1alpha2.DiskReady) {
			v = 1
		}
		fmt.Fprintf(&want, "d8_virtualization_virtualdisk_status_phase{name=\"tiny\",namespace=\"ns\",phase=%q} %d\n", p, v)
	}
	if err := testutil.CollectAndCompare(NewPhaseCollector(w.c), strings.NewReader(want.String())); err != nil {
		t.Fatal(err)
	}
}
