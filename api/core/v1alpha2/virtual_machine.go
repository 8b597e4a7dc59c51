package v1alpha2

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// VirtualMachine is a virtual machine: its class, processor, memory, disks and images, cloud-init provisioning, IP address, placement and run policy.
//
// +genclient
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName={vm,vms},categories={virtualization}
// +kubebuilder:printcolumn:name="Phase",type="string",JSONPath=".status.phase"
// +kubebuilder:printcolumn:name="Cores",type="integer",JSONPath=".spec.cpu.cores"
// +kubebuilder:printcolumn:name="CoreFraction",type="string",JSONPath=".spec.cpu.coreFraction"
// +kubebuilder:printcolumn:name="Memory",type="string",JSONPath=".spec.memory.size"
// +kubebuilder:printcolumn:name="Need restart",type="string",JSONPath=".status.conditions[?(@.type=='AwaitingRestartToApplyConfiguration')].status"
// +kubebuilder:printcolumn:name="Agent",type="string",JSONPath=".status.conditions[?(@.type=='AgentReady')].status"
// +kubebuilder:printcolumn:name="Migratable",type="string",JSONPath=".status.conditions[?(@.type=='Migratable')].status",priority=1
// +kubebuilder:printcolumn:name="Node",type="string",JSONPath=".status.nodeName"
// +kubebuilder:printcolumn:name="IPAddress",type="string",JSONPath=".status.ipAddress"
// +kubebuilder:printcolumn:name="Age",type="date",JSONPath=".metadata.creationTimestamp"
type VirtualMachine struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec VirtualMachineSpec `json:"spec"`
	// +optional
	Status VirtualMachineStatus `json:"status,omitempty"`
}

// VirtualMachineList is a list of VirtualMachines.
//
// +kubebuilder:object:root=true
type VirtualMachineList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	// Items are the VirtualMachines.
	Items []VirtualMachine `json:"items"`
}

// RunPolicy says when the machine runs.
// +kubebuilder:validation:Enum=AlwaysOn;AlwaysOff;Manual;AlwaysOnUnlessStoppedManually
type RunPolicy string

// The run policies.
const (
	// AlwaysOnPolicy: the machine always runs; it is started again when it stops, from inside the guest too.
	AlwaysOnPolicy RunPolicy = "AlwaysOn"
	// AlwaysOffPolicy: the machine never runs.
	AlwaysOffPolicy RunPolicy = "AlwaysOff"
	// ManualPolicy: the user starts and stops the machine with VirtualMachineOperations.
	ManualPolicy RunPolicy = "Manual"
	// AlwaysOnUnlessStoppedManuallyPolicy: the machine runs after creation and after failures, but stays stopped once it was stopped by an operation or from inside the guest.
	AlwaysOnUnlessStoppedManuallyPolicy RunPolicy = "AlwaysOnUnlessStoppedManually"
)

