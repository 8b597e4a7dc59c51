package vmi

import (
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	kubevirtv1 "kubevirt.io/api/core/v1"

	"github.com/d8virt/kubevirt-core/pkg/hotplug"
	"github.com/d8virt/kubevirt-core/pkg/launcherapi"
	"github.com/d8virt/kubevirt-core/pkg/launcherpod"
	"github.com/d8virt/logopts"
)

// Names KubeVirt v1.6 uses on the launcher Pod; tools (kubectl, virtctl, monitoring) rely on them.
// The ones other components share are launcherpod's.
const (
	// DefaultContainerAnnotation makes kubectl logs/exec pick the compute container.
	DefaultContainerAnnotation = "kubectl.kubernetes.io/default-container"
	// MigrationTransportUnixAnnotation tells virt-handler that migration traffic goes over unix
	// sockets proxied by the handlers, as in every current KubeVirt.
	MigrationTransportUnixAnnotation = "kubevirt.io/migrationTransportUnix"
	// lastAppliedAnnotation belongs to kubectl's view of the VMI, not of the Pod.
	lastAppliedAnnotation = "kubectl.kubernetes.io/last-applied-configuration"
)

// Overhead estimate of the launcher Pod over the guest's own memory, after KubeVirt's
// GetMemoryOverhead: the fixed part covers virt-launcher, its monitor, virtqemud, virtlogd and
// QEMU's own allocations; page tables take 1/512 of guest memory; every vCPU thread costs about
// 8Mi; the default VGA device another 16Mi. It is an estimate for the scheduler, not a limit the
// guest has to fit in.
var (
	overheadFixed    = resource.MustParse("220Mi")
	overheadPerVCPU  = resource.MustParse("8Mi")
	overheadGraphics = resource.MustParse("16Mi")
)

// Without a CPU request KubeVirt asks for 1/cpuAllocationRatio of a core per vCPU (the default
// ratio is 10), so an idle cluster can overcommit CPU while every guest still gets a share.
const cpuAllocationRatio = 10

// VCPUs is the number of virtual CPUs of the guest: sockets x cores x threads, each defaulting to 1.
func VCPUs(vmi *kubevirtv1.VirtualMachineInstance) int64 {
	cpu := vmi.Spec.Domain.CPU
	if cpu == nil {
		return 1
	}
	n := int64(1)
	for _, v := range []uint32{cpu.Sockets, cpu.Cores, cpu.Threads} {
		if v > 0 {
			n *= int64(v)
		}
	}
	return n
}

// GuestMemory is the memory the guest sees: the memory request, or memory.guest when the VMI
// only states that.
func GuestMemory(vmi *kubevirtv1.VirtualMachineInstance) resource.Quantity {
	if q, ok := vmi.Spec.Domain.Resources.Requests[corev1.ResourceMemory]; ok {
		return q.DeepCopy()
	}
	if m := vmi.Spec.Domain.Memory; m != nil && m.Guest != nil {
		return m.Guest.DeepCopy()
	}
	return resource.Quantity{}
}

// MemoryOverhead estimates what the launcher Pod needs beyond the guest memory; see overheadFixed.
func MemoryOverhead(vmi *kubevirtv1.VirtualMachineInstance) resource.Quantity {
	total := overheadFixed.DeepCopy()
	guest := GuestMemory(vmi)
	total.Add(*resource.NewQuantity(guest.Value()/512, resource.BinarySI))
	for range VCPUs(vmi) {
		total.Add(overheadPerVCPU)
	}
	if g := vmi.Spec.Domain.Devices.AutoattachGraphicsDevice; g == nil || *g {
		total.Add(overheadGraphics)
	}
	return total
}

// launcherResources are the compute container's requests and limits: the guest's plus the
// overhead, so that the scheduler places the Pod where the whole VM fits.
func launcherResources(vmi *kubevirtv1.VirtualMachineInstance) corev1.ResourceRequirements {
	overhead := MemoryOverhead(vmi)
	req := corev1.ResourceList{}
	for k, v := range vmi.Spec.Domain.Resources.Requests {
		req[k] = v.DeepCopy()
	}
	mem := GuestMemory(vmi)
	mem.Add(overhead)
	req[corev1.ResourceMemory] = mem
	if _, ok := req[corev1.ResourceCPU]; !ok {
		req[corev1.ResourceCPU] = *resource.NewMilliQuantity(VCPUs(vmi)*1000/cpuAllocationRatio, resource.DecimalSI)
	}
	out := corev1.ResourceRequirements{Requests: req}
	if len(vmi.Spec.Domain.Resources.Limits) > 0 {
		out.Limits = corev1.ResourceList{}
		for k, v := range vmi.Spec.Domain.Resources.Limits {
			out.Limits[k] = v.DeepCopy()
		}
		if lim, ok := out.Limits[corev1.ResourceMemory]; ok {
			// A memory limit of exactly the guest size would OOM-kill QEMU at once.
			lim.Add(overhead)
			out.Limits[corev1.ResourceMemory] = lim
		}
	}
	return out
}

