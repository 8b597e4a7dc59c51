package vmisync

import (
	"context"
	"log/slog"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/events"
	clocktesting "k8s.io/utils/clock/testing"
	kubevirtv1 "kubevirt.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/d8virt/kubevirt-core/pkg/corescheme"
)

// fakeClient holds v. KubeVirt's types have uint64 fields that the fake client's managed fields
// cannot convert; a plain object tracker keeps none.
func fakeClient(t *testing.T, v *kubevirtv1.VirtualMachineInstance) client.Client {
	t.Helper()
	scheme, err := corescheme.New()
	if err != nil {
		t.Fatal(err)
	}
	tracker := clienttesting.NewObjectTracker(scheme, serializer.NewCodecFactory(scheme).UniversalDecoder())
	return fake.NewClientBuilder().WithScheme(scheme).WithObjectTracker(tracker).WithObjects(v).Build()
}

func pausedCond() kubevirtv1.VirtualMachineInstanceCondition {
	return kubevirtv1.VirtualMachineInstanceCondition{Type: kubevirtv1.VirtualMachineInstancePaused, Status: corev1.ConditionTrue}
}

func migration(failed bool) *kubevirtv1.VirtualMachineInstanceMigrationState {
	return &kubevirtv1.VirtualMachineInstanceMigrationState{MigrationUID: "m1", Failed: failed, FailureReason: "target gone"}
}

func hotplugStatus(reason, message string) kubevirtv1.VirtualMachineInstanceStatus {
	return kubevirtv1.VirtualMachineInstanceStatus{Phase: kubevirtv1.Running, VolumeStatus: []kubevirtv1.VolumeStatus{{
		Name: "hot", Phase: kubevirtv1.HotplugVolumeMounted, Reason: reason, Message: message,
		HotplugVolume: &kubevirtv1.HotplugVolumeStatus{AttachPodName: "hp-volume-x"}}}}
}

// TestWriteStatusEvents: a status write records the events of the transitions it makes, once.
func TestWriteStatusEvents(t *testing.T) {
	running := kubevirtv1.VirtualMachineInstanceStatus{Phase: kubevirtv1.Running}
	paused := kubevirtv1.VirtualMachineInstanceStatus{Phase: kubevirtv1.Running, Conditions: []kubevirtv1.VirtualMachineInstanceCondition{pausedCond()}}
	for _, tc := range []struct {
		name     string
		old, cur kubevirtv1.VirtualMachineInstanceStatus
		want     []string
	}{
		{"started", kubevirtv1.VirtualMachineInstanceStatus{Phase: kubevirtv1.Scheduled}, running,
			[]string{"Normal Started VirtualMachineInstance started."}},
		{"shut down", running, kubevirtv1.VirtualMachineInstanceStatus{Phase: kubevirtv1.Succeeded},
			[]string{"Normal Stopped The VirtualMachineInstance was shut down."}},
		{"crashed", running, kubevirtv1.VirtualMachineInstanceStatus{Phase: kubevirtv1.Failed},
			[]string{"Warning Stopped The VirtualMachineInstance crashed."}},
		{"paused", running, paused, []string{"Normal Paused VirtualMachineInstance paused."}},
		{"resumed", paused, running, []string{"Normal Resumed VirtualMachineInstance resumed."}},
		{"ended while paused: stopped, not resumed", paused, kubevirtv1.VirtualMachineInstanceStatus{Phase: kubevirtv1.Succeeded},
			[]string{"Normal Stopped The VirtualMachineInstance was shut down."}},
		{"started paused", kubevirtv1.VirtualMachineInstanceStatus{Phase: kubevirtv1.Scheduled}, paused,
			[]string{"Normal Started VirtualMachineInstance started.", "Normal Paused VirtualMachineInstance paused."}},
		{"migration failed", kubevirtv1.VirtualMachineInstanceStatus{Phase: kubevirtv1.Running, MigrationState: migration(false)},
			kubevirtv1.VirtualMachineInstanceStatus{Phase: kubevirtv1.Running, MigrationState: migration(true)},
			[]string{"Warning Migrated VirtualMachineInstance migration uid m1 failed. reason:target gone"}},
		{"volume mounted: none", running, hotplugStatus("VolumeMountedToPod", "mounted"), nil},
		{"hotplug failed: told once per failure", hotplugStatus("VolumeMountedToPod", "mounted"), hotplugStatus("FailedHotplugSync", "Failed to attach hotplugged volume hot to VM: no slots"),
			[]string{"Warning FailedHotplugSync Failed to attach hotplugged volume hot to VM: no slots"}},
		{"hotplug failed again for the same reason: none", hotplugStatus("FailedHotplugSync", "Failed: no slots"), hotplugStatus("FailedHotplugSync", "Failed: no slots"), nil},
		{"hotplug failed for another reason", hotplugStatus("FailedHotplugSync", "Failed: no slots"), hotplugStatus("FailedHotplugSync", "Failed: no image"),
			[]string{"Warning FailedHotplugSync Failed: no image"}},
		{"other changes: none", running, kubevirtv1.VirtualMachineInstanceStatus{Phase: kubevirtv1.Running, NodeName: "n1"}, nil},
		{"failed migration written again: none",
			kubevirtv1.VirtualMachineInstanceStatus{Phase: kubevirtv1.Running, MigrationState: migration(true)},
			kubevirtv1.VirtualMachineInstanceStatus{Phase: kubevirtv1.Running, NodeName: "n1", MigrationState: migration(true)}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v := &kubevirtv1.VirtualMachineInstance{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "vm"}, Status: tc.old}
			rec := events.NewFakeRecorder(10)
			r := NewReconciler(fakeClient(t, v), "n1", t.TempDir(), clocktesting.NewFakePassiveClock(time.Now()), rec, slog.New(slog.DiscardHandler))
			ctx := context.Background()
			if err := r.Client.Get(ctx, client.ObjectKeyFromObject(v), v); err != nil {
				t.Fatal(err)
			}
			if err := r.writeStatus(ctx, v, tc.cur, v.Annotations); err != nil {
				t.Fatal(err)
			}
			// The level-based controller computes the same status again: nothing new to tell.
			if err := r.Client.Get(ctx, client.ObjectKeyFromObject(v), v); err != nil {
				t.Fatal(err)
			}
			if err := r.writeStatus(ctx, v, tc.cur, v.Annotations); err != nil {
				t.Fatal(err)
			}
			close(rec.Events)
			var got []string
			for e := range rec.Events {
				got = append(got, e)
			}
			if len(got) != len(tc.want) {
				t.Fatalf("events %q, want %q", got, tc.want)
			}
			for i := range got {
				if got[i] != tc.want[i] {
					t.Errorf("event %d: %q, want %q", i, got[i], tc.want[i])
				}
			}
		})
	}
}