// VirtualMachineSpec is the desired machine.
type VirtualMachineSpec struct {
	// RunPolicy says when the machine runs: AlwaysOn, AlwaysOff, Manual or AlwaysOnUnlessStoppedManually (the default).
	// +kubebuilder:default=AlwaysOnUnlessStoppedManually
	// +optional
	RunPolicy RunPolicy `json:"runPolicy,omitempty"`
	// VirtualMachineClassName is the VirtualMachineClass whose CPU model, placement and sizing policies the machine follows; the default class (the one annotated virtualmachineclass.virtualization.deckhouse.io/is-default-class=true) when empty.
	// +kubebuilder:validation:MaxLength=253
	// +optional
	VirtualMachineClassName string `json:"virtualMachineClassName,omitempty"`
	// CPU is the machine's processor.
	CPU CPUSpec `json:"cpu"`
	// Memory is the machine's memory.
	Memory MemorySpec `json:"memory"`
	// BlockDeviceRefs are the disks and images of the machine, 1 to 16, in their boot order unless bootOrder says otherwise.
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=16
	// +listType=atomic
	BlockDeviceRefs []BlockDeviceSpecRef `json:"blockDeviceRefs"`
	// Provisioning is the cloud-init configuration of the guest.
	// +optional
	Provisioning *Provisioning `json:"provisioning,omitempty"`
	// VirtualMachineIPAddressName is the VirtualMachineIPAddress of the machine's namespace whose address the machine gets; one is created for the machine when empty.
	// +kubebuilder:validation:MaxLength=253
	// +optional
	VirtualMachineIPAddressName string `json:"virtualMachineIPAddressName,omitempty"`
	// OSType tunes the virtual hardware for the guest: Generic (the default) or Windows.
	// +kubebuilder:validation:Enum=Generic;Windows
	// +kubebuilder:default=Generic
	// +optional
	OSType OSType `json:"osType,omitempty"`
	// Bootloader is the firmware: BIOS (the default), EFI, or EFIWithSecureBoot, where the node has the firmware.
	// +kubebuilder:validation:Enum=BIOS;EFI;EFIWithSecureBoot
	// +kubebuilder:default=BIOS
	// +optional
	Bootloader BootloaderType `json:"bootloader,omitempty"`
	// EnableParavirtualization gives the guest virtio devices (disks, network) instead of emulated ones; true by default.
	// +kubebuilder:default=true
	// +optional
	EnableParavirtualization *bool `json:"enableParavirtualization,omitempty"`
	// NodeSelector limits the nodes the machine runs on to those with these labels (merged with the class's).
	// +optional
	NodeSelector map[string]string `json:"nodeSelector,omitempty"`
	// Tolerations let the machine run on nodes with matching taints (merged with the class's).
	// +optional
	// +listType=atomic
	Tolerations []corev1.Toleration `json:"tolerations,omitempty"`
	// Affinity places the machine relative to nodes and to other machines and pods.
	// +optional
	Affinity *VMAffinity `json:"affinity,omitempty"`
	// TopologySpreadConstraints spread machines over topology domains, as for pods.
	// +optional
	// +listType=atomic
	TopologySpreadConstraints []corev1.TopologySpreadConstraint `json:"topologySpreadConstraints,omitempty"`
	// PriorityClassName is the PriorityClass of the machine's Pod.
	// +kubebuilder:validation:MaxLength=253
	// +optional
	PriorityClassName string `json:"priorityClassName,omitempty"`
	// TerminationGracePeriodSeconds is how long a stopping guest may take to shut down (ACPI) before it is killed; 60 by default.
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:default=60
	// +optional
	TerminationGracePeriodSeconds *int64 `json:"terminationGracePeriodSeconds,omitempty"`
	// Disruptions says how changes that need a restart are applied.
	// +optional
	Disruptions *Disruptions `json:"disruptions,omitempty"`
	// LiveMigrationPolicy says when and how the machine is live migrated: Manual, Never, AlwaysSafe, PreferSafe (the default), AlwaysForced or PreferForced.
	// +kubebuilder:validation:Enum=Manual;Never;AlwaysSafe;PreferSafe;AlwaysForced;PreferForced
	// +kubebuilder:default=PreferSafe
	// +optional
	LiveMigrationPolicy LiveMigrationPolicy `json:"liveMigrationPolicy,omitempty"`
}

// CPUSpec is a machine's processor.
type CPUSpec struct {
	// Cores is the number of virtual CPU cores.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=1024
	Cores int `json:"cores"`
	// CoreFraction is the share of each core guaranteed to the machine (its CPU request against the limit of one core each), "5%" to "100%"; the class's default, or 100%, when empty.
	// +kubebuilder:validation:Pattern=`^([1-9]|[1-9][0-9]|100)%$`
	// +kubebuilder:validation:MaxLength=4
	// +optional
	CoreFraction string `json:"coreFraction,omitempty"`
}

// MemorySpec is a machine's memory.
type MemorySpec struct {
	// Size of the memory, for example 2Gi.
	Size resource.Quantity `json:"size"`
}

// BlockDeviceKind is the kind of a machine's block device.
// +kubebuilder:validation:Enum=VirtualDisk;VirtualImage;ClusterVirtualImage
type BlockDeviceKind string

