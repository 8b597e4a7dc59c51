package storage

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/moby/sys/mountinfo"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"

	"github.com/d8virt/devstack/nodeagent"
	"github.com/d8virt/devstack/provisioner"
	"github.com/d8virt/devstack/provisioner/hostvol"
	"github.com/d8virt/devstack/testenv"
)

const mib = 1 << 20

type suite struct {
	t     *testing.T
	kube  kubernetes.Interface
	ns    string
	node  string
	label string
	out   string // the pods' hostPath for what they report
	agent string // the agent's log
}

// startAgent runs a node agent of the test's own, labelled so that only this test's pods go
// there; it stops and its pods' leftovers go when the test ends.
func startAgent(t *testing.T, env *testenv.Env, s *suite) {
	repo, err := filepath.Abs(filepath.Join("..", "..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	bin := t.TempDir()
	build := exec.Command("go", "build", "-o", bin+"/", "./devstack/cmd/node-agent")
	build.Dir = repo
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build node-agent: %v\n%s", err, out)
	}
	root := filepath.Join(t.TempDir(), "root")
	s.agent = filepath.Join(t.TempDir(), "agent.log")
	logf, err := os.Create(s.agent)
	if err != nil {
		t.Fatal(err)
	}
	defer logf.Close()
	cmd := exec.Command(filepath.Join(bin, "node-agent"), "--kubeconfig", env.Kubeconfig, "--node-name", s.node,
		"--root-dir", root, "--bin-dir", bin, "--image-store", t.TempDir(), "--cpu", "2", "--memory", "4Gi",
		"--labels", "d8v.test/storage="+s.label)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGTERM}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
		if err := nodeagent.CleanupNode(root, env.Net, 10*time.Second); err != nil {
			t.Errorf("clean up node %s: %v", s.node, err)
		}
		ctx := context.Background()
		if err := s.kube.CoreV1().Nodes().Delete(ctx, s.node, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			t.Errorf("delete node %s: %v", s.node, err)
		}
		_ = s.kube.CoordinationV1().Leases(corev1.NamespaceNodeLease).Delete(ctx, s.node, metav1.DeleteOptions{})
	})
}

func (s *suite) logs() string {
	b, _ := os.ReadFile(s.agent)
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > 30 {
		lines = lines[len(lines)-30:]
	}
	return strings.Join(lines, "\n")
}

// eventually polls check for up to d.
func (s *suite) eventually(t *testing.T, d time.Duration, what string, check func(ctx context.Context) error) {
	t.Helper()
	ctx := testenv.Context(t)
	deadline := time.Now().Add(d)
	for {
		err := check(ctx)
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not after %s: %v\n--- node agent:\n%s", what, d, err, s.logs())
		}
		time.Sleep(250 * time.Millisecond)
	}
}

func (s *suite) claim(t *testing.T, name, size string, mode corev1.PersistentVolumeMode) *corev1.PersistentVolumeClaim {
	t.Helper()
	pvc, err := s.kube.CoreV1().PersistentVolumeClaims(s.ns).Create(testenv.Context(t), &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			VolumeMode:  &mode,
			Resources:   corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse(size)}},
		},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create claim %s: %v", name, err)
	}
	return pvc
}

func (s *suite) getClaim(ctx context.Context, name string) (*corev1.PersistentVolumeClaim, error) {
	return s.kube.CoreV1().PersistentVolumeClaims(s.ns).Get(ctx, name, metav1.GetOptions{})
}

