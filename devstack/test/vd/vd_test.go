package vd

import (
	"context"
	"fmt"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	kubevirtv1 "kubevirt.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1alpha2 "github.com/d8virt/api/core/v1alpha2"
	"github.com/d8virt/api/core/v1alpha2/vdcondition"
	"github.com/d8virt/devstack/guest/guesttest"
	"github.com/d8virt/devstack/provisioner"
	"github.com/d8virt/kubevirt-core/pkg/console"
)

// TestVirtualDisk: a disk imported over HTTP into a Filesystem claim boots the tiny guest from a
// core VMI (the guest sees the disk's size, not the image's) and keeps what the guest wrote
// across a restart of the VMI; a blank Block disk waits for its first consumer (the VMI's
// launcher Pod); both grow, and the guest sees the new sizes after the restart; a disk in use is deleted only once the VMI is gone; a wrong checksum fails the
// disk with nothing left behind; a disk made from a ClusterVirtualImage (imported over HTTP
// into DVCR) gets the image's data from DVCR; `curl -T` uploads a disk; a disk without a size
// is its source's unpacked size.
//
// Only BootResizeProtect boots a VM (`-run 'TestVirtualDisk/(WrongChecksum|FromCVI|FromVI|Upload|SizedBySource|Import)$'`
// runs without the lock); it boots the guest from Import's disks.
func TestVirtualDisk(t *testing.T) {
	st := startStack(t)
	t.Run("WrongChecksum", func(t *testing.T) { testWrongChecksum(t, st) })
	t.Run("FromCVI", func(t *testing.T) { testFromImage(t, st, v1alpha2.ClusterVirtualImageKind) })
	t.Run("FromVI", func(t *testing.T) { testFromImage(t, st, v1alpha2.VirtualImageKind) })
	t.Run("Upload", func(t *testing.T) { testUpload(t, st) })
	t.Run("UploadWithoutSize", func(t *testing.T) { testUploadWithoutSize(t, st) })
	t.Run("SizedBySource", func(t *testing.T) { testSizedBySource(t, st) })
	t.Run("ImageAndDiskFromDisk", func(t *testing.T) { testImageFromDisk(t, st) })
	t.Run("ImageOnClaim", func(t *testing.T) { testImageOnClaim(t, st) })
	// The class goes after the namespace (cleanups run last first): its volumes are deleted first.
	block := st.blockClass(t)
	ns := st.namespace(t, fmt.Sprintf("vd-boot-%d", os.Getpid()))
	var root, data *v1alpha2.VirtualDisk
	if !t.Run("Import", func(t *testing.T) { root, data = testImport(t, st, ns, block) }) {
		return
	}
	t.Run("BootResizeProtect", func(t *testing.T) { testBootResizeProtect(t, st, root, data) })
}

func newDisk(ns, name string, ds *v1alpha2.VirtualDiskDataSource, size, class string) *v1alpha2.VirtualDisk {
	vd := &v1alpha2.VirtualDisk{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
	vd.Spec.DataSource = ds
	vd.Spec.PersistentVolumeClaim.Size = ptr.To(resource.MustParse(size))
	if class != "" {
		vd.Spec.PersistentVolumeClaim.StorageClassName = ptr.To(class)
	}
	return vd
}

func (st *stack) httpSource(sha256 string) *v1alpha2.VirtualDiskDataSource {
	return &v1alpha2.VirtualDiskDataSource{Type: v1alpha2.DataSourceTypeHTTP, HTTP: &v1alpha2.DataSourceHTTP{
		URL: st.guestURL, Checksum: &v1alpha2.Checksum{SHA256: sha256}}}
}

// waitPhase waits for the disk's phase and returns the disk.
func (st *stack) waitPhase(t *testing.T, vd *v1alpha2.VirtualDisk, want v1alpha2.DiskPhase, timeout time.Duration) *v1alpha2.VirtualDisk {
	t.Helper()
	got := &v1alpha2.VirtualDisk{}
	eventually(t, timeout, fmt.Sprintf("disk %s %s", vd.Name, want), func(ctx context.Context) error {
		if err := st.admin.Get(ctx, client.ObjectKeyFromObject(vd), got); err != nil {
			return err
		}
		if got.Status.Phase != want {
			return fmt.Errorf("phase %s: %+v", got.Status.Phase, got.Status.Conditions)
		}
		return nil
	})
	return got
}

// createReady creates the disk and waits until it is Ready: the disk and its claim.
func (st *stack) createReady(t *testing.T, ctx context.Context, vd *v1alpha2.VirtualDisk) (*v1alpha2.VirtualDisk, *corev1.PersistentVolumeClaim) {
	t.Helper()
	if err := st.admin.Create(ctx, vd); err != nil {
		t.Fatal(err)
	}
	got := st.waitPhase(t, vd, v1alpha2.DiskReady, 3*time.Minute)
	pvc, err := st.claim(ctx, vd.Namespace, got.Status.Target.PersistentVolumeClaimName)
	if err != nil {
		t.Fatal(err)
	}
	return got, pvc
}

func (st *stack) claim(ctx context.Context, ns, name string) (*corev1.PersistentVolumeClaim, error) {
	pvc := &corev1.PersistentVolumeClaim{}
	return pvc, st.admin.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, pvc)
}

