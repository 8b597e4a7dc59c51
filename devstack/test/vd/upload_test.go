package vd

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1alpha2 "github.com/d8virt/api/core/v1alpha2"
	"github.com/d8virt/api/core/v1alpha2/vdcondition"
)

// testUpload: a disk with an Upload source waits for the upload at its URLs (WaitForUserUpload),
// refuses a wrong token at the in-cluster one, takes `curl -T` of the guest's qcow2 at the
// external one (a node port of the local stack's) into its claim as raw disk.img
// (the same disk as the qcow2, compared by qemu-img), reaches Ready, and leaves no uploader,
// Service or Secret behind.
func testUpload(t *testing.T, st *stack) {
	ctx := longContext(t)
	ns := st.namespace(t, fmt.Sprintf("vd-upload-%d", os.Getpid()))
	vd := newDisk(ns, "uploaded", &v1alpha2.VirtualDiskDataSource{Type: v1alpha2.DataSourceTypeUpload}, "64Mi", "")
	if err := st.admin.Create(ctx, vd); err != nil {
		t.Fatal(err)
	}
	got := st.waitPhase(t, vd, v1alpha2.DiskWaitForUserUpload, 2*time.Minute)
	url := ""
	if got.Status.ImageUploadURLs != nil {
		url = got.Status.ImageUploadURLs.InCluster
	}
	if want := "http://vd-upload-uploaded." + ns + ".svc/upload"; url != want {
		t.Fatalf("upload URL %q, want %q", url, want)
	}
	// The local stack's uploaders are NodePort Services: the external URL is the node port at
	// the uploader's node, which the machine reaches as it is; the Ready message names it.
	external := got.Status.ImageUploadURLs.External
	if !regexp.MustCompile(`^http://[0-9.]+:3[0-9]{4}/upload$`).MatchString(external) {
		t.Fatalf("external upload URL %q", external)
	}
	if c := meta.FindStatusCondition(got.Status.Conditions, string(vdcondition.ReadyType)); c == nil || c.Reason != string(vdcondition.WaitForUserUpload) || !strings.Contains(c.Message, external) {
		t.Fatalf("Ready %+v", c)
	}
	token := got.Annotations["virtualization.deckhouse.io/upload-token"]
	// The machine reaches cluster IPs but does not resolve Service names: curl is told the IP.
	svc := &corev1.Service{}
	if err := st.admin.Get(ctx, client.ObjectKey{Namespace: ns, Name: "vd-upload-uploaded"}, svc); err != nil {
		t.Fatal(err)
	}
	resolve := "vd-upload-uploaded." + ns + ".svc:80:" + svc.Spec.ClusterIP
	if code, body := curlUpload(t, st.guestDisk, "not-"+token, url, resolve); code != "403" {
		t.Fatalf("a wrong token: HTTP %s %s", code, body)
	}
	if code, body := curlUpload(t, st.guestDisk, token, external, ""); code != "200" || body != "imported" {
		t.Fatalf("the upload to %s: HTTP %s %s", external, code, body)
	}
	got = st.waitPhase(t, vd, v1alpha2.DiskReady, 2*time.Minute)
	if got.Status.ImageUploadURLs != nil || got.Status.Progress != "100%" {
		t.Fatalf("status %+v", got.Status)
	}
	st.expectEvent(t, got, corev1.EventTypeNormal, "Phase WaitForUserUpload")

	// The claim holds the uploaded disk, converted to raw.
	st.compareDisk(t, ctx, ns, got.Status.Target.PersistentVolumeClaimName, st.guestDisk)
	st.nothingLeft(t, ns, "no uploader left")
}