// Hostname is the Pod's hostname, which is the guest's: spec.hostname, else the VMI name with
// dots replaced (a hostname is a single DNS label) and cut to 63 characters.
func Hostname(vmi *kubevirtv1.VirtualMachineInstance) string {
	h := vmi.Spec.Hostname
	if h == "" {
		h = strings.ReplaceAll(vmi.Name, ".", "-")
	}
	if len(h) > 63 {
		h = strings.TrimRight(h[:63], "-")
	}
	return h
}

func launcherLabels(vmi *kubevirtv1.VirtualMachineInstance) map[string]string {
	labels := map[string]string{}
	for k, v := range vmi.Labels {
		labels[k] = v
	}
	// The VMI's own created-by (its VM's UID) and node label do not describe the Pod.
	delete(labels, kubevirtv1.NodeNameLabel)
	labels[kubevirtv1.AppLabel] = launcherpod.AppLabelValue
	labels[kubevirtv1.CreatedByLabel] = string(vmi.UID)
	// KubeVirt labels the Pod with the guest hostname, which is the VMI name unless spec.hostname
	// says otherwise; Services select VMs by it.
	labels[kubevirtv1.VirtualMachineNameLabel] = Hostname(vmi)
	if len(validation.IsValidLabelValue(vmi.Name)) == 0 {
		// A name longer than a label value may be (63 characters) gets no ID label.
		labels[launcherpod.IDLabel] = vmi.Name
	}
	return labels
}

func launcherAnnotations(vmi *kubevirtv1.VirtualMachineInstance) map[string]string {
	ann := map[string]string{}
	for k, v := range vmi.Annotations {
		// kubevirt.io annotations steer the VMI's controllers (generation, presets, ...) and would
		// mean something else on the Pod; kubectl's last-applied is the VMI's, not the Pod's.
		if k == lastAppliedAnnotation || k == kubevirtv1.AppLabel || strings.HasPrefix(k, kubevirtv1.AppLabel+"/") {
			continue
		}
		ann[k] = v
	}
	ann[kubevirtv1.DomainAnnotation] = vmi.Name
	ann[DefaultContainerAnnotation] = launcherpod.ComputeContainer
	ann[MigrationTransportUnixAnnotation] = "true"
	return ann
}

// LauncherConfig is how virt-controller is configured to shape launcher Pods.
type LauncherConfig struct {
	// Image is the image of the compute container.
	Image string
	// Emulation makes every launcher run its guest under TCG, for nodes without working KVM
	// (KubeVirt's developerConfiguration.useEmulation).
	Emulation bool
	// Log is the launchers' log level and format: virt-controller's own.
	Log logopts.Options
}

// Volumes of the launcher Pod and where the compute container sees them. virt-handler finds the
// command socket and the console through the emptyDirs on the node (launcherapi.PodVolumeDir).
const (
	publicVolume       = "public"
	publicDir          = "/var/run/kubevirt"
	pvcMountDir        = "/var/run/kubevirt-private/vmi-disks"
	launcherSocketsVol = launcherapi.SocketsVolume
)

// LauncherCommand is how the compute container starts virt-launcher for this VMI. The launcher's
// own grace period is the guest's plus one padding; the Pod's is one padding longer.
func LauncherCommand(vmi *kubevirtv1.VirtualMachineInstance, cfg LauncherConfig) []string {
	cmd := []string{
		"virt-launcher",
		"--name", vmi.Name,
		"--namespace", vmi.Namespace,
		"--uid", string(vmi.UID),
		"--grace-period-seconds", strconv.FormatInt(launcherpod.GracePeriodSeconds(vmi)+launcherpod.GracePadding, 10),
		"--qemu-capabilities-dir", launcherapi.QEMUCapsDir,
	}
	if cfg.Emulation {
		cmd = append(cmd, "--emulation")
	}
	return append(cmd, cfg.Log.Args()...)
}

