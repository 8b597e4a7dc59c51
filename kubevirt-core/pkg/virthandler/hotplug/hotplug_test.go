package hotplug

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/moby/sys/mountinfo"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kubevirtv1 "kubevirt.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/d8virt/kubevirt-core/pkg/launcherapi"
)

func TestTranslate(t *testing.T) {
	m := func(dev, root, point string) *mountinfo.Info {
		i := &mountinfo.Info{Root: root, Mountpoint: point}
		if _, err := fmt.Sscanf(dev, "%d:%d", &i.Major, &i.Minor); err != nil {
			t.Fatal(err)
		}
		return i
	}
	node := []*mountinfo.Info{m("8:1", "/", "/"), m("0:5", "/", "/tmp"), m("8:1", "/srv/node/pods", "/srv/node/pods")}
	for _, tc := range []struct {
		name, path string
		own        []*mountinfo.Info
		want       string
	}{
		{"same namespace", "/srv/node/pods/u/x", node, "/srv/node/pods/u/x"},
		{"kubelet dir bound from another directory of the node", "/var/lib/kubelet/pods/u/volumes/x",
			[]*mountinfo.Info{m("8:1", "/", "/"), m("8:1", "/srv/node/pods", "/var/lib/kubelet/pods")},
			"/srv/node/pods/u/volumes/x"},
		{"tmpfs", "/data/pods/u", []*mountinfo.Info{m("0:5", "/stack/pods", "/data/pods")}, "/tmp/stack/pods/u"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := translate(tc.path, tc.own, node)
			if err != nil || got != tc.want {
				t.Errorf("translate(%s) = %q, %v; want %q", tc.path, got, err, tc.want)
			}
		})
	}
	if _, err := translate("/x", []*mountinfo.Info{m("9:9", "/", "/")}, node); err == nil {
		t.Error("a device the node does not mount translated")
	}
}

// TestNodeMounterNamespace: the namespace is a process's, named by its /proc path or as the
// parent; anything else is refused up front.
func TestNodeMounterNamespace(t *testing.T) {
	for _, tc := range []struct {
		ns      string
		want    int
		wantErr bool
	}{
		{"", 1, false},
		{DefaultHostMountNamespace, 1, false},
		{"/proc/42/ns/mnt", 42, false},
		{ParentMountNamespace, os.Getppid(), false},
		{"/proc/self/ns/mnt", 0, true},
		{"/proc/0/ns/mnt", 0, true},
		{"/run/netns/x", 0, true},
	} {
		n, err := NewNodeMounter(tc.ns)
		if (err != nil) != tc.wantErr {
			t.Errorf("NewNodeMounter(%q) = %v, want error %v", tc.ns, err, tc.wantErr)
			continue
		}
		if err == nil {
			if pid, _ := n.pid(); pid != tc.want {
				t.Errorf("%q: pid %d, want %d", tc.ns, pid, tc.want)
			}
		}
	}
	// This process reads its own mounts the way it reads the node's.
	self := NodeMounter{Namespace: fmt.Sprintf("/proc/%d/ns/mnt", os.Getpid())}
	if err := self.Check(); err != nil {
		t.Fatal(err)
	}
	if ok, err := self.Mounted("/"); err != nil || !ok {
		t.Errorf("Mounted(/) = %v, %v", ok, err)
	}
	if p, err := self.NodePath("/proc/self"); err != nil || p != "/proc/self" {
		t.Errorf("NodePath(/proc/self) = %q, %v", p, err)
	}
}

// fakeMounter records mounts; node paths are the paths themselves.
type fakeMounter struct{ mounts map[string]string }

func (f *fakeMounter) Bind(_ context.Context, src, dst string) error { f.mounts[dst] = src; return nil }
func (f *fakeMounter) Unmount(_ context.Context, dst string) error   { delete(f.mounts, dst); return nil }
func (f *fakeMounter) Mounted(dst string) (bool, error)              { _, ok := f.mounts[dst]; return ok, nil }
func (f *fakeMounter) NodePath(p string) (string, error)             { return p, nil }

