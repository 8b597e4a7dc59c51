package vd

import (
	"reflect"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	v1alpha2 "github.com/d8virt/api/core/v1alpha2"
	"github.com/d8virt/api/core/v1alpha2/vdcondition"
	"github.com/d8virt/virtualization-controller/pkg/storageclass"
)

func class(name string, def bool, annotations map[string]string) storagev1.StorageClass {
	sc := storagev1.StorageClass{
		ObjectMeta:        metav1.ObjectMeta{Name: name, Annotations: map[string]string{}, CreationTimestamp: metav1.NewTime(time.Unix(1000, 0))},
		VolumeBindingMode: ptr.To(storagev1.VolumeBindingWaitForFirstConsumer),
	}
	if def {
		sc.Annotations[storageclass.AnnotationDefault] = "true"
	}
	for k, v := range annotations {
		sc.Annotations[k] = v
	}
	return sc
}

func disk(ds *v1alpha2.VirtualDiskDataSource, size string, sc string) *v1alpha2.VirtualDisk {
	vd := &v1alpha2.VirtualDisk{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "tiny", UID: "uid-1", Generation: 1}}
	vd.Spec.DataSource = ds
	if size != "" {
		vd.Spec.PersistentVolumeClaim.Size = ptr.To(resource.MustParse(size))
	}
	if sc != "" {
		vd.Spec.PersistentVolumeClaim.StorageClassName = ptr.To(sc)
	}
	return vd
}

var (
	httpSource   = &v1alpha2.VirtualDiskDataSource{Type: v1alpha2.DataSourceTypeHTTP, HTTP: &v1alpha2.DataSourceHTTP{URL: "http://srv/tiny.qcow2", Checksum: &v1alpha2.Checksum{SHA256: strings.Repeat("a", 64)}}}
	cviSource    = &v1alpha2.VirtualDiskDataSource{Type: v1alpha2.DataSourceTypeObjectRef, ObjectRef: &v1alpha2.VirtualDiskObjectRef{Kind: v1alpha2.ClusterVirtualImageKind, Name: "tiny"}}
	viSource     = &v1alpha2.VirtualDiskDataSource{Type: v1alpha2.DataSourceTypeObjectRef, ObjectRef: &v1alpha2.VirtualDiskObjectRef{Kind: v1alpha2.VirtualImageKind, Name: "tiny"}}
	ciSource     = &v1alpha2.VirtualDiskDataSource{Type: v1alpha2.DataSourceTypeContainerImage, ContainerImage: &v1alpha2.DataSourceContainerImage{Image: "reg/disk:1", ImagePullSecret: &v1alpha2.ImagePullSecret{Name: "pull"}}}
	uploadSource = &v1alpha2.VirtualDiskDataSource{Type: v1alpha2.DataSourceTypeUpload}
	vdSource     = &v1alpha2.VirtualDiskDataSource{Type: v1alpha2.DataSourceTypeObjectRef, ObjectRef: &v1alpha2.VirtualDiskObjectRef{Kind: v1alpha2.VirtualDiskKind, Name: "base"}}
	readyDisk    = &SourceDisk{UID: "vd-uid", Phase: v1alpha2.DiskReady, Claim: "vd-base-x", SizeBytes: 64 << 20}
	readyImage   = &Image{UID: "img-uid", Phase: v1alpha2.ImageReady, RegistryURL: "dvcr.ns.svc/cvi/tiny:latest", UnpackedBytes: 25 << 20}
)

// inspected is vd with the size its inspector found.
func inspected(vd *v1alpha2.VirtualDisk, size string) *v1alpha2.VirtualDisk {
	vd.Annotations = map[string]string{AnnotationSourceSize: size}
	return vd
}