// BlockDeviceSpecRef is one disk or image of a machine.
type BlockDeviceSpecRef struct {
	// Kind of the device: VirtualDisk, VirtualImage (both of the machine's namespace) or ClusterVirtualImage. An ISO image becomes a CD-ROM.
	Kind BlockDeviceKind `json:"kind"`
	// Name of the disk or image.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name"`
	// BootOrder is the device's place in the boot order, 1 first; the list order when unset.
	// +kubebuilder:validation:Minimum=1
	// +optional
	BootOrder *int `json:"bootOrder,omitempty"`
}

// ProvisioningType names where a machine's cloud-init configuration comes from.
// +kubebuilder:validation:Enum=UserData;UserDataRef
type ProvisioningType string

// The provisioning types.
const (
	// ProvisioningTypeUserData: inline user data (field `userData`).
	ProvisioningTypeUserData ProvisioningType = "UserData"
	// ProvisioningTypeUserDataRef: a Secret of type provisioning.virtualization.deckhouse.io/cloud-init (field `userDataRef`).
	ProvisioningTypeUserDataRef ProvisioningType = "UserDataRef"
)

// SecretTypeCloudInit is the type of a Secret that a UserDataRef names; its key `userData` holds the cloud-init user data.
const SecretTypeCloudInit corev1.SecretType = "provisioning.virtualization.deckhouse.io/cloud-init"

// Provisioning is a machine's cloud-init configuration: `type` and the one field of that type.
//
// +kubebuilder:validation:XValidation:rule="has(self.userData) == (self.type == 'UserData')",message="spec.provisioning.userData must be set when, and only when, spec.provisioning.type is UserData",fieldPath=".userData"
// +kubebuilder:validation:XValidation:rule="has(self.userDataRef) == (self.type == 'UserDataRef')",message="spec.provisioning.userDataRef must be set when, and only when, spec.provisioning.type is UserDataRef",fieldPath=".userDataRef"
type Provisioning struct {
	// Type of the configuration: UserData or UserDataRef.
	Type ProvisioningType `json:"type"`
	// UserData is the cloud-init user data, for type UserData.
	// +kubebuilder:validation:MaxLength=2048000
	// +optional
	UserData string `json:"userData,omitempty"`
	// UserDataRef names the Secret with the user data, for type UserDataRef.
	// +optional
	UserDataRef *UserDataRef `json:"userDataRef,omitempty"`
}

// UserDataRef names a Secret of the machine's namespace of type provisioning.virtualization.deckhouse.io/cloud-init.
type UserDataRef struct {
	// Kind of the object: Secret.
	// +kubebuilder:validation:Enum=Secret
	// +kubebuilder:default=Secret
	// +optional
	Kind string `json:"kind,omitempty"`
	// Name of the Secret.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name"`
}

// OSType is the kind of guest operating system.
type OSType string

// The guest operating system types.
const (
	GenericOs OSType = "Generic"
	Windows   OSType = "Windows"
)

// BootloaderType is a machine's firmware.
type BootloaderType string

// The firmwares.
const (
	BIOS              BootloaderType = "BIOS"
	EFI               BootloaderType = "EFI"
	EFIWithSecureBoot BootloaderType = "EFIWithSecureBoot"
)

// LiveMigrationPolicy says when and how a machine is live migrated.
type LiveMigrationPolicy string

// The live migration policies.
const (
	// ManualMigrationPolicy: only migrations asked for with a VirtualMachineOperation, without forcing.
	ManualMigrationPolicy LiveMigrationPolicy = "Manual"
	// NeverMigrationPolicy: the machine is never migrated.
	NeverMigrationPolicy LiveMigrationPolicy = "Never"
	// AlwaysSafeMigrationPolicy: migrate when needed (an evicted node, a changed configuration), never forcing.
	AlwaysSafeMigrationPolicy LiveMigrationPolicy = "AlwaysSafe"
	// PreferSafeMigrationPolicy: migrate when needed without forcing, unless an operation asks to force.
	PreferSafeMigrationPolicy LiveMigrationPolicy = "PreferSafe"
	// AlwaysForcedMigrationPolicy: migrate when needed, slowing the guest down (auto-converge) so the migration ends.
	AlwaysForcedMigrationPolicy LiveMigrationPolicy = "AlwaysForced"
	// PreferForcedMigrationPolicy: migrate when needed, forcing unless an operation asks not to.
	PreferForcedMigrationPolicy LiveMigrationPolicy = "PreferForced"
)

