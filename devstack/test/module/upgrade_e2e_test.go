package module

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/d8virt/devstack/module"
)

// checkUpgrades runs helm upgrade twice on the running module with the VM running. First one
// installed component's value (virt-api's resources): only virt-api's pods roll, every other
// component's stay, the operator's included. Then the log level and format: every component rolls,
// its programs get them (virt-operator passes them on), and the VM keeps running through it.
func checkUpgrades(t *testing.T, ctx context.Context, st *stack, vmiUID string) {
	t.Helper()
	before := componentPods(t, ctx, st)
	apiCPU := "resources.virtApi.requests.cpu=15m"
	t.Logf("helm upgrade --set %s rolls virt-api only", apiCPU)
	if err := st.c.Install(ctx, apiCPU); err != nil {
		t.Fatal(err)
	}
	// The operator applies the changed KubeVirt; WaitReady returns once it has and virt-api's
	// Deployment rolled out. Give a roll that should not happen time to start.
	time.Sleep(5 * time.Second)
	after := componentPods(t, ctx, st)
	for _, c := range module.Components {
		changed := !slices.Equal(before[c], after[c])
		if changed != (c == "virt-api") {
			t.Errorf("%s: pods %v before, %v after the upgrade of virt-api's resources", c, before[c], after[c])
		}
	}
	api, err := st.kube.AppsV1().Deployments(module.Namespace).Get(ctx, "virt-api", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got := container(api.Spec.Template.Spec, "virt-api").Resources.Requests[corev1.ResourceCPU]; got.String() != "15m" {
		t.Errorf("virt-api's cpu request %s, want 15m", got.String())
	}

	t.Log("helm upgrade --set logLevel=debug,logFormat=text reaches every component")
	if err := st.c.Install(ctx, apiCPU, "logLevel=debug", "logFormat=text"); err != nil {
		t.Fatal(err)
	}
	// The new operator pod passes the flags on once it runs, which may be after WaitReady saw the
	// old components ready: wait for the templates, then for them to roll out.
	deadline := time.Now().Add(2 * time.Minute)
	for missing := missingLogArgs(t, ctx, st); len(missing) > 0; missing = missingLogArgs(t, ctx, st) {
		if time.Now().After(deadline) {
			t.Fatalf("after the upgrade of the log level: %s", strings.Join(missing, "; "))
		}
		time.Sleep(2 * time.Second)
	}
	if err := module.WaitReady(ctx, st.opts, 5*time.Minute); err != nil {
		t.Fatal(err)
	}
	// Every component rolled: DVCR through its configuration's checksum, the installed ones
	// because the operator passed the new flags on.
	rolled := componentPods(t, ctx, st)
	for _, c := range module.Components {
		for _, uid := range rolled[c] {
			if slices.Contains(after[c], uid) {
				t.Errorf("%s: pod %s did not roll for the new log level", c, uid)
			}
		}
	}
	dvcrConfig, err := st.kube.CoreV1().ConfigMaps(module.Namespace).Get(ctx, "dvcr-config", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"push.yaml", "pull.yaml"} {
		if v := dvcrConfig.Data[k]; !strings.Contains(v, "level: debug") || !strings.Contains(v, "formatter: text") {
			t.Errorf("DVCR's configuration %s has not the log level and format:\n%s", k, v)
		}
	}
	st.kubectl(t, st.kubevirt, "wait", "vm/demo", "--for=jsonpath={.status.printableStatus}=Running", "--timeout=1m")
	if got := st.kubectl(t, st.kubevirt, "get", "vmi/demo", "-o", "jsonpath={.metadata.uid}"); got != vmiUID {
		t.Fatalf("VMI after the upgrades: uid %q, was %q", got, vmiUID)
	}
	checkDVCRGarbageCollection(t, ctx, st, apiCPU, "logLevel=debug", "logFormat=text")
}

// missingLogArgs lists the containers of the components' templates that lack their logArgs.
func missingLogArgs(t *testing.T, ctx context.Context, st *stack) []string {
	t.Helper()
	var missing []string
	for _, spec := range componentSpecs(t, ctx, st) {
		for _, c := range append(append([]corev1.Container{}, spec.pod.InitContainers...), spec.pod.Containers...) {
			for _, w := range logArgs(spec.name, c.Name) {
				if !slices.Contains(c.Args, w) {
					missing = append(missing, fmt.Sprintf("%s container %s: no %s in %q", spec.name, c.Name, w, c.Args))
				}
			}
		}
	}
	return missing
}

// logArgs are the flags a container of a component must carry at logLevel=debug and
// logFormat=text: every program of ours has both, virtualization-controller (JSON only) the
// level, DVCR's registries take them from their configuration, kube-rbac-proxy (upstream's) none.
func logArgs(component, container string) []string {
	switch {
	case strings.HasPrefix(container, "kube-rbac-proxy"), component == "dvcr":
		return nil
	case container == "virtualization-controller":
		return []string{"--log-level=debug"}
	}
	return []string{"--log-level=debug", "--log-format=text"}
}

type componentSpec struct {
	name string
	pod  corev1.PodSpec
}

// componentSpecs are the pod templates of the module's Deployments and DaemonSet.
func componentSpecs(t *testing.T, ctx context.Context, st *stack) []componentSpec {
	t.Helper()
	var out []componentSpec
	for _, c := range module.Components {
		var spec corev1.PodSpec
		if c == "virt-handler" {
			ds, err := st.kube.AppsV1().DaemonSets(module.Namespace).Get(ctx, c, metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			spec = ds.Spec.Template.Spec
		} else {
			d, err := st.kube.AppsV1().Deployments(module.Namespace).Get(ctx, c, metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			spec = d.Spec.Template.Spec
		}
		out = append(out, componentSpec{name: c, pod: spec})
	}
	return out
}

// componentPods are the UIDs of each component's live pods, sorted.
func componentPods(t *testing.T, ctx context.Context, st *stack) map[string][]types.UID {
	t.Helper()
	pods, err := st.kube.CoreV1().Pods(module.Namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	out := map[string][]types.UID{}
	for _, p := range pods.Items {
		if p.DeletionTimestamp != nil || p.Status.Phase == corev1.PodFailed || p.Status.Phase == corev1.PodSucceeded {
			continue
		}
		for _, c := range module.Components {
			if owned(&p, c) {
				out[c] = append(out[c], p.UID)
			}
		}
	}
	for c := range out {
		slices.Sort(out[c])
	}
	return out
}

// owned says whether the pod belongs to the component's Deployment (through a ReplicaSet named
// after it) or DaemonSet.
func owned(p *corev1.Pod, component string) bool {
	for _, ref := range p.OwnerReferences {
		if ref.Name == component || (ref.Kind == "ReplicaSet" && strings.HasPrefix(ref.Name, component+"-") &&
			!strings.Contains(strings.TrimPrefix(ref.Name, component+"-"), "-")) {
			return true
		}
	}
	return false
}

func container(spec corev1.PodSpec, name string) corev1.Container {
	for _, c := range spec.Containers {
		if c.Name == name {
			return c
		}
	}
	return corev1.Container{}
}