// expectEvent waits for an event of the disk whose note holds want.
func (st *stack) expectEvent(t *testing.T, vd *v1alpha2.VirtualDisk, eventType, want string) {
	t.Helper()
	eventually(t, 30*time.Second, "event "+want, func(ctx context.Context) error {
		var list corev1.EventList
		if err := st.admin.List(ctx, &list, client.InNamespace(vd.Namespace)); err != nil {
			return err
		}
		var seen []string
		for _, e := range list.Items {
			if e.InvolvedObject.UID == vd.UID && e.Type == eventType && strings.Contains(e.Message, want) {
				return nil
			}
			seen = append(seen, e.Type+" "+e.Message)
		}
		return fmt.Errorf("not among %q", seen)
	})
}

func testWrongChecksum(t *testing.T, st *stack) {
	ctx := longContext(t)
	ns := st.namespace(t, fmt.Sprintf("vd-checksum-%d", os.Getpid()))
	vd := newDisk(ns, "bad", st.httpSource(strings.Repeat("0", 64)), "64Mi", "")
	if err := st.admin.Create(ctx, vd); err != nil {
		t.Fatal(err)
	}
	got := st.waitPhase(t, vd, v1alpha2.DiskFailed, 2*time.Minute)
	c := meta.FindStatusCondition(got.Status.Conditions, string(vdcondition.ReadyType))
	if c == nil || c.Reason != string(vdcondition.ProvisioningFailed) || !strings.Contains(c.Message, "ChecksumMismatch") || !strings.Contains(c.Message, st.guestSHA256) {
		t.Fatalf("Ready condition %+v", c)
	}
	t.Logf("failed: %s", c.Message)
	st.expectEvent(t, got, corev1.EventTypeWarning, "ChecksumMismatch")
	eventually(t, time.Minute, "nothing left", func(ctx context.Context) error {
		var pods corev1.PodList
		if err := st.admin.List(ctx, &pods, client.InNamespace(ns)); err != nil {
			return err
		}
		var pvcs corev1.PersistentVolumeClaimList
		if err := st.admin.List(ctx, &pvcs, client.InNamespace(ns)); err != nil {
			return err
		}
		if len(pods.Items)+len(pvcs.Items) > 0 {
			return fmt.Errorf("%d pods, %d claims", len(pods.Items), len(pvcs.Items))
		}
		return nil
	})
	if got.Status.Target.PersistentVolumeClaimName != "" || got.Status.Capacity != "" {
		t.Fatalf("a failed disk names a claim: %+v", got.Status)
	}
}