func TestSync(t *testing.T) {
	pv := &corev1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: "pv"}, Spec: corev1.PersistentVolumeSpec{
		PersistentVolumeSource: corev1.PersistentVolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/srv/pv"}}}}
	pvc := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: "claim", Namespace: "ns"}, Spec: corev1.PersistentVolumeClaimSpec{VolumeName: "pv"}}
	hot := kubevirtv1.Volume{Name: "hot", VolumeSource: kubevirtv1.VolumeSource{PersistentVolumeClaim: &kubevirtv1.PersistentVolumeClaimVolumeSource{
		Hotpluggable: true, PersistentVolumeClaimVolumeSource: corev1.PersistentVolumeClaimVolumeSource{ClaimName: "claim"}}}}
	hp := &kubevirtv1.HotplugVolumeStatus{AttachPodName: "hp-volume-x"}
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{UID: "launcher"}}
	for _, tc := range []struct {
		name       string
		inSpec     bool
		phase      kubevirtv1.VolumePhase
		mounted    bool
		inDomain   bool
		failure    string                 // the launcher's attach error
		wantPhase  kubevirtv1.VolumePhase // "" = entry gone
		wantReason string
		wantMount  bool
		wantLaunch bool
	}{
		{name: "pending: nothing yet", inSpec: true, phase: kubevirtv1.VolumePending, wantPhase: kubevirtv1.VolumePending},
		{name: "attached to the node: mount, the launcher attaches", inSpec: true, phase: kubevirtv1.HotplugVolumeAttachedToNode,
			wantPhase: kubevirtv1.HotplugVolumeMounted, wantMount: true, wantLaunch: true},
		{name: "in the domain: ready", inSpec: true, phase: kubevirtv1.HotplugVolumeMounted, mounted: true, inDomain: true,
			wantPhase: kubevirtv1.VolumeReady, wantReason: ReasonReady, wantMount: true},
		{name: "the launcher failed to attach: mounted, the failure told, tried again", inSpec: true, phase: kubevirtv1.HotplugVolumeMounted,
			mounted: true, failure: "No more available PCI slots", wantPhase: kubevirtv1.HotplugVolumeMounted, wantReason: ReasonFailed,
			wantMount: true, wantLaunch: true},
		{name: "removed, still in the domain: detaching", phase: kubevirtv1.VolumeReady, mounted: true, inDomain: true,
			wantPhase: kubevirtv1.HotplugVolumeDetaching, wantMount: true, wantLaunch: true},
		{name: "removed and detached: unmounted, entry gone", phase: kubevirtv1.HotplugVolumeDetaching, mounted: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pods := t.TempDir()
			target := filepath.Join(launcherapi.PodVolumeDir(pods, "launcher", "hotplug-disks"), "hot")
			m := &fakeMounter{mounts: map[string]string{}}
			if tc.mounted {
				if err := os.MkdirAll(target, 0o755); err != nil {
					t.Fatal(err)
				}
				m.mounts[target] = "/srv/pv"
			}
			vmi := &kubevirtv1.VirtualMachineInstance{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "vmi"}}
			if tc.inSpec {
				vmi.Spec.Volumes = []kubevirtv1.Volume{hot}
			}
			vmi.Status.VolumeStatus = []kubevirtv1.VolumeStatus{{Name: "hot", Phase: tc.phase, HotplugVolume: hp}}
			dom := &launcherapi.DomainStatus{Defined: true}
			if tc.inDomain {
				dom.HotplugVolumes = []launcherapi.HotplugVolume{{Name: "hot", Target: "vdc"}}
			}
			if tc.failure != "" {
				dom.HotplugFailures = []launcherapi.HotplugFailure{{Name: "hot", Message: tc.failure}}
			}
			h := &Volumes{Reader: fake.NewClientBuilder().WithObjects(pv, pvc).Build(), PodsDir: pods, Mounter: m}
			res, err := h.Sync(context.Background(), vmi, pod, dom)
			if (err != nil) != (tc.failure != "") || (err != nil && !strings.Contains(err.Error(), tc.failure)) {
				t.Fatalf("error %v, want one only for the failure %q", err, tc.failure)
			}
			phase := kubevirtv1.VolumePhase("")
			for _, s := range res.VolumeStatus {
				phase = s.Phase
				if s.Phase == kubevirtv1.VolumeReady && s.Target != "vdc" {
					t.Errorf("ready with target %q", s.Target)
				}
				if tc.wantReason != "" && s.Reason != tc.wantReason {
					t.Errorf("reason %q, want %q", s.Reason, tc.wantReason)
				}
				if tc.failure != "" && s.Message != "Failed to attach hotplugged volume hot to VM: "+tc.failure {
					t.Errorf("message %q", s.Message)
				}
			}
			if phase != tc.wantPhase || (m.mounts[target] == "/srv/pv") != tc.wantMount || res.LauncherSync != tc.wantLaunch {
				t.Errorf("phase %q, mounts %v, launcher sync %v; want %q, mounted %v, %v", phase, m.mounts, res.LauncherSync, tc.wantPhase, tc.wantMount, tc.wantLaunch)
			}
		})
	}
}

