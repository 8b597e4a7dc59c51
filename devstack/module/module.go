// Package module installs the virtualization module on a local stack the way a platform does:
// `helm upgrade --install` of charts/virtualization with the local stack's values
// (devstack/chart-values/local.yaml), then it waits, reporting progress, until virt-operator has
// installed the core and every component's pods are Ready. The stack only provides what a
// cluster provides: nodes (node agents) that run every Pod, the module's included, under its
// own ServiceAccount.
package module

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	"github.com/d8virt/devstack/controlplane"
	"github.com/d8virt/devstack/gomodule"
	"github.com/d8virt/devstack/prometheus"
)

// The release as the local stack installs it, into the namespace docs/chart.md suggests.
const (
	Namespace = "d8-virtualization"
	Release   = "virtualization"
)

// KubeVirtResource is the chart's InternalVirtualizationKubeVirt, as the cluster holds it.
var KubeVirtResource = schema.GroupVersionResource{
	Group: "internal.virtualization.deckhouse.io", Version: "v1", Resource: "internalvirtualizationkubevirts",
}

// Options say what to install where.
type Options struct {
	// Stack is the control plane; helm and kubectl act as its admin.
	Stack *controlplane.Stack
	// Repo is the repository root: the chart is charts/virtualization, the values
	// devstack/chart-values/local.yaml.
	Repo string
	// BinDir is the nodes' bin directory, where an image's program is (make build's bin/).
	BinDir string
	// Nodes are the local nodes that must run virt-handler before the module counts as ready.
	Nodes []string
	// Set are more helm --set values, e.g. "logLevel=debug".
	Set []string
	// Log gets the progress; nil discards it.
	Log io.Writer
}

// Chart is the chart's directory in a checkout.
func Chart(repo string) string { return filepath.Join(repo, "charts", "virtualization") }

// ValuesFile is the local stack's values: the images as the node agent resolves them, guests
// under TCG, one replica of everything.
func ValuesFile(repo string) string {
	return filepath.Join(repo, "devstack", "chart-values", "local.yaml")
}

func (o Options) logf(format string, args ...any) {
	if o.Log != nil {
		fmt.Fprintf(o.Log, "[module %s] %s\n", time.Now().Format("15:04:05"), fmt.Sprintf(format, args...))
	}
}

// Install applies the chart's CRDs (helm installs them only once: docs/chart.md's upgrade step),
// creates the namespace, allowing privileged pods (virt-handler), and runs helm upgrade --install.
// It does not wait; WaitReady does.
func Install(ctx context.Context, o Options) error {
	if err := controlplane.LinkKubeRBACProxy(o.BinDir); err != nil {
		return err
	}
	kube, _, err := clients(o.Stack)
	if err != nil {
		return err
	}
	chart := Chart(o.Repo)
	if out, err := o.Tool(ctx, "kubectl", "apply", "--server-side", "--force-conflicts", "-f", filepath.Join(chart, "crds")); err != nil {
		return fmt.Errorf("apply the chart's CRDs: %w\n%s", err, out)
	}
	if err := ensureNamespace(ctx, kube); err != nil {
		return err
	}
	args := []string{"upgrade", "--install", Release, chart, "--namespace", Namespace,
		"--values", ValuesFile(o.Repo)}
	for _, s := range o.Set {
		args = append(args, "--set", s)
	}
	o.logf("helm %s", strings.Join(args, " "))
	out, err := o.Tool(ctx, "helm", args...)
	if err != nil {
		return fmt.Errorf("helm upgrade --install: %w\n%s", err, out)
	}
	return nil
}

