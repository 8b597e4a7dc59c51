// Package vmcondition names the condition types and reasons of a VirtualMachine's status, as the
// reference module spells them.
package vmcondition

// Type is a condition type of a VirtualMachine.
type Type string

// The condition types.
const (
	TypeIPAddressReady                      Type = "VirtualMachineIPAddressReady"
	TypeClassReady                          Type = "VirtualMachineClassReady"
	TypeBlockDevicesReady                   Type = "BlockDevicesReady"
	TypeProvisioningReady                   Type = "ProvisioningReady"
	TypeRunning                             Type = "Running"
	TypeAgentReady                          Type = "AgentReady"
	TypeMigrating                           Type = "Migrating"
	TypeMigratable                          Type = "Migratable"
	TypeConfigurationApplied                Type = "ConfigurationApplied"
	TypeAwaitingRestartToApplyConfiguration Type = "AwaitingRestartToApplyConfiguration"
	TypeSizingPolicyMatched                 Type = "SizingPolicyMatched"
)

// Reason is a reason of a VirtualMachine's condition.
type Reason string

// The reasons.
const (
	ReasonAgentReady    Reason = "AgentReady"
	ReasonAgentNotReady Reason = "AgentNotReady"

	ReasonClassReady    Reason = "VirtualMachineClassReady"
	ReasonClassNotReady Reason = "VirtualMachineClassNotReady"

	ReasonIPAddressReady        Reason = "VirtualMachineIPAddressReady"
	ReasonIPAddressNotReady     Reason = "VirtualMachineIPAddressNotReady"
	ReasonIPAddressNotAssigned  Reason = "VirtualMachineIPAddressNotAssigned"
	ReasonIPAddressNotAvailable Reason = "VirtualMachineIPAddressNotAvailable"

	ReasonBlockDevicesReady           Reason = "BlockDevicesReady"
	ReasonWaitingForProvisioningToPVC Reason = "WaitingForTheProvisioningToPersistentVolumeClaim"
	ReasonBlockDevicesNotReady        Reason = "BlockDevicesNotReady"

	ReasonProvisioningReady    Reason = "ProvisioningReady"
	ReasonProvisioningNotReady Reason = "ProvisioningNotReady"

	ReasonConfigurationApplied    Reason = "ConfigurationApplied"
	ReasonConfigurationNotApplied Reason = "ConfigurationNotApplied"

	ReasonRestartAwaitingChangesExist        Reason = "RestartAwaitingChangesExist"
	ReasonRestartAwaitingVMClassChangesExist Reason = "RestartAwaitingVMClassChangesExist"
	ReasonRestartNoNeed                      Reason = "NoNeedRestart"

	ReasonMigratable    Reason = "VirtualMachineMigratable"
	ReasonNotMigratable Reason = "VirtualMachineNotMigratable"

	ReasonVMIsMigrating                  Reason = "VirtualMachineMigrating"
	ReasonVMIsNotMigrating               Reason = "VirtualMachineNotMigrating"
	ReasonLastMigrationFinishedWithError Reason = "LastMigrationFinishedWithError"
	ReasonVMIsNotRunning                 Reason = "VirtualMachineNotRunning"
	ReasonVMIsRunning                    Reason = "VirtualMachineRunning"
	ReasonInternalVirtualMachineError    Reason = "InternalVirtualMachineError"
	ReasonPodNotStarted                  Reason = "PodNotStarted"
	ReasonPodTerminating                 Reason = "PodTerminating"
	ReasonPodNotExists                   Reason = "PodNotExists"
	ReasonGuestNotRunning                Reason = "GuestNotRunning"

	ReasonSizingPolicyNotMatched         Reason = "SizingPolicyNotMatched"
	ReasonVirtualMachineClassTerminating Reason = "VirtualMachineClassTerminating"
	ReasonBlockDeviceLimitExceeded       Reason = "BlockDeviceLimitExceeded"
)