// VMAffinity places a machine relative to nodes, other machines and pods.
type VMAffinity struct {
	// NodeAffinity selects the nodes the machine may or prefers to run on, as for pods.
	// +optional
	NodeAffinity *corev1.NodeAffinity `json:"nodeAffinity,omitempty"`
	// VirtualMachineAndPodAffinity puts the machine in the topology domains of matching machines and pods.
	// +optional
	VirtualMachineAndPodAffinity *corev1.PodAffinity `json:"virtualMachineAndPodAffinity,omitempty"`
	// VirtualMachineAndPodAntiAffinity keeps the machine out of the topology domains of matching machines and pods.
	// +optional
	VirtualMachineAndPodAntiAffinity *corev1.PodAntiAffinity `json:"virtualMachineAndPodAntiAffinity,omitempty"`
}

// RestartApprovalMode says who restarts a machine whose changes need a restart.
// +kubebuilder:validation:Enum=Manual;Automatic
type RestartApprovalMode string

// The restart approval modes.
const (
	// Manual: the changes wait in status.restartAwaitingChanges until the user restarts the machine.
	Manual RestartApprovalMode = "Manual"
	// Automatic: the controller restarts the machine itself.
	Automatic RestartApprovalMode = "Automatic"
)

// Disruptions says how a machine's changes that need a restart are applied.
type Disruptions struct {
	// RestartApprovalMode is Manual (the default: the user restarts) or Automatic (the controller restarts the machine).
	// +kubebuilder:default=Manual
	// +optional
	RestartApprovalMode RestartApprovalMode `json:"restartApprovalMode,omitempty"`
}

// MachinePhase is the lifecycle phase of a VirtualMachine.
// +kubebuilder:validation:Enum=Pending;Starting;Running;Stopping;Stopped;Migrating;Pause;Terminating
type MachinePhase string

// The machine phases.
const (
	MachinePending     MachinePhase = "Pending"
	MachineStarting    MachinePhase = "Starting"
	MachineRunning     MachinePhase = "Running"
	MachineStopping    MachinePhase = "Stopping"
	MachineStopped     MachinePhase = "Stopped"
	MachineMigrating   MachinePhase = "Migrating"
	MachinePause       MachinePhase = "Pause"
	MachineTerminating MachinePhase = "Terminating"
)

