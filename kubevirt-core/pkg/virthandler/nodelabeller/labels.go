package nodelabeller

import (
	"strconv"
	"strings"

	kubevirtv1 "kubevirt.io/api/core/v1"

	"github.com/d8virt/kubevirt-core/pkg/nodecaps"
)

// DefaultObsoleteCPUModels are the models KubeVirt never labels (nor offers for host-model
// migration): too old or too generic to be worth scheduling on.
var DefaultObsoleteCPUModels = obsoleteModels("486", "pentium", "pentium2", "pentium3", "pentiumpro",
	"coreduo", "n270", "core2duo", "Conroe", "athlon", "phenom", "qemu64", "qemu32", "kvm64", "kvm32")

// obsoleteModels lists each model with its versioned alias (qemu names both "486" and "486-v1").
func obsoleteModels(names ...string) map[string]bool {
	out := make(map[string]bool, 2*len(names))
	for _, n := range names {
		out[n] = true
		out[n+"-v1"] = true
	}
	return out
}

// ownedPrefixes are the label key prefixes the labeller alone writes: anything under them it
// did not compute is stale and goes.
var ownedPrefixes = []string{
	kubevirtv1.CPUFeatureLabel,
	kubevirtv1.CPUModelLabel,
	kubevirtv1.SupportedHostModelMigrationCPU,
	kubevirtv1.CPUTimerLabel,
	kubevirtv1.HypervLabel,
	kubevirtv1.CPUModelVendorLabel,
	kubevirtv1.SupportedMachineTypeLabel,
	kubevirtv1.HostModelCPULabel,
	kubevirtv1.HostModelRequiredFeaturesLabel,
}

// ownedKeys are the single label keys it writes.
var ownedKeys = []string{
	kubevirtv1.NodeHostModelIsObsoleteLabel,
	kubevirtv1.RealtimeLabel,
	kubevirtv1.SEVLabel,
	kubevirtv1.SEVESLabel,
}

// Owned tells whether the labeller manages the label key.
func Owned(key string) bool {
	for _, p := range ownedPrefixes {
		if strings.HasPrefix(key, p) {
			return true
		}
	}
	for _, k := range ownedKeys {
		if key == k {
			return true
		}
	}
	return false
}

// Labels are the node's labels for c, with KubeVirt's keys and values. obsolete names the
// models that get no label (nil means DefaultObsoleteCPUModels); realtime is whether the kernel
// lets realtime tasks run unthrottled.
func Labels(c *nodecaps.Capabilities, obsolete map[string]bool, realtime bool) map[string]string {
	if obsolete == nil {
		obsolete = DefaultObsoleteCPUModels
	}
	out := map[string]string{}
	for _, f := range c.Features {
		out[kubevirtv1.CPUFeatureLabel+f] = "true"
	}
	for _, m := range c.UsableModels {
		if obsolete[m] {
			continue
		}
		out[kubevirtv1.CPUModelLabel+m] = "true"
		out[kubevirtv1.SupportedHostModelMigrationCPU+m] = "true"
	}
	for _, m := range c.Machines {
		out[kubevirtv1.SupportedMachineTypeLabel+m] = "true"
	}
	if c.TSC != nil {
		out[kubevirtv1.CPUTimerLabel+"tsc-frequency"] = strconv.FormatUint(uint64(c.TSC.Frequency), 10)
		out[kubevirtv1.CPUTimerLabel+"tsc-scalable"] = strconv.FormatBool(c.TSC.Scaling == "yes")
	}
	if c.HostModel != "" {
		if obsolete[c.HostModel] {
			out[kubevirtv1.NodeHostModelIsObsoleteLabel] = "true"
		} else {
			out[kubevirtv1.SupportedHostModelMigrationCPU+c.HostModel] = "true"
		}
		for _, f := range c.RequiredFeatures {
			out[kubevirtv1.HostModelRequiredFeaturesLabel+f] = "true"
		}
		out[kubevirtv1.CPUModelVendorLabel+c.Vendor] = "true"
		out[kubevirtv1.HostModelCPULabel+c.HostModel] = "true"
	}
	if realtime {
		out[kubevirtv1.RealtimeLabel] = ""
	}
	if c.SEV {
		out[kubevirtv1.SEVLabel] = ""
	}
	if c.SEVES {
		out[kubevirtv1.SEVESLabel] = ""
	}
	return out
}

// Changes are what turns current into want for the labeller's keys: the labels to set, and the
// stale ones to remove (nil values), as a merge patch of metadata.labels carries them. Labels of
// others are never in it.
func Changes(current, want map[string]string) map[string]*string {
	out := map[string]*string{}
	for k, v := range want {
		if cur, ok := current[k]; !ok || cur != v {
			out[k] = &v
		}
	}
	for k := range current {
		if _, ok := want[k]; !ok && Owned(k) {
			out[k] = nil
		}
	}
	return out
}