// InstallMonitoringCRDs applies prometheus-operator's ServiceMonitor and PrometheusRule CRDs, as
// a platform with monitoring has them, so that the chart renders its ServiceMonitors.
func InstallMonitoringCRDs(ctx context.Context, o Options) error {
	dir, err := gomodule.Dir(ctx, prometheus.OperatorModule)
	if err != nil {
		return err
	}
	args := []string{"apply", "--server-side"}
	for _, f := range prometheus.OperatorCRDFiles(dir) {
		args = append(args, "-f", f)
	}
	if out, err := o.Tool(ctx, "kubectl", args...); err != nil {
		return fmt.Errorf("monitoring CRDs: %w\n%s", err, out)
	}
	// helm renders the ServiceMonitors only when discovery serves their kind. kubectl wait fails
	// at once on a CRD that has no status yet ("conditions accessor error"), so it is retried.
	var out string
	for try := 0; try < 20; try++ {
		if out, err = o.Tool(ctx, "kubectl", "wait", "--for=condition=Established", "--timeout=30s",
			"crd/servicemonitors.monitoring.coreos.com", "crd/prometheusrules.monitoring.coreos.com"); err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("monitoring CRDs: %w", ctx.Err())
		case <-time.After(500 * time.Millisecond):
		}
	}
	return fmt.Errorf("monitoring CRDs: %w\n%s", err, out)
}

// Uninstall is helm uninstall: the KubeVirt resource, the components and the VMs stay
// (docs/chart.md).
func Uninstall(ctx context.Context, o Options) error {
	out, err := o.Tool(ctx, "helm", "uninstall", Release, "--namespace", Namespace, "--wait")
	if err != nil {
		return fmt.Errorf("helm uninstall: %w\n%s", err, out)
	}
	return nil
}

// Tool runs kubectl or helm from the machine-wide cache as the stack's admin.
func (o Options) Tool(ctx context.Context, name string, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, filepath.Join(controlplane.BinDir(), name), append([]string{"--kubeconfig", o.Stack.KubeconfigPath()}, args...)...)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

func clients(s *controlplane.Stack) (kubernetes.Interface, dynamic.Interface, error) {
	cfg, err := s.RESTConfig()
	if err != nil {
		return nil, nil, err
	}
	cfg.Timeout = 15 * time.Second
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, nil, err
	}
	dyn, err := dynamic.NewForConfig(cfg)
	return kube, dyn, err
}

func ensureNamespace(ctx context.Context, kube kubernetes.Interface) error {
	const label, level = "pod-security.kubernetes.io/enforce", "privileged"
	ns, err := kube.CoreV1().Namespaces().Get(ctx, Namespace, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		_, err = kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{
			Name: Namespace, Labels: map[string]string{label: level},
		}}, metav1.CreateOptions{})
		return err
	}
	if err != nil || ns.Labels[label] == level {
		return err
	}
	if ns.Labels == nil {
		ns.Labels = map[string]string{}
	}
	ns.Labels[label] = level
	_, err = kube.CoreV1().Namespaces().Update(ctx, ns, metav1.UpdateOptions{})
	return err
}

// KubeconfigPath is a kubeconfig for people: kubectl speaks kubevirt.io through the users'
// rewriter (UsersRewriter); make console uses it.
func KubeconfigPath(s *controlplane.Stack) string {
	return filepath.Join(s.Config().StateDir, "kubevirt.kubeconfig")
}

// UsersRewriter is a kube-api-rewriter for people on this machine, with the admin's credentials:
// kubeconfig (KubeconfigPath) lets kubectl speak kubevirt.io. It
// listens on 127.0.0.1:port (api) and port+1 (health).
func UsersRewriter(s *controlplane.Stack, binDir, kubeconfig string, port int) (controlplane.Component, error) {
	abs, err := filepath.Abs(binDir)
	if err != nil {
		return controlplane.Component{}, err
	}
	api, health := "127.0.0.1:"+strconv.Itoa(port), "127.0.0.1:"+strconv.Itoa(port+1)
	return controlplane.Component{
		Name: "rewriter-users",
		// The stack recognises its processes by the absolute path of their executable.
		Bin: filepath.Join(abs, "kube-api-rewriter"),
		Args: []string{
			"--kubeconfig", s.KubeconfigPath(),
			"--api-listen", api, "--health-listen", health, "--metrics-listen", "", "--log-format", "text",
		},
		Before: func(context.Context) error { return controlplane.WriteRewriterKubeconfig(kubeconfig, "http://"+api) },
		Ready:  controlplane.HTTPReady("http://" + health + "/readyz"),
	}, nil
}