func TestMakePlan(t *testing.T) {
	local := []storagev1.StorageClass{class("local", true, nil), class("block", false, map[string]string{storageclass.AnnotationVolumeMode: "Block"}),
		class("shared", false, map[string]string{storageclass.AnnotationAccessMode: "ReadWriteMany"})}
	cases := []struct {
		name string
		vd   *v1alpha2.VirtualDisk
		deps Deps
		want Plan
		// problem: the Problem's phase, condition and a part of its message.
		problem *Problem
	}{
		{name: "http into the default class", vd: disk(httpSource, "100Mi", ""), deps: Deps{StorageClasses: local},
			want: Plan{StorageClass: "local", VolumeMode: corev1.PersistentVolumeFilesystem, AccessMode: corev1.ReadWriteOnce, WaitForFirstConsumer: true, Size: resource.MustParse("100Mi"),
				Source: &Source{URL: "http://srv/tiny.qcow2", Checksum: httpSource.HTTP.Checksum}}},
		{name: "a Block class", vd: disk(nil, "1Gi", "block"), deps: Deps{StorageClasses: local},
			want: Plan{StorageClass: "block", VolumeMode: corev1.PersistentVolumeBlock, AccessMode: corev1.ReadWriteOnce, WaitForFirstConsumer: true, Size: resource.MustParse("1Gi")}},
		{name: "cvi sizes the disk", vd: disk(cviSource, "", ""), deps: Deps{StorageClasses: local, Image: readyImage},
			want: Plan{StorageClass: "local", VolumeMode: corev1.PersistentVolumeFilesystem, AccessMode: corev1.ReadWriteOnce, WaitForFirstConsumer: true, Size: *resource.NewQuantity(25<<20, resource.BinarySI),
				Source: &Source{Image: "dvcr.ns.svc/cvi/tiny:latest", DVCR: true}, SourceUID: "img-uid"}},
		{name: "container image with its pull secret", vd: disk(ciSource, "1Gi", ""), deps: Deps{StorageClasses: local, PullSecretFound: true},
			want: Plan{StorageClass: "local", VolumeMode: corev1.PersistentVolumeFilesystem, AccessMode: corev1.ReadWriteOnce, WaitForFirstConsumer: true, Size: resource.MustParse("1Gi"),
				Source: &Source{Image: "reg/disk:1", PullSecret: "pull"}}},
		{name: "a ReadWriteMany class", vd: disk(nil, "1Gi", "shared"), deps: Deps{StorageClasses: local},
			want: Plan{StorageClass: "shared", VolumeMode: corev1.PersistentVolumeFilesystem, AccessMode: corev1.ReadWriteMany, WaitForFirstConsumer: true, Size: resource.MustParse("1Gi")}},
		{name: "no such class", vd: disk(nil, "1Gi", "fast"), deps: Deps{StorageClasses: local},
			problem: &Problem{Phase: v1alpha2.DiskPending, Condition: vdcondition.StorageClassReadyType, Message: "storageClassName: StorageClass fast not found"}},
		{name: "no default class", vd: disk(nil, "1Gi", ""), deps: Deps{StorageClasses: local[1:]},
			problem: &Problem{Phase: v1alpha2.DiskPending, Condition: vdcondition.StorageClassReadyType, Message: "no default StorageClass"}},
		{name: "a bad volume mode annotation", vd: disk(nil, "1Gi", "odd"), deps: Deps{StorageClasses: []storagev1.StorageClass{class("odd", false, map[string]string{storageclass.AnnotationVolumeMode: "Tape"})}},
			problem: &Problem{Phase: v1alpha2.DiskFailed, Condition: vdcondition.StorageClassReadyType, Message: `is "Tape": want Filesystem or Block`}},
		{name: "a bad access mode annotation", vd: disk(nil, "1Gi", "odd"), deps: Deps{StorageClasses: []storagev1.StorageClass{class("odd", false, map[string]string{storageclass.AnnotationAccessMode: "ReadOnlyMany"})}},
			problem: &Problem{Phase: v1alpha2.DiskFailed, Condition: vdcondition.StorageClassReadyType, Message: `virtualization.deckhouse.io/access-mode is "ReadOnlyMany": want ReadWriteOnce or ReadWriteMany`}},
		{name: "blank without size", vd: disk(nil, "", ""), deps: Deps{StorageClasses: local},
			problem: &Problem{Phase: v1alpha2.DiskFailed, Condition: vdcondition.ReadyType, Message: "spec.persistentVolumeClaim.size is required for a blank disk"}},
		{name: "http without size: inspected first", vd: disk(httpSource, "", ""), deps: Deps{StorageClasses: local},
			want: Plan{StorageClass: "local", VolumeMode: corev1.PersistentVolumeFilesystem, AccessMode: corev1.ReadWriteOnce, WaitForFirstConsumer: true, Inspect: true,
				Source: &Source{URL: "http://srv/tiny.qcow2", Checksum: httpSource.HTTP.Checksum}}},
		{name: "http sized by its inspection", vd: inspected(disk(httpSource, "", ""), "26214400"), deps: Deps{StorageClasses: local},
			want: Plan{StorageClass: "local", VolumeMode: corev1.PersistentVolumeFilesystem, AccessMode: corev1.ReadWriteOnce, WaitForFirstConsumer: true, Size: resource.MustParse("25Mi"),
				Source: &Source{URL: "http://srv/tiny.qcow2", Checksum: httpSource.HTTP.Checksum}}},
		{name: "the spec's size over the inspection's", vd: inspected(disk(httpSource, "1Gi", ""), "26214400"), deps: Deps{StorageClasses: local},
			want: Plan{StorageClass: "local", VolumeMode: corev1.PersistentVolumeFilesystem, AccessMode: corev1.ReadWriteOnce, WaitForFirstConsumer: true, Size: resource.MustParse("1Gi"),
				Source: &Source{URL: "http://srv/tiny.qcow2", Checksum: httpSource.HTTP.Checksum}}},
		{name: "smaller than the image", vd: disk(cviSource, "10Mi", ""), deps: Deps{StorageClasses: local, Image: readyImage},
			problem: &Problem{Phase: v1alpha2.DiskFailed, Condition: vdcondition.ReadyType, Message: "size 10Mi is smaller than the source's size 25.0Mi"}},
		{name: "a copy of a disk, its size", vd: disk(vdSource, "", ""), deps: Deps{StorageClasses: local, Disk: readyDisk},
			want: Plan{StorageClass: "local", VolumeMode: corev1.PersistentVolumeFilesystem, AccessMode: corev1.ReadWriteOnce, WaitForFirstConsumer: true, Size: resource.MustParse("64Mi"),
				Source: &Source{Disk: readyDisk}, SourceUID: "vd-uid"}},
		{name: "a copy of a disk, larger", vd: disk(vdSource, "1Gi", "block"), deps: Deps{StorageClasses: local, Disk: readyDisk},
			want: Plan{StorageClass: "block", VolumeMode: corev1.PersistentVolumeBlock, AccessMode: corev1.ReadWriteOnce, WaitForFirstConsumer: true, Size: resource.MustParse("1Gi"),
				Source: &Source{Disk: readyDisk}, SourceUID: "vd-uid"}},
		{name: "a copy of a disk, smaller", vd: disk(vdSource, "10Mi", ""), deps: Deps{StorageClasses: local, Disk: readyDisk},
			problem: &Problem{Phase: v1alpha2.DiskFailed, Condition: vdcondition.ReadyType, Message: "size 10Mi is smaller than the source's size 64.0Mi"}},
		{name: "a copy of a missing disk", vd: disk(vdSource, "", ""), deps: Deps{StorageClasses: local},
			problem: &Problem{Phase: v1alpha2.DiskPending, Condition: vdcondition.DatasourceReadyType, Reason: string(vdcondition.VirtualDiskNotFound), Message: "VirtualDisk ns/base not found"}},
		{name: "a copy of a disk being provisioned", vd: disk(vdSource, "", ""), deps: Deps{StorageClasses: local, Disk: &SourceDisk{Phase: v1alpha2.DiskProvisioning, Claim: "c"}},
			problem: &Problem{Phase: v1alpha2.DiskPending, Condition: vdcondition.DatasourceReadyType, Reason: string(vdcondition.VirtualDiskNotReady), Message: "VirtualDisk ns/base is Provisioning, not Ready"}},
		{name: "a copy of a disk in a running machine", vd: disk(vdSource, "", ""), deps: Deps{StorageClasses: local, Disk: &SourceDisk{Phase: v1alpha2.DiskReady, Claim: "c", RunningVMs: []string{"web"}}},
			problem: &Problem{Phase: v1alpha2.DiskPending, Condition: vdcondition.DatasourceReadyType, Reason: string(vdcondition.VirtualDiskAttachedToRunningVM), Message: "is in use by the running virtual machine web: the copy starts once it is stopped"}},
		{name: "a copy of itself", vd: disk(&v1alpha2.VirtualDiskDataSource{Type: v1alpha2.DataSourceTypeObjectRef, ObjectRef: &v1alpha2.VirtualDiskObjectRef{Kind: v1alpha2.VirtualDiskKind, Name: "tiny"}}, "", ""), deps: Deps{StorageClasses: local},
			problem: &Problem{Phase: v1alpha2.DiskFailed, Condition: vdcondition.DatasourceReadyType, Message: "a disk cannot be copied from itself"}},
		{name: "cvi not there yet", vd: disk(cviSource, "", ""), deps: Deps{StorageClasses: local},
			problem: &Problem{Phase: v1alpha2.DiskPending, Condition: vdcondition.DatasourceReadyType, Reason: string(vdcondition.ClusterImageNotFound), Message: "ClusterVirtualImage tiny not found"}},
		{name: "vi not ready", vd: disk(viSource, "", ""), deps: Deps{StorageClasses: local, Image: &Image{Phase: v1alpha2.ImageProvisioning}},
			problem: &Problem{Phase: v1alpha2.DiskPending, Condition: vdcondition.DatasourceReadyType, Reason: string(vdcondition.ImageNotReady), Message: "VirtualImage ns/tiny is Provisioning, not Ready"}},
		{name: "an ISO", vd: disk(cviSource, "", ""), deps: Deps{StorageClasses: local, Image: &Image{Phase: v1alpha2.ImageReady, RegistryURL: "x", CDROM: true}},
			problem: &Problem{Phase: v1alpha2.DiskFailed, Condition: vdcondition.DatasourceReadyType, Message: "is an ISO image (a CD-ROM), which cannot be a disk"}},
		{name: "an image without a target yet", vd: disk(viSource, "", ""), deps: Deps{StorageClasses: local, Image: &Image{Phase: v1alpha2.ImageReady}},
			problem: &Problem{Phase: v1alpha2.DiskPending, Condition: vdcondition.DatasourceReadyType, Message: "has neither an image in DVCR nor a PersistentVolumeClaim yet"}},
		{name: "an image on a claim is copied", vd: disk(viSource, "", ""), deps: Deps{StorageClasses: local, Image: &Image{UID: "vi-uid", Phase: v1alpha2.ImageReady, Claim: "vi-tiny-x", UnpackedBytes: 25 << 20}},
			want: Plan{StorageClass: "local", VolumeMode: corev1.PersistentVolumeFilesystem, AccessMode: corev1.ReadWriteOnce, WaitForFirstConsumer: true, Size: resource.MustParse("25Mi"),
				Source: &Source{Disk: &SourceDisk{Claim: "vi-tiny-x"}}, SourceUID: "vi-uid"}},
		{name: "pull secret missing", vd: disk(ciSource, "1Gi", ""), deps: Deps{StorageClasses: local},
			problem: &Problem{Phase: v1alpha2.DiskPending, Condition: vdcondition.DatasourceReadyType, Reason: string(vdcondition.ContainerRegistrySecretNotFound), Message: "Secret ns/pull not found"}},
		{name: "upload", vd: disk(uploadSource, "1Gi", "block"), deps: Deps{StorageClasses: local},
			want: Plan{StorageClass: "block", VolumeMode: corev1.PersistentVolumeBlock, AccessMode: corev1.ReadWriteOnce, WaitForFirstConsumer: true, Size: resource.MustParse("1Gi"),
				Source: &Source{Upload: true}}},
		{name: "upload without size: staged first", vd: disk(uploadSource, "", ""), deps: Deps{StorageClasses: local},
			want: Plan{StorageClass: "local", VolumeMode: corev1.PersistentVolumeFilesystem, AccessMode: corev1.ReadWriteOnce, WaitForFirstConsumer: true, Inspect: true,
				Source: &Source{Upload: true}}},
		{name: "upload staged: the size it has", vd: func() *v1alpha2.VirtualDisk {
			d := disk(uploadSource, "", "")
			d.Annotations = map[string]string{AnnotationSourceSize: "26214400"}
			return d
		}(), deps: Deps{StorageClasses: local},
			want: Plan{StorageClass: "local", VolumeMode: corev1.PersistentVolumeFilesystem, AccessMode: corev1.ReadWriteOnce, WaitForFirstConsumer: true, Size: resource.MustParse("25Mi"),
				Source: &Source{Upload: true}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, problem := MakePlan(tc.vd, tc.deps)
			if tc.problem != nil {
				if problem == nil {
					t.Fatalf("no problem, plan %+v", got)
				}
				if problem.Phase != tc.problem.Phase || problem.Condition != tc.problem.Condition || !strings.Contains(problem.Message, tc.problem.Message) ||
					(tc.problem.Reason != "" && problem.Reason != tc.problem.Reason) {
					t.Fatalf("problem %+v, want %+v", problem, tc.problem)
				}
				return
			}
			if problem != nil {
				t.Fatalf("problem %+v", problem)
			}
			if got.StorageClass != tc.want.StorageClass || got.VolumeMode != tc.want.VolumeMode || got.AccessMode != tc.want.AccessMode || got.WaitForFirstConsumer != tc.want.WaitForFirstConsumer || got.Inspect != tc.want.Inspect || got.SourceUID != tc.want.SourceUID ||
				got.Size.Cmp(tc.want.Size) != 0 || (got.Source == nil) != (tc.want.Source == nil) || (got.Source != nil && !reflect.DeepEqual(got.Source, tc.want.Source)) {
				t.Fatalf("plan %+v (source %+v), want %+v (source %+v)", got, got.Source, tc.want, tc.want.Source)
			}
		})
	}
}
