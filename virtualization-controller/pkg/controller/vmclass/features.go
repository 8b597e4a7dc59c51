package vmclass

import (
	"fmt"
	"slices"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	kubevirtv1 "kubevirt.io/api/core/v1"

	v1alpha2 "github.com/d8virt/api/core/v1alpha2"
	v1alpha3 "github.com/d8virt/api/core/v1alpha3"
)

// NodeFeatures are the processor features the core's node labeller found on a node (its labels
// cpu-feature.node.kubevirt.io/<feature>=true, as the controller reads them through its
// rewriter), sorted.
func NodeFeatures(n *corev1.Node) []string {
	var out []string
	for k, v := range n.Labels {
		if f, ok := strings.CutPrefix(k, kubevirtv1.CPUFeatureLabel); ok && f != "" && v == "true" {
			out = append(out, f)
		}
	}
	sort.Strings(out)
	return out
}

// CommonFeatures are the features every node has, sorted; none for no node.
func CommonFeatures(nodes []corev1.Node) []string {
	if len(nodes) == 0 {
		return nil
	}
	common := NodeFeatures(&nodes[0])
	for i := 1; i < len(nodes); i++ {
		has := NodeFeatures(&nodes[i])
		common = slices.DeleteFunc(common, func(f string) bool { _, found := slices.BinarySearch(has, f); return !found })
	}
	return common
}

// Discovery is what a class's processor feature discovery found.
type Discovery struct {
	// Features are the class's processor features (status.cpuFeatures).
	Features v1alpha2.CPUFeatures
	// Nodes are the nodes a Discovery class took its features from, sorted.
	Nodes []string
	// Problem says why a Discovery class has no features; "" when it has them.
	Problem string
}

// Discover computes a class's processor features on its available nodes. A Discovery class's
// enabled features are those common to the available nodes its spec.cpu.discovery.nodeSelector
// selects (all of them when it is empty); a Features or Model class's are its spec.cpu.features.
// notEnabledCommon are the features every available node has that are not enabled. Host and
// HostPassthrough classes see the node's processor, so they list none.
func Discover(class *v1alpha3.VirtualMachineClass, available []corev1.Node) Discovery {
	var d Discovery
	cpu := class.Spec.CPU
	switch cpu.Type {
	case v1alpha2.CPUTypeHost, v1alpha2.CPUTypeHostPassthrough:
		return d
	case v1alpha2.CPUTypeDiscovery:
		selected, err := discoveryNodes(cpu.Discovery, available)
		if err != nil {
			d.Problem = err.Error()
			return d
		}
		for i := range selected {
			d.Nodes = append(d.Nodes, selected[i].Name)
		}
		sort.Strings(d.Nodes)
		d.Features.Enabled = CommonFeatures(selected)
		switch {
		case len(selected) == 0:
			d.Problem = "no available node of the class matches spec.cpu.discovery.nodeSelector"
		case len(d.Features.Enabled) == 0:
			d.Problem = fmt.Sprintf("the nodes %s have no processor feature labels in common (the node labeller of virt-handler writes them)", strings.Join(d.Nodes, ", "))
		}
	default:
		d.Features.Enabled = slices.Sorted(slices.Values(cpu.Features))
	}
	for _, f := range CommonFeatures(available) {
		if !slices.Contains(d.Features.Enabled, f) {
			d.Features.NotEnabledCommon = append(d.Features.NotEnabledCommon, f)
		}
	}
	return d
}

func discoveryNodes(discovery *v1alpha2.CPUDiscovery, available []corev1.Node) ([]corev1.Node, error) {
	if discovery == nil {
		return available, nil
	}
	sel, err := metav1.LabelSelectorAsSelector(&discovery.NodeSelector)
	if err != nil {
		return nil, fmt.Errorf("spec.cpu.discovery.nodeSelector: %w", err)
	}
	var out []corev1.Node
	for i := range available {
		if sel.Matches(labels.Set(available[i].Labels)) {
			out = append(out, available[i])
		}
	}
	return out, nil
}