// Components are the Deployments and the DaemonSet (the last) of the module, in the order they
// come up.
var Components = []string{"virt-operator", "dvcr", "virtualization-controller", "virtualization-api", "virt-api", "virt-controller", "virt-handler"}

// State is how far the module got.
type State struct {
	// Phase and Available are the KubeVirt resource's status.phase and Available condition.
	Phase     string
	Available bool
	// Ready and Want count each component's Ready and wanted pods (Components' names).
	Ready, Want map[string]int
	// Rolling are the components whose Deployment or DaemonSet has not rolled out its current
	// pod template yet.
	Rolling map[string]bool
	// Problems are the waiting or failed containers, e.g. "virt-api-x/virt-api: CrashLoopBackOff".
	Problems []string
}

// Done reports whether the module is ready: the KubeVirt Available and every component with all
// its pods Ready.
func (st State) Done() bool {
	if !st.Available {
		return false
	}
	for _, c := range Components {
		if st.Want[c] == 0 || st.Ready[c] < st.Want[c] || st.Rolling[c] {
			return false
		}
	}
	return true
}

func (st State) String() string {
	phase := st.Phase
	if phase == "" {
		phase = "none yet"
	}
	parts := []string{"KubeVirt " + phase}
	if st.Available {
		parts[0] += ", Available"
	}
	for _, c := range Components {
		p := fmt.Sprintf("%s %d/%d", c, st.Ready[c], st.Want[c])
		if st.Rolling[c] {
			p += " (rolling out)"
		}
		parts = append(parts, p)
	}
	s := strings.Join(parts, "; ")
	if len(st.Problems) > 0 {
		s += " (" + strings.Join(st.Problems, ", ") + ")"
	}
	return s
}

// Observe reads the module's state from the cluster.
func Observe(ctx context.Context, s *controlplane.Stack) (State, error) {
	kube, dyn, err := clients(s)
	if err != nil {
		return State{}, err
	}
	st := State{Ready: map[string]int{}, Want: map[string]int{}, Rolling: map[string]bool{}}
	kv, err := dyn.Resource(KubeVirtResource).Namespace(Namespace).Get(ctx, "kubevirt", metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
	case err != nil:
		return st, err
	default:
		st.Phase, _, _ = unstructured.NestedString(kv.Object, "status", "phase")
		conds, _, _ := unstructured.NestedSlice(kv.Object, "status", "conditions")
		for _, c := range conds {
			m, _ := c.(map[string]any)
			switch {
			case m["type"] == "Available" && m["status"] == "True":
				st.Available = true
			case m["type"] == "Degraded" && m["status"] == "True":
				// virt-operator's reason to wait, e.g. an object it may not create.
				msg := strings.Join(strings.Fields(fmt.Sprint(m["message"])), " ")
				if len(msg) > 400 {
					msg = msg[:400] + "..."
				}
				st.Problems = append(st.Problems, fmt.Sprintf("KubeVirt %v: %s", m["reason"], msg))
			}
		}
		// The conditions speak of the spec virt-operator last deployed.
		if observed, _, _ := unstructured.NestedInt64(kv.Object, "status", "observedGeneration"); observed < kv.GetGeneration() {
			st.Available = false
		}
	}
	for _, name := range Components[:len(Components)-1] {
		d, err := kube.AppsV1().Deployments(Namespace).Get(ctx, name, metav1.GetOptions{})
		if err == nil {
			want := ptrOr(d.Spec.Replicas, 1)
			st.Want[name] = int(want)
			st.Rolling[name] = d.Status.ObservedGeneration < d.Generation || d.Status.UpdatedReplicas < want || d.Status.Replicas > want
		} else if !apierrors.IsNotFound(err) {
			return st, err
		}
	}
	ds, err := kube.AppsV1().DaemonSets(Namespace).Get(ctx, "virt-handler", metav1.GetOptions{})
	if err == nil {
		st.Want["virt-handler"] = int(ds.Status.DesiredNumberScheduled)
		st.Rolling["virt-handler"] = ds.Status.ObservedGeneration < ds.Generation || ds.Status.UpdatedNumberScheduled < ds.Status.DesiredNumberScheduled
	} else if !apierrors.IsNotFound(err) {
		return st, err
	}
	pods, err := kube.CoreV1().Pods(Namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return st, err
	}
	for _, p := range pods.Items {
		c := component(&p)
		// Pods that ended (their processes went with a stopped node) are replaced, not waited for.
		if c == "" || p.DeletionTimestamp != nil || p.Status.Phase == corev1.PodFailed || p.Status.Phase == corev1.PodSucceeded {
			continue
		}
		if podReady(&p) {
			st.Ready[c]++
		}
		for _, cs := range append(append([]corev1.ContainerStatus{}, p.Status.InitContainerStatuses...), p.Status.ContainerStatuses...) {
			switch {
			case cs.State.Waiting != nil && cs.State.Waiting.Reason != "PodInitializing" && cs.State.Waiting.Reason != "ContainerCreating":
				st.Problems = append(st.Problems, fmt.Sprintf("%s/%s: %s %s", p.Name, cs.Name, cs.State.Waiting.Reason, cs.State.Waiting.Message))
			case cs.State.Terminated != nil && cs.State.Terminated.ExitCode != 0:
				st.Problems = append(st.Problems, fmt.Sprintf("%s/%s: exited %d", p.Name, cs.Name, cs.State.Terminated.ExitCode))
			}
		}
	}
	return st, nil
}