// launcherVolumes are the Pod's volumes and the compute container's mounts: the launcher's state
// and sockets as emptyDirs, the containerDisks' sockets, and one mount per PVC under
// the directory the launcher looks for <volume>/disk.img in.
func launcherVolumes(vmi *kubevirtv1.VirtualMachineInstance) ([]corev1.Volume, []corev1.VolumeMount) {
	empty := func(name string) corev1.Volume {
		return corev1.Volume{Name: name, VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}
	}
	vols := []corev1.Volume{empty(launcherapi.PrivateVolume), empty(publicVolume), empty(launcherSocketsVol), launcherapi.QEMUCapsHostVolume()}
	mounts := []corev1.VolumeMount{
		{Name: launcherapi.PrivateVolume, MountPath: launcherapi.PrivateDir},
		{Name: publicVolume, MountPath: publicDir},
		{Name: launcherSocketsVol, MountPath: launcherapi.SocketsDir},
		// The node labeller's QEMU capabilities, which the launcher's libvirtd starts from.
		{Name: launcherapi.QEMUCapsVolume, MountPath: launcherapi.QEMUCapsDir, ReadOnly: true},
	}
	cdVols, cdMounts := containerDiskVolumes(vmi)
	vols, mounts = append(vols, cdVols...), append(mounts, cdMounts...)
	// virt-handler mounts hotplugged volumes into this emptyDir on the node while the Pod runs;
	// only HostToContainer propagation lets the compute container see them.
	hostToContainer := corev1.MountPropagationHostToContainer
	vols = append(vols, empty(hotplug.DisksVolume))
	mounts = append(mounts, corev1.VolumeMount{Name: hotplug.DisksVolume, MountPath: hotplug.DisksDir, MountPropagation: &hostToContainer})
	for _, v := range vmi.Spec.Volumes {
		// Hotpluggable claims come through an attachment Pod (hotplug.go), never the launcher's.
		claim, ok := launcherapi.ClaimName(&v)
		if !ok || hotplug.Pluggable(&v) {
			continue
		}
		// An ephemeral volume's claim is only read: the guest writes into an overlay.
		readOnly := v.Ephemeral != nil || v.PersistentVolumeClaim.ReadOnly
		vols = append(vols, corev1.Volume{Name: v.Name, VolumeSource: corev1.VolumeSource{
			PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: claim, ReadOnly: readOnly},
		}})
		// A block claim reaches the container as a device (launcherVolumeDevices), not a mount.
		if !launcherapi.BlockVolume(vmi, v.Name) {
			mounts = append(mounts, corev1.VolumeMount{Name: v.Name, MountPath: pvcMountDir + "/" + v.Name})
		}
	}
	hostVols, hostMounts := hostDiskVolumes(vmi)
	vols, mounts = append(vols, hostVols...), append(mounts, hostMounts...)
	cfgVols, cfgMounts := configVolumes(vmi)
	return append(vols, cfgVols...), append(mounts, cfgMounts...)
}

// NewLauncherPod builds the virt-launcher Pod of a VMI as KubeVirt v1.6 shapes it (naming, labels,
// annotations, readiness gate, compute container, scheduling constraints, grace period, the
// launcher's volumes).
func NewLauncherPod(vmi *kubevirtv1.VirtualMachineInstance, cfg LauncherConfig) *corev1.Pod {
	// The Pod must share nothing with the caller's VMI (tolerations, affinity, ...).
	vmi = vmi.DeepCopy()
	vols, mounts := launcherVolumes(vmi)
	initContainers, diskContainers := containerDiskContainers(vmi, cfg)
	grace := launcherpod.GracePeriodSeconds(vmi) + 2*launcherpod.GracePadding
	no := false
	// The launcher itself never talks to the apiserver: only a serviceAccount volume, whose token
	// the guest gets on a disk, makes the Pod mount one.
	account := launcherServiceAccount(vmi)
	automount := account != ""
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			GenerateName:    "virt-launcher-" + vmi.Name + "-",
			Namespace:       vmi.Namespace,
			Labels:          launcherLabels(vmi),
			Annotations:     launcherAnnotations(vmi),
			OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(vmi, kubevirtv1.VirtualMachineInstanceGroupVersionKind)},
		},
		Spec: corev1.PodSpec{
			InitContainers: initContainers,
			Containers: append([]corev1.Container{{
				Name:            launcherpod.ComputeContainer,
				Image:           cfg.Image,
				ImagePullPolicy: corev1.PullIfNotPresent,
				Command:         LauncherCommand(vmi, cfg),
				Resources:       launcherResources(vmi),
				VolumeMounts:    mounts,
				VolumeDevices:   launcherVolumeDevices(vmi),
				Env: []corev1.EnvVar{{
					Name:      "POD_NAME",
					ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.name"}},
				}},
			}}, diskContainers...),
			ImagePullSecrets: imagePullSecrets(vmi),
			// virt-handler flips this gate when the guest is paused, so a paused VM's Pod is not
			// Ready and drops out of its Services.
			Volumes:                       vols,
			ReadinessGates:                []corev1.PodReadinessGate{{ConditionType: kubevirtv1.VirtualMachineUnpaused}},
			RestartPolicy:                 corev1.RestartPolicyNever,
			TerminationGracePeriodSeconds: &grace,
			NodeSelector:                  launcherNodeSelector(vmi),
			Tolerations:                   vmi.Spec.Tolerations,
			TopologySpreadConstraints:     vmi.Spec.TopologySpreadConstraints,
			SchedulerName:                 vmi.Spec.SchedulerName,
			PriorityClassName:             vmi.Spec.PriorityClassName,
			Hostname:                      Hostname(vmi),
			Subdomain:                     vmi.Spec.Subdomain,
			DNSConfig:                     vmi.Spec.DNSConfig,
			DNSPolicy:                     vmi.Spec.DNSPolicy,
			// Nothing in the launcher reads Service environment variables.
			EnableServiceLinks:           &no,
			ServiceAccountName:           account,
			AutomountServiceAccountToken: &automount,
			Affinity:                     vmi.Spec.Affinity,
		},
	}
	return pod
}