// testFromImage imports the guest over HTTP into DVCR as an image of kind (a ClusterVirtualImage,
// or a VirtualImage with storage ContainerRegistry in the disk's namespace) and makes a disk of
// it: the disk's importer Pod pulls the image from DVCR (dvcr.<namespace>.svc, through the
// stack's service proxy) into the disk's claim.
func testFromImage(t *testing.T, st *stack, kind string) {
	ctx := longContext(t)
	ns := st.namespace(t, fmt.Sprintf("vd-%s-%d", strings.ToLower(kind), os.Getpid()))
	source := v1alpha2.DataSourceHTTP{URL: st.guestURL, Checksum: &v1alpha2.Checksum{SHA256: st.guestSHA256}}
	var image client.Object
	var status func() (v1alpha2.ImagePhase, string, any)
	switch kind {
	case v1alpha2.ClusterVirtualImageKind:
		cvi := &v1alpha2.ClusterVirtualImage{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("vd-guest-%d", os.Getpid())}}
		cvi.Spec.DataSource = v1alpha2.ClusterVirtualImageDataSource{Type: v1alpha2.DataSourceTypeHTTP, HTTP: &source}
		image = cvi
		status = func() (v1alpha2.ImagePhase, string, any) {
			return cvi.Status.Phase, cvi.Status.Target.RegistryURL, cvi.Status.Conditions
		}
	default:
		vi := &v1alpha2.VirtualImage{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "guest"}}
		vi.Spec.Storage = v1alpha2.StorageContainerRegistry
		vi.Spec.DataSource = v1alpha2.VirtualImageDataSource{Type: v1alpha2.DataSourceTypeHTTP, HTTP: &source}
		image = vi
		status = func() (v1alpha2.ImagePhase, string, any) {
			return vi.Status.Phase, vi.Status.Target.RegistryURL, vi.Status.Conditions
		}
	}
	if err := st.admin.Create(ctx, image); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := st.admin.Delete(context.Background(), image); client.IgnoreNotFound(err) != nil {
			t.Errorf("delete the image: %v", err)
		}
	})
	eventually(t, 3*time.Minute, kind+" Ready", func(ctx context.Context) error {
		if err := st.admin.Get(ctx, client.ObjectKeyFromObject(image), image); err != nil {
			return err
		}
		if phase, _, conditions := status(); phase != v1alpha2.ImageReady {
			return fmt.Errorf("phase %s: %+v", phase, conditions)
		}
		return nil
	})
	_, url, _ := status()
	t.Logf("%s Ready in %s", kind, url)

	vd := newDisk(ns, "from-image", &v1alpha2.VirtualDiskDataSource{Type: v1alpha2.DataSourceTypeObjectRef,
		ObjectRef: &v1alpha2.VirtualDiskObjectRef{Kind: kind, Name: image.GetName()}}, "64Mi", "")
	got, pvc := st.createReady(t, ctx, vd)
	if capacity := pvc.Status.Capacity[corev1.ResourceStorage]; got.Status.Capacity != capacity.String() || got.Status.Progress != "100%" {
		t.Fatalf("status %+v, claim capacity %s", got.Status, capacity.String())
	}
	st.expectEvent(t, got, corev1.EventTypeNormal, "Phase Ready")
}

// testImageFromDisk: a VirtualImage made from a VirtualDisk (its claim read by an exporter Pod
// next to it, pushed into DVCR by an importer in the module's namespace), then a disk made from
// that image holds the first disk's content, as does a disk copied from the first one (its
// importer mounts both claims); nothing of the imports is left.
func testImageFromDisk(t *testing.T, st *stack) {
	ctx := longContext(t)
	ns := st.namespace(t, fmt.Sprintf("vi-from-vd-%d", os.Getpid()))
	source, _ := st.createReady(t, ctx, newDisk(ns, "source", st.httpSource(st.guestSHA256), "64Mi", ""))
	vi := &v1alpha2.VirtualImage{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "from-disk"}}
	vi.Spec.Storage = v1alpha2.StorageContainerRegistry
	vi.Spec.DataSource = v1alpha2.VirtualImageDataSource{Type: v1alpha2.DataSourceTypeObjectRef,
		ObjectRef: &v1alpha2.VirtualImageObjectRef{Kind: v1alpha2.VirtualDiskKind, Name: "source"}}
	st.createImageReady(t, ctx, vi)
	if vi.Status.Format != "raw" || vi.Status.Size.UnpackedBytes != strconv.Itoa(64<<20) || vi.Status.SourceUID == nil {
		t.Fatalf("status %+v", vi.Status)
	}
	copied, _ := st.createReady(t, ctx, newDisk(ns, "copy", &v1alpha2.VirtualDiskDataSource{Type: v1alpha2.DataSourceTypeObjectRef,
		ObjectRef: &v1alpha2.VirtualDiskObjectRef{Kind: v1alpha2.VirtualImageKind, Name: vi.Name}}, "64Mi", ""))
	st.compareDisk(t, ctx, ns, copied.Status.Target.PersistentVolumeClaimName, st.guestDisk)
	if copied.Status.SourceUID == nil || *copied.Status.SourceUID != vi.UID {
		t.Fatalf("the copy's sourceUID %v, the image's UID %s", copied.Status.SourceUID, vi.UID)
	}

	// A disk copied from the disk: its size by default, its content.
	clone := newDisk(ns, "clone", &v1alpha2.VirtualDiskDataSource{Type: v1alpha2.DataSourceTypeObjectRef,
		ObjectRef: &v1alpha2.VirtualDiskObjectRef{Kind: v1alpha2.VirtualDiskKind, Name: "source"}}, "64Mi", "")
	clone.Spec.PersistentVolumeClaim.Size = nil
	cloned, pvc := st.createReady(t, ctx, clone)
	if request := pvc.Spec.Resources.Requests[corev1.ResourceStorage]; request.String() != "64Mi" || cloned.Status.SourceUID == nil || *cloned.Status.SourceUID != source.UID {
		t.Fatalf("the clone's claim requests %s, its sourceUID %v (the source's UID %s)", request.String(), cloned.Status.SourceUID, source.UID)
	}
	st.compareDisk(t, ctx, ns, cloned.Status.Target.PersistentVolumeClaimName, st.guestDisk)
	st.nothingLeft(t, ns, "no exporter or importer left")
}

