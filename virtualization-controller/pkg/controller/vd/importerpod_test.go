package vd

import (
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	v1alpha2 "github.com/d8virt/api/core/v1alpha2"
	"github.com/d8virt/virtualization-controller/pkg/importerpod"
)

func TestClaim(t *testing.T) {
	d := disk(httpSource, "100Mi", "")
	plan := Plan{StorageClass: "local", VolumeMode: corev1.PersistentVolumeFilesystem, Size: resource.MustParse("100Mi"), Source: &Source{URL: "http://x"}}
	pvc := Claim(d, plan)
	if pvc.Name != "vd-tiny-uid-1" || pvc.Namespace != "ns" || *pvc.Spec.StorageClassName != "local" || *pvc.Spec.VolumeMode != corev1.PersistentVolumeFilesystem ||
		pvc.Labels[LabelVDUID] != "uid-1" || pvc.Labels[LabelManagedBy] != ManagedBy || pvc.OwnerReferences[0].UID != "uid-1" || pvc.Annotations[AnnotationDiskSize] != "100Mi" {
		t.Fatalf("claim %+v", pvc)
	}
	if got := pvc.Spec.Resources.Requests[corev1.ResourceStorage]; got.String() != "100Mi" {
		t.Errorf("request %s", got.String())
	}
	if _, ok := pvc.Annotations[AnnotationProvisioned]; ok {
		t.Error("an imported disk's claim is provisioned before the import")
	}
	plan.Source = nil
	if Claim(d, plan).Annotations[AnnotationProvisioned] != "true" {
		t.Error("a blank disk's claim is not provisioned")
	}
}