// A block claim's device is bound on a file of the launcher's hotplug-disks volume, and goes
// with it when the volume is removed.
func TestSyncBlock(t *testing.T) {
	block := corev1.PersistentVolumeBlock
	pv := &corev1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: "pv"}, Spec: corev1.PersistentVolumeSpec{VolumeMode: &block,
		PersistentVolumeSource: corev1.PersistentVolumeSource{Local: &corev1.LocalVolumeSource{Path: "/srv/pv/device"}}}}
	pvc := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: "claim", Namespace: "ns"}, Spec: corev1.PersistentVolumeClaimSpec{VolumeName: "pv", VolumeMode: &block}}
	hot := kubevirtv1.Volume{Name: "hot", VolumeSource: kubevirtv1.VolumeSource{PersistentVolumeClaim: &kubevirtv1.PersistentVolumeClaimVolumeSource{
		Hotpluggable: true, PersistentVolumeClaimVolumeSource: corev1.PersistentVolumeClaimVolumeSource{ClaimName: "claim"}}}}
	pods := t.TempDir()
	target := filepath.Join(launcherapi.PodVolumeDir(pods, "launcher", "hotplug-disks"), "hot")
	if err := os.MkdirAll(filepath.Dir(target), 0o755); err != nil {
		t.Fatal(err)
	}
	m := &fakeMounter{mounts: map[string]string{}}
	h := &Volumes{Reader: fake.NewClientBuilder().WithObjects(pv, pvc).Build(), PodsDir: pods, Mounter: m}
	vmi := &kubevirtv1.VirtualMachineInstance{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "vmi"}}
	vmi.Spec.Volumes = []kubevirtv1.Volume{hot}
	vmi.Status.VolumeStatus = []kubevirtv1.VolumeStatus{{Name: "hot", Phase: kubevirtv1.HotplugVolumeAttachedToNode, HotplugVolume: &kubevirtv1.HotplugVolumeStatus{}}}
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{UID: "launcher"}}
	res, err := h.Sync(context.Background(), vmi, pod, &launcherapi.DomainStatus{Defined: true})
	if err != nil || res.VolumeStatus[0].Phase != kubevirtv1.HotplugVolumeMounted || m.mounts[target] != "/srv/pv/device" {
		t.Fatalf("sync: %v, %+v, mounts %v", err, res.VolumeStatus, m.mounts)
	}
	if fi, err := os.Stat(target); err != nil || !fi.Mode().IsRegular() {
		t.Fatalf("the device's target %s: %v, %v", target, fi, err)
	}
	// Mounted: nothing is read again.
	h.Reader = fake.NewClientBuilder().Build()
	if _, err := h.Sync(context.Background(), vmi, pod, &launcherapi.DomainStatus{Defined: true}); err != nil {
		t.Fatalf("a second sync read the claim again: %v", err)
	}
	vmi.Spec.Volumes = nil
	vmi.Status.VolumeStatus[0].Phase = kubevirtv1.HotplugVolumeDetaching
	if _, err := h.Sync(context.Background(), vmi, pod, &launcherapi.DomainStatus{Defined: true}); err != nil || len(m.mounts) != 0 {
		t.Fatalf("removed: %v, mounts %v", err, m.mounts)
	}
	if _, err := os.Stat(target); !os.IsNotExist(err) {
		t.Errorf("the target is left: %v", err)
	}
}