// createImageReady creates the VirtualImage (deleted at the end) and waits until it is Ready.
func (st *stack) createImageReady(t *testing.T, ctx context.Context, vi *v1alpha2.VirtualImage) {
	t.Helper()
	if err := st.admin.Create(ctx, vi); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.admin.Delete(context.Background(), vi) })
	eventually(t, 3*time.Minute, "the VirtualImage Ready", func(ctx context.Context) error {
		if err := st.admin.Get(ctx, client.ObjectKeyFromObject(vi), vi); err != nil {
			return err
		}
		if vi.Status.Phase != v1alpha2.ImageReady {
			return fmt.Errorf("phase %s: %+v", vi.Status.Phase, vi.Status.Conditions)
		}
		return nil
	})
}

// testImageOnClaim: a VirtualImage with storage PersistentVolumeClaim is imported into DVCR,
// then copied into a claim of its namespace (its disk.img the guest's disk); a disk made from
// it copies that claim; no filler, importer or Secret is left.
func testImageOnClaim(t *testing.T, st *stack) {
	ctx := longContext(t)
	ns := st.namespace(t, fmt.Sprintf("vi-on-claim-%d", os.Getpid()))
	vi := &v1alpha2.VirtualImage{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "on-claim"}}
	vi.Spec.Storage = v1alpha2.StoragePersistentVolumeClaim
	vi.Spec.DataSource = v1alpha2.VirtualImageDataSource{Type: v1alpha2.DataSourceTypeHTTP,
		HTTP: &v1alpha2.DataSourceHTTP{URL: st.guestURL, Checksum: &v1alpha2.Checksum{SHA256: st.guestSHA256}}}
	st.createImageReady(t, ctx, vi)
	if vi.Status.Target.PersistentVolumeClaimName == "" || vi.Status.Target.RegistryURL != "" || vi.Status.StorageClassName == "" || vi.Status.Size.UnpackedBytes != strconv.Itoa(25<<20) {
		t.Fatalf("status %+v", vi.Status)
	}
	st.compareDisk(t, ctx, ns, vi.Status.Target.PersistentVolumeClaimName, st.guestDisk)
	copied, _ := st.createReady(t, ctx, newDisk(ns, "from-claim", &v1alpha2.VirtualDiskDataSource{Type: v1alpha2.DataSourceTypeObjectRef,
		ObjectRef: &v1alpha2.VirtualDiskObjectRef{Kind: v1alpha2.VirtualImageKind, Name: vi.Name}}, "64Mi", ""))
	st.compareDisk(t, ctx, ns, copied.Status.Target.PersistentVolumeClaimName, st.guestDisk)
	st.nothingLeft(t, ns, "no filler or importer left")
}