func TestImporterPod(t *testing.T) {
	c := PodConfig{Image: "registry.example/d8v/importer:dev", UploadTimeout: time.Hour}
	d := disk(httpSource, "100Mi", "")
	cases := []struct {
		name    string
		plan    Plan
		secret  *corev1.Secret
		args    []string
		mounts  []string
		devices []string
	}{
		{name: "http into a file", plan: Plan{VolumeMode: corev1.PersistentVolumeFilesystem, Size: resource.MustParse("100Mi"), Source: &Source{URL: "http://srv/tiny.qcow2", Checksum: httpSource.HTTP.Checksum}}, args: []string{
			"--source-url=http://srv/tiny.qcow2", "--sha256=" + httpSource.HTTP.Checksum.SHA256, "--destination-file=/data/disk.img", "--capacity=104857600"},
			mounts: []string{"/scratch", "/data"}},
		{name: "registry into a device, with its pull secret", plan: Plan{VolumeMode: corev1.PersistentVolumeBlock, Size: resource.MustParse("1Gi"), Source: &Source{Image: "reg/disk:1", PullSecret: "pull"}},
			args:   []string{"--source-image=reg/disk:1", "--destination-file=" + DevicePath, "--source-auth-file=/etc/importer/pull/.dockerconfigjson"},
			mounts: []string{"/scratch", "/etc/importer/pull"}, devices: []string{DevicePath}},
		{name: "from DVCR, through its exporter", plan: Plan{VolumeMode: corev1.PersistentVolumeFilesystem, Size: resource.MustParse("25Mi"), Source: &Source{URL: "http://10.0.0.9:8090/export", ExportToken: []byte("exp0rt")}},
			secret: ImporterSecret(d, &Source{URL: "http://10.0.0.9:8090/export", ExportToken: []byte("exp0rt")}),
			args:   []string{"--source-url=http://10.0.0.9:8090/export", "--source-token-file=/etc/importer/source/export-token"},
			mounts: []string{"/scratch", "/data", "/etc/importer/source"}},
		{name: "an upload into a device", plan: Plan{VolumeMode: corev1.PersistentVolumeBlock, Size: resource.MustParse("1Gi"), Source: &Source{Upload: true}},
			secret: ImporterSecret(uploadDisk, &Source{Upload: true}),
			args:   []string{"--source-upload-address=:8090", "--upload-token-file=/etc/importer/source/upload-token", "--upload-timeout=1h0m0s", "--destination-file=" + DevicePath},
			mounts: []string{"/scratch", "/etc/importer/source"}, devices: []string{DevicePath}},
		{name: "a Filesystem disk's copy", plan: Plan{VolumeMode: corev1.PersistentVolumeFilesystem, Size: resource.MustParse("64Mi"), Source: &Source{Disk: readyDisk}},
			args:   []string{"--source-file=/source/disk.img", "--destination-file=/data/disk.img", "--capacity=67108864"},
			mounts: []string{"/scratch", "/data", "/source"}},
		{name: "a Block disk's copy into a device", plan: Plan{VolumeMode: corev1.PersistentVolumeBlock, Size: resource.MustParse("64Mi"), Source: &Source{Disk: &SourceDisk{Claim: "vd-base-x", Block: true}}},
			args:   []string{"--source-file=/dev/d8v-source", "--destination-file=" + DevicePath},
			mounts: []string{"/scratch"}, devices: []string{DevicePath, "/dev/d8v-source"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			pod := c.ImporterPod(d, "vd-tiny-uid-1", tc.plan, tc.secret)
			if tc.plan.Source.Upload {
				ports := pod.Spec.Containers[0].Ports
				if len(ports) != 2 || ports[1].Name != "upload" || ports[1].ContainerPort != 8090 {
					t.Errorf("ports %+v", ports)
				}
				if slices.ContainsFunc(pod.Spec.Containers[0].Args, func(a string) bool { return strings.HasPrefix(a, "--source-ca-bundle") }) {
					t.Errorf("an upload reads a CA bundle: %q", pod.Spec.Containers[0].Args)
				}
				// The uploader Service selects it.
				svc := c.UploaderService(d)
				for k, v := range svc.Spec.Selector {
					if pod.Labels[k] != v {
						t.Errorf("the service selects %s=%s, the pod has %q", k, v, pod.Labels)
					}
				}
			}
			if pod.Name != "vd-importer-tiny" || pod.Namespace != "ns" || pod.OwnerReferences[0].UID != "uid-1" || pod.Labels[LabelManagedBy] != ManagedBy ||
				pod.Spec.RestartPolicy != corev1.RestartPolicyNever || *pod.Spec.AutomountServiceAccountToken {
				t.Fatalf("pod %+v", pod.ObjectMeta)
			}
			ctr := pod.Spec.Containers[0]
			for _, a := range tc.args {
				if !slices.Contains(ctr.Args, a) {
					t.Errorf("no %s in %q", a, ctr.Args)
				}
			}
			var mounts, devices []string
			for _, m := range ctr.VolumeMounts {
				mounts = append(mounts, m.MountPath)
			}
			for _, m := range ctr.VolumeDevices {
				devices = append(devices, m.DevicePath)
			}
			if !slices.Equal(mounts, tc.mounts) || !slices.Equal(devices, tc.devices) {
				t.Errorf("mounts %q, devices %q", mounts, devices)
			}
			if pod.Spec.Volumes[0].PersistentVolumeClaim.ClaimName != "vd-tiny-uid-1" {
				t.Errorf("volumes %+v", pod.Spec.Volumes)
			}
			if src := tc.plan.Source.Disk; src != nil {
				v := pod.Spec.Volumes[len(pod.Spec.Volumes)-1]
				if v.Name != "source-disk" || v.PersistentVolumeClaim.ClaimName != src.Claim || v.PersistentVolumeClaim.ReadOnly == src.Block {
					t.Errorf("the source disk's volume %+v", v)
				}
			}
		})
	}
}