// testUploadWithoutSize: a disk with an Upload source and no size takes the upload all the
// same: a stager receives it (the URLs point at it), learns its unpacked size (the guest's
// 25Mi), and the claim made of that size is filled from the stager's export; Ready with the
// guest's disk, and nothing left.
func testUploadWithoutSize(t *testing.T, st *stack) {
	ctx := longContext(t)
	ns := st.namespace(t, fmt.Sprintf("vd-upload-unsized-%d", os.Getpid()))
	vd := newDisk(ns, "unsized", &v1alpha2.VirtualDiskDataSource{Type: v1alpha2.DataSourceTypeUpload}, "64Mi", "")
	vd.Spec.PersistentVolumeClaim.Size = nil
	if err := st.admin.Create(ctx, vd); err != nil {
		t.Fatal(err)
	}
	got := st.waitPhase(t, vd, v1alpha2.DiskWaitForUserUpload, 2*time.Minute)
	if got.Status.ImageUploadURLs == nil || got.Status.Target.PersistentVolumeClaimName != "" {
		t.Fatalf("status while waiting for the upload %+v", got.Status)
	}
	token := got.Annotations["virtualization.deckhouse.io/upload-token"]
	if code, body := curlUpload(t, st.guestDisk, token, got.Status.ImageUploadURLs.External, ""); code != "200" || body != "imported" {
		t.Fatalf("the upload to %s: HTTP %s %s", got.Status.ImageUploadURLs.External, code, body)
	}
	got = st.waitPhase(t, vd, v1alpha2.DiskReady, 2*time.Minute)
	pvc, err := st.claim(ctx, ns, got.Status.Target.PersistentVolumeClaimName)
	if err != nil {
		t.Fatal(err)
	}
	request := pvc.Spec.Resources.Requests[corev1.ResourceStorage]
	if got.Annotations["virtualization.deckhouse.io/vd-source-size"] != strconv.Itoa(25<<20) || request.String() != "25Mi" || got.Status.Capacity != "25Mi" {
		t.Fatalf("annotations %v, claim request %s, status %+v", got.Annotations, request.String(), got.Status)
	}
	st.compareDisk(t, ctx, ns, pvc.Name, st.guestDisk)
	st.nothingLeft(t, ns, "no stager, importer, Service or Secret left")
}

// compareDisk runs qemu-img compare of the claim's disk.img (raw) with the qcow2 file: the
// same guest-visible content (past the qcow2's end, zeros).
func (st *stack) compareDisk(t *testing.T, ctx context.Context, ns, claim, qcow2 string) {
	t.Helper()
	pvc, err := st.claim(ctx, ns, claim)
	if err != nil {
		t.Fatal(err)
	}
	pv := &corev1.PersistentVolume{}
	if err := st.admin.Get(ctx, client.ObjectKey{Name: pvc.Spec.VolumeName}, pv); err != nil {
		t.Fatal(err)
	}
	if pv.Spec.Local == nil {
		t.Fatalf("volume %s is not a local one: %+v", pv.Name, pv.Spec.PersistentVolumeSource)
	}
	img := filepath.Join(pv.Spec.Local.Path, "disk.img")
	if out, err := exec.CommandContext(ctx, "qemu-img", "compare", "-f", "raw", "-F", "qcow2", img, qcow2).CombinedOutput(); err != nil {
		t.Fatalf("qemu-img compare %s with %s: %v: %s", img, qcow2, err, out)
	}
}

// nothingLeft waits until the namespace has no Pods, Services or Secrets: every importer,
// uploader and exporter is gone with its companions.
func (st *stack) nothingLeft(t *testing.T, ns, what string) {
	t.Helper()
	eventually(t, time.Minute, what, func(ctx context.Context) error {
		var pods corev1.PodList
		if err := st.admin.List(ctx, &pods, client.InNamespace(ns)); err != nil {
			return err
		}
		var svcs corev1.ServiceList
		if err := st.admin.List(ctx, &svcs, client.InNamespace(ns)); err != nil {
			return err
		}
		var secrets corev1.SecretList
		if err := st.admin.List(ctx, &secrets, client.InNamespace(ns)); err != nil {
			return err
		}
		if n := len(pods.Items) + len(svcs.Items) + len(secrets.Items); n != 0 {
			return fmt.Errorf("%d pods, %d services, %d secrets", len(pods.Items), len(svcs.Items), len(secrets.Items))
		}
		return nil
	})
}

// curlUpload is `curl -T file -H "Authorization: Bearer token" url` with the Service's name
// resolved as resolve says (none when empty): the HTTP status and the body. Until the uploader
// is ready its Service closes connections (curl's exit 52, an empty reply), which is retried
// for a minute.
func curlUpload(t *testing.T, file, token, url, resolve string) (string, string) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	args := []string{"-sS", "-T", file, "-H", "Authorization: Bearer " + token, "-w", "\n%{http_code}", url}
	if resolve != "" {
		args = append([]string{"--resolve", resolve}, args...)
	}
	for {
		out, err := exec.Command("curl", args...).CombinedOutput()
		var exit *exec.ExitError
		if errors.As(err, &exit) && (exit.ExitCode() == 52 || exit.ExitCode() == 7) && time.Now().Before(deadline) {
			time.Sleep(time.Second)
			continue
		}
		if err != nil {
			t.Fatalf("curl: %v: %s", err, out)
		}
		s := strings.TrimSpace(string(out))
		i := strings.LastIndex(s, "\n")
		return s[i+1:], strings.TrimSpace(s[:max(i, 0)])
	}
}