// testSizedBySource: a disk from a URL without a size gets its source's unpacked size (25Mi for
// the tiny guest's qcow2), learnt by an inspector Pod before the claim is made; nothing of the
// inspection is left.
func testSizedBySource(t *testing.T, st *stack) {
	ctx := longContext(t)
	ns := st.namespace(t, fmt.Sprintf("vd-sized-%d", os.Getpid()))
	vd := newDisk(ns, "sized", st.httpSource(st.guestSHA256), "64Mi", "")
	vd.Spec.PersistentVolumeClaim.Size = nil
	got, pvc := st.createReady(t, ctx, vd)
	request := pvc.Spec.Resources.Requests[corev1.ResourceStorage]
	if got.Annotations["virtualization.deckhouse.io/vd-source-size"] != strconv.Itoa(25<<20) || request.String() != "25Mi" || got.Status.Capacity != "25Mi" {
		t.Fatalf("annotations %v, claim request %s, status %+v", got.Annotations, request.String(), got.Status)
	}
	eventually(t, time.Minute, "no inspector left", func(ctx context.Context) error {
		var pods corev1.PodList
		if err := st.admin.List(ctx, &pods, client.InNamespace(ns)); err != nil {
			return err
		}
		if len(pods.Items) != 0 {
			return fmt.Errorf("%d pods, the first %s", len(pods.Items), pods.Items[0].Name)
		}
		return nil
	})
}

// blockClass is a StorageClass of the local provisioner whose disks are Block volumes.
func (st *stack) blockClass(t *testing.T) string {
	t.Helper()
	sc := &storagev1.StorageClass{
		ObjectMeta:           metav1.ObjectMeta{Name: fmt.Sprintf("vd-block-%d", os.Getpid()), Annotations: map[string]string{"virtualization.deckhouse.io/volume-mode": "Block"}},
		Provisioner:          provisioner.Name,
		ReclaimPolicy:        ptr.To(corev1.PersistentVolumeReclaimDelete),
		VolumeBindingMode:    ptr.To(storagev1.VolumeBindingWaitForFirstConsumer),
		AllowVolumeExpansion: ptr.To(true),
	}
	if err := st.admin.Create(longContext(t), sc); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.admin.Delete(context.Background(), sc) })
	return sc.Name
}

const userData = `#!/bin/sh
(while true; do echo "vd-marker from $(hostname)"; sleep 2; done) &
`

func newVMI(ns, name, root, data string) *kubevirtv1.VirtualMachineInstance {
	virtio := kubevirtv1.DiskDevice{Disk: &kubevirtv1.DiskTarget{Bus: kubevirtv1.DiskBusVirtio}}
	claim := func(name string) kubevirtv1.VolumeSource {
		return kubevirtv1.VolumeSource{PersistentVolumeClaim: &kubevirtv1.PersistentVolumeClaimVolumeSource{
			PersistentVolumeClaimVolumeSource: corev1.PersistentVolumeClaimVolumeSource{ClaimName: name}}}
	}
	return &kubevirtv1.VirtualMachineInstance{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: kubevirtv1.VirtualMachineInstanceSpec{
			TerminationGracePeriodSeconds: ptr.To(int64(20)),
			Domain: kubevirtv1.DomainSpec{
				Resources: kubevirtv1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("128Mi")}},
				Devices: kubevirtv1.Devices{
					Disks: []kubevirtv1.Disk{
						{Name: "root", Serial: "vd-root", DiskDevice: virtio},
						{Name: "cloudinit", DiskDevice: virtio},
						{Name: "data", Serial: "vd-data", DiskDevice: virtio},
					},
					Interfaces: []kubevirtv1.Interface{{Name: "default", InterfaceBindingMethod: kubevirtv1.InterfaceBindingMethod{Masquerade: &kubevirtv1.InterfaceMasquerade{}}}},
				},
			},
			Networks: []kubevirtv1.Network{{Name: "default", NetworkSource: kubevirtv1.NetworkSource{Pod: &kubevirtv1.PodNetwork{}}}},
			Volumes: []kubevirtv1.Volume{
				{Name: "root", VolumeSource: claim(root)},
				{Name: "cloudinit", VolumeSource: kubevirtv1.VolumeSource{CloudInitNoCloud: &kubevirtv1.CloudInitNoCloudSource{UserData: userData}}},
				{Name: "data", VolumeSource: claim(data)},
			},
		},
	}
}