// component names the component a pod belongs to, by its owner's name (ReplicaSets are named
// after their Deployment).
func component(p *corev1.Pod) string {
	for _, ref := range p.OwnerReferences {
		for _, c := range Components {
			if ref.Name == c || (ref.Kind == "ReplicaSet" && strings.HasPrefix(ref.Name, c+"-")) {
				return c
			}
		}
	}
	return ""
}

func podReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

func ptrOr(p *int32, def int32) int32 {
	if p == nil {
		return def
	}
	return *p
}

// WaitReady waits until the module is ready (State.Done) and every node of o.Nodes is marked
// schedulable by its virt-handler, logging each change of state.
func WaitReady(ctx context.Context, o Options, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	start := time.Now()
	last := ""
	for {
		st, err := Observe(ctx, o.Stack)
		msg := st.String()
		if err != nil {
			msg = err.Error()
		} else if st.Done() {
			if err = nodesSchedulable(ctx, o.Stack, o.Nodes); err == nil {
				o.logf("ready after %s: %s", time.Since(start).Round(time.Second), msg)
				return nil
			}
			msg += "; " + err.Error()
		}
		if msg != last {
			o.logf("waiting: %s", msg)
			last = msg
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("the module is not ready after %s: %s", timeout, last)
		case <-time.After(time.Second):
		}
	}
}

// schedulableLabel is KubeVirt's kubevirt.io/schedulable as the cluster holds it (renamed).
const schedulableLabel = "kubevirt.internal.virtualization.deckhouse.io/schedulable"

func nodesSchedulable(ctx context.Context, s *controlplane.Stack, nodes []string) error {
	kube, _, err := clients(s)
	if err != nil {
		return err
	}
	var waiting []string
	for _, name := range nodes {
		n, err := kube.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return fmt.Errorf("node %s: %w", name, err)
		}
		if n.Labels[schedulableLabel] != "true" {
			waiting = append(waiting, name)
		}
	}
	if len(waiting) > 0 {
		return errors.New("virt-handler has not marked node(s) " + strings.Join(waiting, ", ") + " schedulable yet")
	}
	return nil
}