func TestImporterSecret(t *testing.T) {
	d := disk(nil, "1Gi", "")
	if s := ImporterSecret(d, &Source{URL: "http://x"}); s != nil {
		t.Errorf("a plain URL gets a secret: %+v", s)
	}
	s := ImporterSecret(d, &Source{URL: "https://x", CABundle: []byte("user-ca")})
	if s == nil || string(s.Data[keyCA]) != "user-ca" || len(s.Data) != 1 || s.Name != "vd-importer-tiny" || s.OwnerReferences[0].UID != d.UID {
		t.Errorf("CA bundle secret %+v", s)
	}
	// An image in DVCR: only its exporter's token, never DVCR's credentials.
	s = ImporterSecret(d, &Source{URL: "http://10.0.0.9:8090/export", ExportToken: []byte("exp0rt")})
	if s == nil || string(s.Data[importerpod.KeyExportToken]) != "exp0rt" || len(s.Data) != 1 {
		t.Errorf("DVCR exporter's secret %+v", s)
	}
}

var uploadDisk = func() *v1alpha2.VirtualDisk {
	d := disk(uploadSource, "1Gi", "")
	d.Annotations = map[string]string{importerpod.AnnotationUploadToken: "t0ken"}
	return d
}()

func TestUploader(t *testing.T) {
	s := ImporterSecret(uploadDisk, &Source{Upload: true})
	if s == nil || string(s.Data[keyUploadToken]) != "t0ken" || string(s.Data[importerpod.KeyExportToken]) != "t0ken" || len(s.Data) != 2 {
		t.Errorf("upload secret %+v", s)
	}
	svc := PodConfig{UploadServiceType: corev1.ServiceTypeClusterIP}.UploaderService(uploadDisk)
	if svc.Name != "vd-upload-tiny" || svc.Namespace != "ns" || svc.OwnerReferences[0].UID != "uid-1" || svc.Labels[LabelManagedBy] != ManagedBy ||
		svc.Spec.Ports[0].Port != 80 || svc.Spec.Ports[0].TargetPort.StrVal != "upload" || svc.Spec.Selector[LabelVDUID] != "uid-1" || svc.Spec.Selector[labelUploader] != "true" {
		t.Errorf("service %+v", svc)
	}
	if got := UploadURLs(uploadDisk, svc, &corev1.Pod{}).InCluster; got != "http://vd-upload-tiny.ns.svc/upload" {
		t.Errorf("upload URL %s", got)
	}
}

// TestStagerPod: an upload to a disk without a size is staged in the Pod's scratch space and
// then served with the upload's token; the Service sends the upload to it.
func TestStagerPod(t *testing.T) {
	c := PodConfig{Image: "importer:1", UploadTimeout: time.Hour}
	src := &Source{Upload: true}
	pod := c.InspectorPod(uploadDisk, src, ImporterSecret(uploadDisk, src))
	args := pod.Spec.Containers[0].Args
	for _, want := range []string{"--source-upload-address=:8090", "--destination-file=/scratch/disk.img", "--then-export=true",
		"--export-address=:8091", "--export-token-file=/etc/importer/source/export-token", "--upload-token-file=/etc/importer/source/upload-token"} {
		if !slices.Contains(args, want) {
			t.Errorf("stager args %q lack %s", args, want)
		}
	}
	if slices.Contains(args, "--inspect=true") || !IsStager(pod) || pod.Labels[labelUploader] != "true" || len(pod.Spec.Volumes) != 2 {
		t.Errorf("stager %+v", pod)
	}
	if got := StagedExportURL(&corev1.Pod{Status: corev1.PodStatus{PodIP: "10.0.0.9"}}); got != "http://10.0.0.9:8091/export" {
		t.Errorf("export URL %s", got)
	}
	importer := c.ImporterPod(uploadDisk, "claim", Plan{Source: &Source{URL: "http://10.0.0.9:8091/export", ExportToken: []byte("t0ken")}}, nil)
	if importer.Labels[labelUploader] != "" {
		t.Errorf("the importer from the stager takes no upload: %v", importer.Labels)
	}
}