// bootVMI creates the VMI, waits until it runs and its guest's shell answers on the console.
func (st *stack) bootVMI(t *testing.T, vmi *kubevirtv1.VirtualMachineInstance) *guesttest.Console {
	t.Helper()
	if err := st.kubevirt.Create(longContext(t), vmi.DeepCopy()); err != nil {
		t.Fatalf("create VMI: %v", err)
	}
	eventually(t, 4*time.Minute, "VMI running", func(ctx context.Context) error {
		got := &kubevirtv1.VirtualMachineInstance{}
		if err := st.kubevirt.Get(ctx, client.ObjectKeyFromObject(vmi), got); err != nil {
			return err
		}
		if got.Status.Phase != kubevirtv1.Running {
			return fmt.Errorf("phase %s: %+v", got.Status.Phase, got.Status.Conditions)
		}
		return nil
	})
	var conn *console.Conn
	eventually(t, time.Minute, "open the console", func(ctx context.Context) error {
		var err error
		conn, err = console.Open(ctx, st.kubevirtREST, vmi.Namespace, vmi.Name, "console")
		return err
	})
	con := guesttest.NewConsole(conn)
	t.Cleanup(func() { _ = con.Close() })
	if _, err := con.WaitFor(regexp.MustCompile(`vd-marker from `+vmi.Name), 3*time.Minute); err != nil {
		t.Fatalf("%v\nconsole so far:\n%s", err, con)
	}
	// What is typed before the shell starts is lost: ask until it answers.
	for i := 0; ; i++ {
		if err := con.Write(fmt.Sprintf("echo shell-up-$((%d+1000))\n", i)); err != nil {
			t.Fatal(err)
		}
		if _, err := con.WaitFor(regexp.MustCompile(fmt.Sprintf(`shell-up-%d`, i+1000)), 5*time.Second); err == nil {
			return con
		}
		if i == 12 {
			t.Fatalf("the guest's shell does not answer\nconsole so far:\n%s", con)
		}
	}
}

// deleteVMI deletes the VMI and waits until it and its launcher Pod are gone.
func (st *stack) deleteVMI(t *testing.T, vmi *kubevirtv1.VirtualMachineInstance) {
	t.Helper()
	if err := st.kubevirt.Delete(longContext(t), vmi); client.IgnoreNotFound(err) != nil {
		t.Fatal(err)
	}
	eventually(t, 2*time.Minute, "VMI and launcher gone", func(ctx context.Context) error {
		if err := st.kubevirt.Get(ctx, client.ObjectKeyFromObject(vmi), &kubevirtv1.VirtualMachineInstance{}); !apierrors.IsNotFound(err) {
			return fmt.Errorf("VMI still there (%v)", err)
		}
		var pods corev1.PodList
		if err := st.admin.List(ctx, &pods, client.InNamespace(vmi.Namespace)); err != nil {
			return err
		}
		if len(pods.Items) > 0 {
			return fmt.Errorf("pod %s still there", pods.Items[0].Name)
		}
		return nil
	})
}

var doneMarker = regexp.MustCompile(`(?s)(.*)vd-done-4242`)

// guestValue runs script, which prints name=[value], on the console and returns value.
func guestValue(t *testing.T, con *guesttest.Console, name, script string) string {
	t.Helper()
	if err := con.Write(script + "; echo vd-done-$((4200+42))\n"); err != nil {
		t.Fatal(err)
	}
	m, err := con.WaitFor(doneMarker, time.Minute)
	if err != nil {
		t.Fatalf("%s: %v\nconsole so far:\n%s", script, err, con)
	}
	// The typed line holds name=[ too, but followed by a $( that no value contains.
	v := regexp.MustCompile(regexp.QuoteMeta(name) + `=\[([^]$]*)\]`).FindStringSubmatch(m[1])
	if v == nil {
		t.Fatalf("%s: no %s=[...] in the output:\n%s", script, name, m[1])
	}
	return v[1]
}