// VirtualMachineStatus is the observed state of a machine.
type VirtualMachineStatus struct {
	// Phase of the machine: Pending, Starting, Running, Stopping, Stopped, Migrating, Pause or Terminating.
	// +optional
	Phase MachinePhase `json:"phase,omitempty"`
	// NodeName is the node the machine runs on.
	// +optional
	NodeName string `json:"nodeName,omitempty"`
	// IPAddress is the machine's address, from its VirtualMachineIPAddress.
	// +optional
	IPAddress string `json:"ipAddress,omitempty"`
	// VirtualMachineIPAddressName is the VirtualMachineIPAddress the machine uses.
	// +optional
	VirtualMachineIPAddressName string `json:"virtualMachineIPAddressName,omitempty"`
	// GuestOSInfo is what the guest agent reports of the operating system.
	// +optional
	GuestOSInfo GuestOSInfo `json:"guestOSInfo,omitempty"`
	// BlockDeviceRefs are the machine's disks and images as attached.
	// +optional
	// +listType=atomic
	BlockDeviceRefs []BlockDeviceStatusRef `json:"blockDeviceRefs,omitempty"`
	// Resources are the resources the machine runs with.
	// +optional
	Resources ResourcesStatus `json:"resources,omitempty"`
	// RestartAwaitingChanges are the spec changes that wait for a restart, each as a JSON patch operation against the running configuration.
	// +optional
	// +listType=atomic
	RestartAwaitingChanges []RestartAwaitingChange `json:"restartAwaitingChanges,omitempty"`
	// Stats are the machine's phase transitions and launch durations.
	// +optional
	Stats *VirtualMachineStats `json:"stats,omitempty"`
	// MigrationState is the state of the last live migration.
	// +optional
	MigrationState *VirtualMachineMigrationState `json:"migrationState,omitempty"`
	// Versions are the versions of the hypervisor the machine runs on.
	// +optional
	Versions Versions `json:"versions,omitempty"`
	// Conditions: VirtualMachineClassReady, VirtualMachineIPAddressReady, BlockDevicesReady, ProvisioningReady, Running, AgentReady, Migrating, Migratable, AwaitingRestartToApplyConfiguration, ConfigurationApplied and SizingPolicyMatched.
	// +listType=map
	// +listMapKey=type
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`
	// ObservedGeneration is the generation of the spec the status describes.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
}

// GuestOSInfo is what a guest agent reports of the operating system.
type GuestOSInfo struct {
	// Name of the operating system.
	// +optional
	Name string `json:"name,omitempty"`
	// PrettyName is the full name with the version.
	// +optional
	PrettyName string `json:"prettyName,omitempty"`
	// ID of the distribution, for example debian.
	// +optional
	ID string `json:"id,omitempty"`
	// Version of the operating system.
	// +optional
	Version string `json:"version,omitempty"`
	// VersionID is the version's short identifier, for example 12.
	// +optional
	VersionID string `json:"versionId,omitempty"`
	// KernelRelease is the kernel's release.
	// +optional
	KernelRelease string `json:"kernelRelease,omitempty"`
	// KernelVersion is the kernel's version.
	// +optional
	KernelVersion string `json:"kernelVersion,omitempty"`
	// Machine is the guest's architecture, for example x86_64.
	// +optional
	Machine string `json:"machine,omitempty"`
}

// BlockDeviceStatusRef is one disk or image of a machine as attached.
type BlockDeviceStatusRef struct {
	// Kind of the device: VirtualDisk, VirtualImage or ClusterVirtualImage.
	Kind BlockDeviceKind `json:"kind"`
	// Name of the disk or image.
	Name string `json:"name"`
	// Size of the device.
	// +optional
	Size string `json:"size,omitempty"`
	// Target is the device's name in the guest's domain, for example vda.
	// +optional
	Target string `json:"target,omitempty"`
	// Attached is true once the device is attached to the running machine.
	Attached bool `json:"attached"`
	// Hotplugged is true for a device plugged in by a VirtualMachineBlockDeviceAttachment.
	// +optional
	Hotplugged bool `json:"hotplugged,omitempty"`
	// VirtualMachineBlockDeviceAttachmentName is the attachment that plugged the device in.
	// +optional
	VirtualMachineBlockDeviceAttachmentName string `json:"virtualMachineBlockDeviceAttachmentName,omitempty"`
}

// ResourcesStatus is what a machine runs with.
type ResourcesStatus struct {
	// CPU the machine runs with.
	// +optional
	CPU CPUStatus `json:"cpu,omitempty"`
	// Memory the machine runs with.
	// +optional
	Memory MemoryStatus `json:"memory,omitempty"`
}

// CPUStatus is the processor a machine runs with.
type CPUStatus struct {
	// Cores is the number of virtual cores.
	// +optional
	Cores int `json:"cores,omitempty"`
	// CoreFraction is the guaranteed share of each core.
	// +optional
	CoreFraction string `json:"coreFraction,omitempty"`
	// RequestedCores is the CPU request of the machine's Pod.
	// +optional
	RequestedCores resource.Quantity `json:"requestedCores,omitempty"`
	// RuntimeOverhead is the CPU the hypervisor takes on top of the guest's.
	// +optional
	RuntimeOverhead resource.Quantity `json:"runtimeOverhead,omitempty"`
	// Topology is how the cores are laid out in sockets.
	// +optional
	Topology Topology `json:"topology,omitempty"`
}

// Topology is how a machine's cores are laid out.
type Topology struct {
	// CoresPerSocket is the number of cores in each socket.
	// +optional
	CoresPerSocket int `json:"coresPerSocket,omitempty"`
	// Sockets is the number of sockets.
	// +optional
	Sockets int `json:"sockets,omitempty"`
}

// MemoryStatus is the memory a machine runs with.
type MemoryStatus struct {
	// Size of the guest's memory.
	// +optional
	Size resource.Quantity `json:"size,omitempty"`
	// RuntimeOverhead is the memory the hypervisor takes on top of the guest's.
	// +optional
	RuntimeOverhead resource.Quantity `json:"runtimeOverhead,omitempty"`
}

// RestartAwaitingChange is one spec change that waits for a restart.
type RestartAwaitingChange struct {
	// Operation of the change: add, remove or replace.
	// +kubebuilder:validation:Enum=add;remove;replace
	Operation string `json:"operation"`
	// Path of the changed field, as a JSON pointer into the spec (for example /cpu/cores).
	Path string `json:"path"`
	// CurrentValue is the value the running machine has.
	// +kubebuilder:validation:Schemaless
	// +kubebuilder:pruning:PreserveUnknownFields
	// +optional
	CurrentValue *runtime.RawExtension `json:"currentValue,omitempty"`
	// DesiredValue is the value of the spec.
	// +kubebuilder:validation:Schemaless
	// +kubebuilder:pruning:PreserveUnknownFields
	// +optional
	DesiredValue *runtime.RawExtension `json:"desiredValue,omitempty"`
}

// VirtualMachineStats are a machine's phase transitions and launch durations.
type VirtualMachineStats struct {
	// PhasesTransitions are the latest phase changes, oldest first.
	// +optional
	// +listType=atomic
	PhasesTransitions []VirtualMachinePhaseTransition `json:"phasesTransitions,omitempty"`
	// LaunchTimeDuration splits the time of the last start.
	// +optional
	LaunchTimeDuration VirtualMachineLaunchTimeDuration `json:"launchTimeDuration,omitempty"`
}

// VirtualMachinePhaseTransition is one phase change of a machine.
type VirtualMachinePhaseTransition struct {
	// Phase the machine entered.
	Phase MachinePhase `json:"phase"`
	// Timestamp of the change.
	Timestamp metav1.Time `json:"timestamp"`
}

// VirtualMachineLaunchTimeDuration splits the time of a machine's last start.
type VirtualMachineLaunchTimeDuration struct {
	// WaitingForDependencies is the time spent waiting for the class, disks, images and IP address.
	// +optional
	WaitingForDependencies *metav1.Duration `json:"waitingForDependencies,omitempty"`
	// VirtualMachineStarting is the time from the start of the machine's Pod to the guest running.
	// +optional
	VirtualMachineStarting *metav1.Duration `json:"virtualMachineStarting,omitempty"`
	// GuestOSAgentStarting is the time from the guest running to its agent answering.
	// +optional
	GuestOSAgentStarting *metav1.Duration `json:"guestOSAgentStarting,omitempty"`
}

// MigrationResult is how a live migration ended.
// +kubebuilder:validation:Enum=Succeeded;Failed
type MigrationResult string

// The migration results.
const (
	MigrationResultSucceeded MigrationResult = "Succeeded"
	MigrationResultFailed    MigrationResult = "Failed"
)

// VirtualMachineMigrationState is the state of a machine's last live migration.
type VirtualMachineMigrationState struct {
	// StartTimestamp is when the migration started.
	// +optional
	StartTimestamp *metav1.Time `json:"startTimestamp,omitempty"`
	// EndTimestamp is when the migration ended.
	// +optional
	EndTimestamp *metav1.Time `json:"endTimestamp,omitempty"`
	// Source is where the machine ran before.
	// +optional
	Source VirtualMachineLocation `json:"source,omitempty"`
	// Target is where the machine runs after.
	// +optional
	Target VirtualMachineLocation `json:"target,omitempty"`
	// Result of an ended migration: Succeeded or Failed.
	// +optional
	Result MigrationResult `json:"result,omitempty"`
}

// VirtualMachineLocation is where a machine runs.
type VirtualMachineLocation struct {
	// Node name.
	// +optional
	Node string `json:"node,omitempty"`
	// Pod name of the machine's launcher.
	// +optional
	Pod string `json:"pod,omitempty"`
}

// Versions are the versions of the hypervisor a machine runs on.
type Versions struct {
	// Qemu version.
	// +optional
	Qemu string `json:"qemu,omitempty"`
	// Libvirt version.
	// +optional
	Libvirt string `json:"libvirt,omitempty"`
}