// pod runs script in busybox on the test's node with the claim at /data (Filesystem) or
// /dev/xvdb (Block) and the test's output directory at /out.
func (s *suite) pod(t *testing.T, name, claim string, block bool, script string) {
	t.Helper()
	dirOrCreate := corev1.HostPathDirectoryOrCreate
	c := corev1.Container{Name: "main", Image: "busybox", Command: []string{"/bin/busybox", "sh", "-c", script},
		VolumeMounts: []corev1.VolumeMount{{Name: "out", MountPath: "/out"}}}
	if block {
		c.VolumeDevices = []corev1.VolumeDevice{{Name: "vol", DevicePath: "/dev/xvdb"}}
	} else {
		c.VolumeMounts = append(c.VolumeMounts, corev1.VolumeMount{Name: "vol", MountPath: "/data"})
	}
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: corev1.PodSpec{
			NodeSelector:                  map[string]string{"d8v.test/storage": s.label},
			RestartPolicy:                 corev1.RestartPolicyNever,
			TerminationGracePeriodSeconds: new(int64),
			Containers:                    []corev1.Container{c},
			Volumes: []corev1.Volume{
				{Name: "vol", VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: claim}}},
				{Name: "out", VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: s.out, Type: &dirOrCreate}}},
			},
		},
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		_, err := s.kube.CoreV1().Pods(s.ns).Create(testenv.Context(t), pod, metav1.CreateOptions{})
		if err == nil {
			return
		}
		// The namespace's service account may not exist yet.
		if !strings.Contains(err.Error(), "serviceaccount") || time.Now().After(deadline) {
			t.Fatalf("create pod %s: %v", name, err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func (s *suite) deletePod(t *testing.T, name string) {
	t.Helper()
	if err := s.kube.CoreV1().Pods(s.ns).Delete(testenv.Context(t), name, metav1.DeleteOptions{}); err != nil {
		t.Fatalf("delete pod %s: %v", name, err)
	}
	s.eventually(t, time.Minute, "pod "+name+" gone", func(ctx context.Context) error {
		_, err := s.kube.CoreV1().Pods(s.ns).Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		return fmt.Errorf("still there (%v)", err)
	})
}

// output waits for the file the pod writes into /out and returns it, trimmed.
func (s *suite) output(t *testing.T, file string, ok func(string) bool) string {
	t.Helper()
	var got string
	s.eventually(t, 90*time.Second, "output "+file, func(context.Context) error {
		b, err := os.ReadFile(filepath.Join(s.out, file))
		if err != nil {
			return err
		}
		got = strings.TrimSpace(string(b))
		if !ok(got) {
			return fmt.Errorf("%q", got)
		}
		return nil
	})
	return got
}

// fsSize is the size in bytes of what `stat -f -c '%b %S'` printed (what df shows): total
// blocks times the block size.
// fsSize reads `stat -f -c '%b %S %a'`: the file system's size and what the pod may still write.
func fsSize(t *testing.T, line string) (size, free int64) {
	t.Helper()
	var blocks, block, avail int64
	if _, err := fmt.Sscan(line, &blocks, &block, &avail); err != nil {
		t.Fatalf("stat -f output %q: %v", line, err)
	}
	return blocks * block, avail * block
}

func quantity(l corev1.ResourceList) int64 {
	q := l[corev1.ResourceStorage]
	return q.Value()
}

// resizing tells whether the claim has a resize condition (others, like the controller
// manager's Unused, may come and go).
func resizing(pvc *corev1.PersistentVolumeClaim) bool {
	for _, c := range pvc.Status.Conditions {
		if c.Type == corev1.PersistentVolumeClaimResizing || c.Type == corev1.PersistentVolumeClaimFileSystemResizePending {
			return true
		}
	}
	return false
}

func (s *suite) grow(t *testing.T, name, size string) {
	t.Helper()
	patch, _ := json.Marshal(map[string]any{"spec": map[string]any{"resources": map[string]any{"requests": map[string]string{"storage": size}}}})
	if _, err := s.kube.CoreV1().PersistentVolumeClaims(s.ns).Patch(testenv.Context(t), name, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		t.Fatalf("grow claim %s to %s: %v", name, size, err)
	}
}

// boundVolume waits until the claim is bound and returns its PV.
func (s *suite) boundVolume(t *testing.T, name string) *corev1.PersistentVolume {
	t.Helper()
	var pv *corev1.PersistentVolume
	s.eventually(t, 90*time.Second, "claim "+name+" bound", func(ctx context.Context) error {
		pvc, err := s.getClaim(ctx, name)
		if err != nil {
			return err
		}
		if pvc.Status.Phase != corev1.ClaimBound {
			return fmt.Errorf("phase %s", pvc.Status.Phase)
		}
		pv, err = s.kube.CoreV1().PersistentVolumes().Get(ctx, pvc.Spec.VolumeName, metav1.GetOptions{})
		return err
	})
	return pv
}

// checkPinned checks that the PV is a local volume of the provisioner pinned to the test's node.
func (s *suite) checkPinned(t *testing.T, pv *corev1.PersistentVolume, claim string) {
	t.Helper()
	pvc, err := s.getClaim(testenv.Context(t), claim)
	if err != nil {
		t.Fatal(err)
	}
	if got := pvc.Annotations["volume.kubernetes.io/selected-node"]; got != s.node {
		t.Errorf("claim %s: selected node %q, want %q", claim, got, s.node)
	}
	if pv.Annotations["pv.kubernetes.io/provisioned-by"] != provisioner.Name || pv.Spec.Local == nil {
		t.Errorf("pv %s is not a local volume of %s: %+v", pv.Name, provisioner.Name, pv.Spec.PersistentVolumeSource)
	}
	if pv.Spec.PersistentVolumeReclaimPolicy != corev1.PersistentVolumeReclaimDelete {
		t.Errorf("pv %s reclaim policy %s", pv.Name, pv.Spec.PersistentVolumeReclaimPolicy)
	}
	terms := pv.Spec.NodeAffinity.Required.NodeSelectorTerms
	if len(terms) != 1 || len(terms[0].MatchExpressions) != 1 || terms[0].MatchExpressions[0].Operator != corev1.NodeSelectorOpIn ||
		strings.Join(terms[0].MatchExpressions[0].Values, ",") != s.node {
		t.Errorf("pv %s node affinity %+v, want the node %s", pv.Name, terms, s.node)
	}
}

// TestLocalVolumes: a claim without a class gets the default class local and waits for its first
// pod, then is provisioned on that pod's node; data written survives a new pod; a grown claim
// grows the file system (once the pod that has it mounted is gone) and a Block claim's device
// (at once); deleting the claims deletes their PVs, files, loop devices and mounts.
func TestLocalVolumes(t *testing.T) {
	env := testenv.Get(t)
	var b [3]byte
	_, _ = rand.Read(b[:])
	run := hex.EncodeToString(b[:])
	s := &suite{t: t, kube: env.Kube, node: "storage-" + run, label: run, out: t.TempDir()}
	startAgent(t, env, s)
	s.ns = env.Namespace(t)
	ctx := testenv.Context(t)

	class, err := s.kube.StorageV1().StorageClasses().Get(ctx, provisioner.ClassName, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("the stack's default StorageClass: %v", err)
	}
	if class.Annotations[provisioner.DefaultClassAnnotation] != "true" || class.Provisioner != provisioner.Name ||
		class.AllowVolumeExpansion == nil || !*class.AllowVolumeExpansion || class.VolumeBindingMode == nil ||
		*class.VolumeBindingMode != "WaitForFirstConsumer" {
		t.Errorf("storageclass %s: %+v", class.Name, class)
	}

	// Filesystem: the default class, and nothing happens until a pod uses the claim.
	pvc := s.claim(t, "data", "64Mi", corev1.PersistentVolumeFilesystem)
	if pvc.Spec.StorageClassName == nil || *pvc.Spec.StorageClassName != provisioner.ClassName {
		t.Errorf("claim without a class got class %v, want %s", pvc.Spec.StorageClassName, provisioner.ClassName)
	}
	time.Sleep(3 * time.Second)
	if pvc, err = s.getClaim(ctx, "data"); err != nil || pvc.Status.Phase != corev1.ClaimPending || pvc.Spec.VolumeName != "" {
		t.Fatalf("claim without a pod: %+v, %v; want Pending and no volume (WaitForFirstConsumer)", pvc.Status, err)
	}
	s.pod(t, "writer", "data", false, `set -e
echo hello > /data/greeting
cat /data/greeting > /out/read.tmp && mv /out/read.tmp /out/read
stat -f -c '%b %S %a' /data > /out/df.tmp && mv /out/df.tmp /out/df
exec sleep 3600`)
	fsPV := s.boundVolume(t, "data")
	s.checkPinned(t, fsPV, "data")
	if got := quantity(fsPV.Spec.Capacity); got != 64*mib {
		t.Errorf("pv capacity %d, want 64Mi", got)
	}
	s.output(t, "read", func(v string) bool { return v == "hello" })
	// The pod may write the claim's size: the file system is larger by its own share.
	before, free := fsSize(t, s.output(t, "df", func(v string) bool { return v != "" }))
	if free < 64*mib-mib || before > hostvol.BackingSize(corev1.PersistentVolumeFilesystem, 64*mib) {
		t.Errorf("the pod's file system of a 64Mi claim has %d bytes, %d free", before, free)
	}
	fsDir := filepath.Dir(filepath.Dir(fsPV.Spec.Local.Path)) // <volumes>/<pv>/mount/data

	// Grown while the pod runs: the volume grows, the file system waits for the pod to go.
	s.grow(t, "data", "128Mi")
	s.eventually(t, time.Minute, "file system resize pending", func(ctx context.Context) error {
		pvc, err := s.getClaim(ctx, "data")
		if err != nil {
			return err
		}
		for _, c := range pvc.Status.Conditions {
			if c.Type == corev1.PersistentVolumeClaimFileSystemResizePending && c.Status == corev1.ConditionTrue {
				if got := quantity(pvc.Status.AllocatedResources); got != 128*mib {
					return fmt.Errorf("allocatedResources %d", got)
				}
				return nil
			}
		}
		return fmt.Errorf("status %+v", pvc.Status)
	})
	if pv, err := s.kube.CoreV1().PersistentVolumes().Get(ctx, fsPV.Name, metav1.GetOptions{}); err != nil || quantity(pv.Spec.Capacity) != 128*mib {
		t.Errorf("pv capacity while the file system waits: %v (%v)", pv.Spec.Capacity, err)
	}
	s.deletePod(t, "writer")
	s.eventually(t, time.Minute, "claim capacity 128Mi", func(ctx context.Context) error {
		pvc, err := s.getClaim(ctx, "data")
		if err != nil {
			return err
		}
		if quantity(pvc.Status.Capacity) != 128*mib || resizing(pvc) || pvc.Status.AllocatedResourceStatuses != nil {
			return fmt.Errorf("status %+v", pvc.Status)
		}
		return nil
	})
	s.pod(t, "reader", "data", false, `set -e
cat /data/greeting > /out/read2.tmp && mv /out/read2.tmp /out/read2
stat -f -c '%b %S %a' /data > /out/df2.tmp && mv /out/df2.tmp /out/df2
exec sleep 3600`)
	s.output(t, "read2", func(v string) bool { return v == "hello" })
	if after, free := fsSize(t, s.output(t, "df2", func(v string) bool { return v != "" })); after < before+56*mib || free < 128*mib-mib ||
		after > hostvol.BackingSize(corev1.PersistentVolumeFilesystem, 128*mib) {
		t.Errorf("grown to 128Mi, the pod's file system has %d bytes, %d free (was %d)", after, free, before)
	}

	// Block: a device of the claim's size in the pod, which grows at once.
	s.claim(t, "raw", "32Mi", corev1.PersistentVolumeBlock)
	s.pod(t, "blk", "raw", true, `set -e
printf block-data | dd of=/dev/xvdb conv=fsync 2>/dev/null
dd if=/dev/xvdb bs=10 count=1 2>/dev/null > /out/bread
while true; do blockdev --getsize64 /dev/xvdb > /out/bsize.tmp && mv /out/bsize.tmp /out/bsize; sleep 0.2; done`)
	blkPV := s.boundVolume(t, "raw")
	s.checkPinned(t, blkPV, "raw")
	s.output(t, "bread", func(v string) bool { return v == "block-data" })
	s.output(t, "bsize", func(v string) bool { return v == strconv.Itoa(32*mib) })
	s.grow(t, "raw", "48Mi")
	s.output(t, "bsize", func(v string) bool { return v == strconv.Itoa(48*mib) })
	s.eventually(t, time.Minute, "block claim capacity 48Mi", func(ctx context.Context) error {
		pvc, err := s.getClaim(ctx, "raw")
		if err != nil {
			return err
		}
		if quantity(pvc.Status.Capacity) != 48*mib || resizing(pvc) || pvc.Status.AllocatedResourceStatuses != nil {
			return fmt.Errorf("status %+v", pvc.Status)
		}
		return nil
	})
	blkDir := filepath.Dir(blkPV.Spec.Local.Path) // <volumes>/<pv>/device

	// Deleted: the PVs go (reclaim policy Delete), and with them the files, mounts and loops.
	s.deletePod(t, "reader")
	s.deletePod(t, "blk")
	for _, c := range []string{"data", "raw"} {
		if err := s.kube.CoreV1().PersistentVolumeClaims(s.ns).Delete(ctx, c, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	for _, pv := range []string{fsPV.Name, blkPV.Name} {
		s.eventually(t, time.Minute, "pv "+pv+" deleted", func(ctx context.Context) error {
			_, err := s.kube.CoreV1().PersistentVolumes().Get(ctx, pv, metav1.GetOptions{})
			if apierrors.IsNotFound(err) {
				return nil
			}
			return fmt.Errorf("still there (%v)", err)
		})
	}
	for _, dir := range []string{fsDir, blkDir} {
		if _, err := os.Stat(dir); !os.IsNotExist(err) {
			t.Errorf("volume directory %s left: %v", dir, err)
		}
		if ms, err := mountinfo.GetMounts(mountinfo.PrefixFilter(dir)); err != nil || len(ms) > 0 {
			t.Errorf("mounts left under %s: %v %v", dir, ms, err)
		}
		backing, _ := filepath.Glob("/sys/block/loop*/loop/backing_file")
		for _, f := range backing {
			if b, _ := os.ReadFile(f); strings.HasPrefix(string(b), dir+"/") {
				t.Errorf("%s still backed by %s", f, b)
			}
		}
	}
}