// guestDisk is the device name and size in bytes of the guest's disk with serial.
func guestDisk(t *testing.T, con *guesttest.Console, serial string) (string, int64) {
	t.Helper()
	v := guestValue(t, con, "disk", fmt.Sprintf(`for d in /sys/block/vd*; do [ "$(cat $d/serial)" = %s ] && echo "disk=[${d##*/} $(cat $d/size)]"; done`, serial))
	dev, sectors, ok := strings.Cut(v, " ")
	n, err := strconv.ParseInt(sectors, 10, 64)
	if !ok || err != nil {
		t.Fatalf("disk %s: %q", serial, v)
	}
	return dev, n * 512
}

// testImport makes the root disk, imported over HTTP, and the blank data disk, and returns them
// Ready and WaitForFirstConsumer.
// block is a StorageClass whose disks are Block volumes.
func testImport(t *testing.T, st *stack, ns, block string) (*v1alpha2.VirtualDisk, *v1alpha2.VirtualDisk) {
	ctx := longContext(t)
	root := newDisk(ns, "root", st.httpSource(st.guestSHA256), "64Mi", "")
	data := newDisk(ns, "data", nil, "32Mi", block)
	for _, vd := range []*v1alpha2.VirtualDisk{root, data} {
		if err := st.admin.Create(ctx, vd); err != nil {
			t.Fatal(err)
		}
	}

	t.Log("the root disk imports the guest over HTTP; the blank data disk waits for its first consumer")
	root = st.waitPhase(t, root, v1alpha2.DiskReady, 3*time.Minute)
	rootClaim, err := st.claim(ctx, ns, root.Status.Target.PersistentVolumeClaimName)
	if err != nil {
		t.Fatal(err)
	}
	if capacity := rootClaim.Status.Capacity[corev1.ResourceStorage]; root.Status.Capacity == "" || root.Status.Capacity != capacity.String() || root.Status.Progress != "100%" {
		t.Fatalf("status %+v, claim capacity %s", root.Status, capacity.String())
	}
	st.expectEvent(t, root, corev1.EventTypeNormal, "Phase Ready")
	data = st.waitPhase(t, data, v1alpha2.DiskWaitForFirstConsumer, time.Minute)
	t.Logf("root Ready with %s on claim %s; data %s", root.Status.Capacity, rootClaim.Name, data.Status.Phase)
	eventually(t, 30*time.Second, "the phase metric", func(ctx context.Context) error {
		text, err := st.metrics.scrape(ctx)
		if err != nil {
			return err
		}
		for _, want := range []string{
			fmt.Sprintf(`d8_virtualization_virtualdisk_status_phase{name="root",namespace="%s",phase="Ready"} 1`, ns),
			fmt.Sprintf(`d8_virtualization_virtualdisk_status_phase{name="data",namespace="%s",phase="WaitForFirstConsumer"} 1`, ns),
			fmt.Sprintf(`d8_virtualization_virtualdisk_status_phase{name="root",namespace="%s",phase="Failed"} 0`, ns),
		} {
			if !strings.Contains(text, want) {
				return fmt.Errorf("no %s", want)
			}
		}
		return nil
	})

	return root, data
}

func testBootResizeProtect(t *testing.T, st *stack, root, data *v1alpha2.VirtualDisk) {
	ctx := longContext(t)
	ns := root.Namespace
	rootClaim, err := st.claim(ctx, ns, root.Status.Target.PersistentVolumeClaimName)
	if err != nil {
		t.Fatal(err)
	}
	vmi := newVMI(ns, "guest", root.Status.Target.PersistentVolumeClaimName, data.Status.Target.PersistentVolumeClaimName)
	con := st.bootVMI(t, vmi)
	t.Log("the guest boots from the disk")
	data = st.waitPhase(t, data, v1alpha2.DiskReady, time.Minute)
	rootDev, rootBytes := guestDisk(t, con, "vd-root")
	_, dataBytes := guestDisk(t, con, "vd-data")
	// Each disk is its size: the root one is larger than the 25Mi image it was made from.
	if rootBytes != 64<<20 || dataBytes != 32<<20 {
		t.Fatalf("the guest sees root %d and data %d bytes", rootBytes, dataBytes)
	}
	// Written far behind the files of the disk's FAT file system.
	sector := rootBytes/512 - 8
	guestValue(t, con, "wrote", fmt.Sprintf(`echo vd-e2e-kept | dd of=/dev/%s bs=512 seek=%d conv=notrunc 2>/dev/null; sync; echo "wrote=[$?]"`, rootDev, sector))

	t.Log("the data disk (Block) grows to 48Mi while the guest runs; the root disk (Filesystem) asks for 80Mi")
	grow := func(vd *v1alpha2.VirtualDisk, size string) {
		t.Helper()
		vd.Spec.PersistentVolumeClaim.Size = ptr.To(resource.MustParse(size))
		if err := st.admin.Update(ctx, vd); err != nil {
			t.Fatal(err)
		}
	}
	grown := func(vd *v1alpha2.VirtualDisk, capacity string) {
		t.Helper()
		eventually(t, 2*time.Minute, vd.Name+" disk grown", func(ctx context.Context) error {
			if err := st.admin.Get(ctx, client.ObjectKeyFromObject(vd), vd); err != nil {
				return err
			}
			if vd.Status.Phase != v1alpha2.DiskReady || vd.Status.Capacity != capacity || vd.Status.ObservedGeneration != vd.Generation {
				return fmt.Errorf("status %+v", vd.Status)
			}
			return nil
		})
	}
	grow(data, "48Mi")
	grow(root, "80Mi")
	grown(data, "48Mi")
	st.expectEvent(t, data, corev1.EventTypeNormal, "Phase Resizing")
	// A Filesystem volume of the local provisioner grows offline: Resizing until the VMI goes.
	eventually(t, time.Minute, "root disk Resizing, offline", func(ctx context.Context) error {
		if err := st.admin.Get(ctx, client.ObjectKeyFromObject(root), root); err != nil {
			return err
		}
		c := meta.FindStatusCondition(root.Status.Conditions, string(vdcondition.ResizingType))
		if root.Status.Phase != v1alpha2.DiskResizing || c == nil || !strings.Contains(c.Message, "stop the virtual machine") {
			return fmt.Errorf("phase %s, Resizing %+v", root.Status.Phase, c)
		}
		return nil
	})

	t.Log("restart the VMI: the root disk keeps what the guest wrote and is 80Mi, the data disk 48Mi")
	st.deleteVMI(t, vmi)
	grown(root, "80Mi")
	con = st.bootVMI(t, vmi)
	rootDev, rootBytes = guestDisk(t, con, "vd-root")
	if _, dataBytes = guestDisk(t, con, "vd-data"); dataBytes != 48<<20 || rootBytes != 80<<20 {
		t.Fatalf("after the restart the guest sees root %d and data %d bytes", rootBytes, dataBytes)
	}
	if got := guestValue(t, con, "sector", fmt.Sprintf(`echo "sector=[$(dd if=/dev/%s bs=512 skip=%d count=1 2>/dev/null | tr -cd 'a-z0-9-')]"`, rootDev, sector)); got != "vd-e2e-kept" {
		t.Fatalf("after the restart the guest reads %q", got)
	}

	t.Log("the root disk is deleted while the VMI uses it: it waits until the VMI is gone")
	if err := st.admin.Delete(ctx, root); err != nil {
		t.Fatal(err)
	}
	root = st.waitPhase(t, root, v1alpha2.DiskTerminating, 30*time.Second)
	if c := meta.FindStatusCondition(root.Status.Conditions, string(vdcondition.InUseType)); c == nil || !strings.Contains(c.Message, "Pod virt-launcher-guest") {
		t.Fatalf("InUse %+v", c)
	}
	time.Sleep(3 * time.Second)
	if err := st.admin.Get(ctx, client.ObjectKeyFromObject(root), root); err != nil {
		t.Fatalf("the disk in use is gone: %v", err)
	}
	if _, err := st.claim(ctx, ns, rootClaim.Name); err != nil {
		t.Fatalf("the claim of the disk in use: %v", err)
	}
	guestValue(t, con, "alive", `echo "alive=[yes]"`)
	st.deleteVMI(t, vmi)
	eventually(t, time.Minute, "disk and claim gone", func(ctx context.Context) error {
		if err := st.admin.Get(ctx, client.ObjectKeyFromObject(root), &v1alpha2.VirtualDisk{}); !apierrors.IsNotFound(err) {
			return fmt.Errorf("disk still there (%v)", err)
		}
		if _, err := st.claim(ctx, ns, rootClaim.Name); !apierrors.IsNotFound(err) {
			return fmt.Errorf("claim still there (%v)", err)
		}
		return nil
	})
}
