package webhooks

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"

	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/validation/field"
	kubevirtv1 "kubevirt.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// cloudInitUserMaxLen is KubeVirt's limit on inline cloud-init user data (decoded), which keeps
// objects small; larger data belongs in a Secret.
const cloudInitUserMaxLen = 2048

var validRunStrategies = map[kubevirtv1.VirtualMachineRunStrategy]bool{
	kubevirtv1.RunStrategyHalted: true, kubevirtv1.RunStrategyManual: true, kubevirtv1.RunStrategyAlways: true,
	kubevirtv1.RunStrategyRerunOnFailure: true, kubevirtv1.RunStrategyOnce: true,
}

func invalid(msg string, path *field.Path) metav1.StatusCause {
	return metav1.StatusCause{Type: metav1.CauseTypeFieldValueInvalid, Message: msg, Field: path.String()}
}

// ValidateVMISpec checks a VMI spec wherever it appears (a VMI, a VM's or a VMIRS's template);
// path is where the spec sits, so messages name the field as the user wrote it.
func ValidateVMISpec(path *field.Path, spec *kubevirtv1.VirtualMachineInstanceSpec) []metav1.StatusCause {
	var causes []metav1.StatusCause
	causes = append(causes, validateDisks(path.Child("domain", "devices", "disks"), spec.Domain.Devices.Disks)...)
	causes = append(causes, validateDisksHaveVolumes(path, spec)...)
	causes = append(causes, validateVolumes(path.Child("volumes"), spec.Volumes)...)
	return causes
}

// validateDisks rejects duplicate disk names.
func validateDisks(path *field.Path, disks []kubevirtv1.Disk) []metav1.StatusCause {
	var causes []metav1.StatusCause
	seen := map[string]int{}
	for i, d := range disks {
		if other, dup := seen[d.Name]; dup {
			causes = append(causes, invalid(fmt.Sprintf("%s and %s must not have the same Name.", path.Index(i), path.Index(other)), path.Index(i).Child("name")))
			continue
		}
		seen[d.Name] = i
	}
	return causes
}

// validateDisksHaveVolumes rejects a disk without a volume of its name. KubeVirt's message says
// "Name" while the cause's field says "name"; both are kept as upstream has them.
func validateDisksHaveVolumes(path *field.Path, spec *kubevirtv1.VirtualMachineInstanceSpec) []metav1.StatusCause {
	volumes := map[string]bool{}
	for _, v := range spec.Volumes {
		volumes[v.Name] = true
	}
	var causes []metav1.StatusCause
	disks := path.Child("domain", "devices", "disks")
	for i, d := range spec.Domain.Devices.Disks {
		if volumes[d.Name] {
			continue
		}
		causes = append(causes, invalid(fmt.Sprintf("%s '%s' not found.", disks.Index(i).Child("Name"), d.Name), disks.Index(i).Child("name")))
	}
	return causes
}

// validateVolumes rejects duplicate volume names, volumes with no or several sources, oversized or
// ambiguous cloud-init user data, incomplete hostDisks and config volumes, and more than one
// serviceAccount volume, with KubeVirt's messages.
func validateVolumes(path *field.Path, volumes []kubevirtv1.Volume) []metav1.StatusCause {
	var causes []metav1.StatusCause
	seen := map[string]int{}
	serviceAccounts := 0
	for i, v := range volumes {
		if other, dup := seen[v.Name]; dup {
			causes = append(causes, invalid(fmt.Sprintf("%s and %s must not have the same Name.", path.Index(i), path.Index(other)), path.Index(i).Child("name")))
		} else {
			seen[v.Name] = i
		}
		if sourceCount(&v.VolumeSource) != 1 {
			causes = append(causes, invalid(fmt.Sprintf("%s must have exactly one source type set", path.Index(i)), path.Index(i)))
		}
		if v.ServiceAccount != nil {
			serviceAccounts++
		}
		causes = append(causes, validateCloudInit(path.Index(i), v)...)
		causes = append(causes, validateHostDisk(path.Index(i).Child("hostDisk"), v.HostDisk)...)
		causes = append(causes, validateConfigVolume(path.Index(i), &v.VolumeSource)...)
	}
	if serviceAccounts > 1 {
		causes = append(causes, invalid(fmt.Sprintf("%s must have max one serviceAccount volume set", path), path))
	}
	return causes
}

// sourceCount is how many of the volume sources KubeVirt knows are set.
func sourceCount(s *kubevirtv1.VolumeSource) int {
	n := 0
	for _, set := range []bool{
		s.PersistentVolumeClaim != nil, s.Sysprep != nil, s.CloudInitNoCloud != nil, s.CloudInitConfigDrive != nil,
		s.ContainerDisk != nil, s.Ephemeral != nil, s.EmptyDisk != nil, s.HostDisk != nil, s.DataVolume != nil,
		s.ConfigMap != nil, s.Secret != nil, s.DownwardAPI != nil, s.ServiceAccount != nil, s.DownwardMetrics != nil,
		s.MemoryDump != nil,
	} {
		if set {
			n++
		}
	}
	return n
}

// validateConfigVolume requires what names the data of configMap, secret, serviceAccount,
// sysprep and ephemeral volumes, as KubeVirt does ("... is a required field"). A sysprep volume
// with neither source gets the message of KubeVirt's controller, which fails such a VMI later;
// with both, the Secret is used, as there.
func validateConfigVolume(path *field.Path, s *kubevirtv1.VolumeSource) []metav1.StatusCause {
	required := func(p *field.Path) []metav1.StatusCause {
		return []metav1.StatusCause{invalid(fmt.Sprintf("%s is a required field", p), p)}
	}
	switch {
	case s.ConfigMap != nil && s.ConfigMap.Name == "":
		return required(path.Child("configMap", "name"))
	case s.Secret != nil && s.Secret.SecretName == "":
		return required(path.Child("secret", "secretName"))
	case s.ServiceAccount != nil && s.ServiceAccount.ServiceAccountName == "":
		return required(path.Child("serviceAccount", "serviceAccountName"))
	case s.Ephemeral != nil && (s.Ephemeral.PersistentVolumeClaim == nil || s.Ephemeral.PersistentVolumeClaim.ClaimName == ""):
		return required(path.Child("ephemeral", "persistentVolumeClaim", "claimName"))
	case s.Sysprep != nil && s.Sysprep.Secret == nil && s.Sysprep.ConfigMap == nil:
		p := path.Child("sysprep")
		return []metav1.StatusCause{invalid("Sysprep must have Secret or ConfigMap reference set", p)}
	case s.Sysprep != nil && s.Sysprep.Secret != nil && s.Sysprep.Secret.Name == "":
		return required(path.Child("sysprep", "secret", "name"))
	case s.Sysprep != nil && s.Sysprep.ConfigMap != nil && s.Sysprep.ConfigMap.Name == "":
		return required(path.Child("sysprep", "configMap", "name"))
	}
	return nil
}

// validateHostDisk applies KubeVirt's rules to a hostDisk volume: a path, a known type, and a
// capacity only where the disk may be created. (A missing capacity for DiskOrCreate is fine
// while the image exists; the launcher rejects it when it has to create one.)
func validateHostDisk(path *field.Path, hd *kubevirtv1.HostDisk) []metav1.StatusCause {
	if hd == nil {
		return nil
	}
	var causes []metav1.StatusCause
	if hd.Path == "" {
		p := path.Child("path")
		causes = append(causes, metav1.StatusCause{Type: metav1.CauseTypeFieldValueNotFound,
			Message: fmt.Sprintf("%s is required for hostDisk volume", p), Field: p.String()})
	}
	typ := path.Child("type")
	if hd.Type != kubevirtv1.HostDiskExists && hd.Type != kubevirtv1.HostDiskExistsOrCreate {
		causes = append(causes, invalid(fmt.Sprintf("%s has invalid value '%s', allowed are '%s' or '%s'",
			typ, hd.Type, kubevirtv1.HostDiskExists, kubevirtv1.HostDiskExistsOrCreate), typ))
	}
	if hd.Type == kubevirtv1.HostDiskExists && !hd.Capacity.IsZero() {
		p := path.Child("capacity")
		causes = append(causes, invalid(fmt.Sprintf("%s is allowed to pass only with %s equal to '%s'",
			p, typ, kubevirtv1.HostDiskExistsOrCreate), p))
	}
	return causes
}

func validateCloudInit(path *field.Path, v kubevirtv1.Volume) []metav1.StatusCause {
	var source string
	var secretRef bool
	var userData, userDataBase64 string
	switch {
	case v.CloudInitNoCloud != nil:
		source = "cloudInitNoCloud"
		c := v.CloudInitNoCloud
		secretRef, userData, userDataBase64 = c.UserDataSecretRef != nil && c.UserDataSecretRef.Name != "", c.UserData, c.UserDataBase64
	case v.CloudInitConfigDrive != nil:
		source = "cloudInitConfigDrive"
		c := v.CloudInitConfigDrive
		secretRef, userData, userDataBase64 = c.UserDataSecretRef != nil && c.UserDataSecretRef.Name != "", c.UserData, c.UserDataBase64
	default:
		return nil
	}
	var causes []metav1.StatusCause
	sources, length := 0, 0
	if secretRef {
		sources++
	}
	if userDataBase64 != "" {
		sources++
		decoded, err := base64.StdEncoding.DecodeString(userDataBase64)
		if err != nil {
			p := path.Child(source, "userDataBase64")
			causes = append(causes, invalid(fmt.Sprintf("%s.%s.userDataBase64 is not a valid base64 value.", p, source), p))
		}
		length = len(decoded)
	}
	if userData != "" {
		sources++
		length = len(userData)
	}
	p := path.Child(source)
	if sources > 1 {
		causes = append(causes, invalid(fmt.Sprintf("%s must have only one userdatasource set.", p), p))
	}
	if length > cloudInitUserMaxLen {
		causes = append(causes, invalid(fmt.Sprintf("%s userdata exceeds %d byte limit. Should use UserDataSecretRef for larger data.", p, cloudInitUserMaxLen), p))
	}
	return causes
}

// ValidateVMIMandatory applies only to VMIs themselves, after presets and defaults: a template
// may leave memory to an instance type, a VMI may not.
func ValidateVMIMandatory(path *field.Path, spec *kubevirtv1.VirtualMachineInstanceSpec) []metav1.StatusCause {
	if !spec.Domain.Resources.Requests.Memory().IsZero() {
		return nil
	}
	if m := spec.Domain.Memory; m != nil && (m.Guest != nil || m.Hugepages != nil) {
		return nil
	}
	return []metav1.StatusCause{{
		Type: metav1.CauseTypeFieldValueRequired,
		Message: fmt.Sprintf("no memory requested, at least one of '%s', '%s' or '%s' must be set",
			path.Child("domain", "memory", "guest"), path.Child("domain", "memory", "hugepages", "size"), path.Child("domain", "resources", "requests", "memory")),
	}}
}

// ValidateVMIUpdate lets only KubeVirt's own components change a VMI's spec: users change a
// running VMI through the subresources, which virt-api turns into system updates.
func ValidateVMIUpdate(oldVMI, newVMI *kubevirtv1.VirtualMachineInstance, systemUser bool) []metav1.StatusCause {
	if systemUser || equality.Semantic.DeepEqual(oldVMI.Spec, newVMI.Spec) {
		return nil
	}
	return []metav1.StatusCause{{Type: metav1.CauseTypeFieldValueNotSupported, Message: "update of VMI object is restricted"}}
}

func missingTemplate(path *field.Path) []metav1.StatusCause {
	return []metav1.StatusCause{{Type: metav1.CauseTypeFieldValueRequired, Message: "missing virtual machine template.", Field: path.Child("template").String()}}
}

// ValidateVMSpec checks a VM: its template with the VMI rules, then its run strategy.
func ValidateVMSpec(path *field.Path, spec *kubevirtv1.VirtualMachineSpec) []metav1.StatusCause {
	if spec.Template == nil {
		return missingTemplate(path)
	}
	causes := ValidateVMISpec(path.Child("template", "spec"), &spec.Template.Spec)
	return append(causes, validateRunStrategy(path, spec)...)
}

// validateRunStrategy has KubeVirt v1.6's messages, which call spec.running deprecated.
func validateRunStrategy(path *field.Path, spec *kubevirtv1.VirtualMachineSpec) []metav1.StatusCause {
	var causes []metav1.StatusCause
	if spec.Running != nil && spec.RunStrategy != nil {
		causes = append(causes, invalid("Running and RunStrategy are mutually exclusive. Note that Running is deprecated, please use RunStrategy instead", path.Child("running")))
	}
	if spec.Running == nil && spec.RunStrategy == nil {
		causes = append(causes, invalid("RunStrategy must be specified", path.Child("running")))
	}
	if rs := spec.RunStrategy; rs != nil {
		switch {
		case *rs == kubevirtv1.RunStrategyWaitAsReceiver:
			// Decentralized live migration is not implemented, so its feature gate is never on.
			causes = append(causes, invalid(fmt.Sprintf("Invalid RunStrategy (%s), DecentralizedLiveMigration feature gate is not enabled in kubevirt resource", *rs), path.Child("runStrategy")))
		case !validRunStrategies[*rs]:
			causes = append(causes, invalid(fmt.Sprintf("Invalid RunStrategy (%s)", *rs), path.Child("runStrategy")))
		}
	}
	return causes
}

// ValidateVMIRSSpec checks a VMI ReplicaSet: its template and that its selector selects it.
func ValidateVMIRSSpec(path *field.Path, spec *kubevirtv1.VirtualMachineInstanceReplicaSetSpec) []metav1.StatusCause {
	if spec.Template == nil {
		return missingTemplate(path)
	}
	causes := ValidateVMISpec(path.Child("template", "spec"), &spec.Template.Spec)
	selector, err := metav1.LabelSelectorAsSelector(spec.Selector)
	switch {
	case err != nil:
		causes = append(causes, invalid(err.Error(), path.Child("selector")))
	case !selector.Matches(labels.Set(spec.Template.ObjectMeta.Labels)):
		causes = append(causes, invalid("selector does not match labels.", path.Child("selector")))
	}
	return causes
}

// ValidateMigrationSpec requires the VMI to migrate.
func ValidateMigrationSpec(path *field.Path, spec *kubevirtv1.VirtualMachineInstanceMigrationSpec) []metav1.StatusCause {
	if spec.VMIName != "" {
		return nil
	}
	return []metav1.StatusCause{{Type: metav1.CauseTypeFieldValueRequired, Message: "vmiName is missing", Field: path.Child("vmiName").String()}}
}

// ValidatePresetSpec requires the domain a preset contributes and checks its devices. Upstream
// does not require a selector: an empty one selects every VMI in the namespace.
func ValidatePresetSpec(path *field.Path, spec *kubevirtv1.VirtualMachineInstancePresetSpec) []metav1.StatusCause {
	if spec.Domain == nil {
		return []metav1.StatusCause{{Type: metav1.CauseTypeFieldValueRequired, Message: "missing domain.", Field: path.Child("domain").String()}}
	}
	var causes []metav1.StatusCause
	if _, err := metav1.LabelSelectorAsSelector(&spec.Selector); err != nil {
		causes = append(causes, invalid(err.Error(), path.Child("selector")))
	}
	return append(causes, validateDisks(path.Child("domain", "devices", "disks"), spec.Domain.Devices.Disks)...)
}

// The handlers: decode, call the rule, answer.

func (s *Server) validateVMICreate(_ context.Context, req *admissionv1.AdmissionRequest) *admissionv1.AdmissionResponse {
	var vmi kubevirtv1.VirtualMachineInstance
	if err := decodeObject(req.Object.Raw, &vmi); err != nil {
		return failed(http.StatusBadRequest, err)
	}
	spec := field.NewPath("spec")
	causes := ValidateVMISpec(spec, &vmi.Spec)
	return verdict(append(causes, ValidateVMIMandatory(spec, &vmi.Spec)...))
}

func (s *Server) validateVMIUpdate(_ context.Context, req *admissionv1.AdmissionRequest) *admissionv1.AdmissionResponse {
	var oldVMI, newVMI kubevirtv1.VirtualMachineInstance
	if err := decodeObject(req.Object.Raw, &newVMI); err != nil {
		return failed(http.StatusBadRequest, err)
	}
	if err := decodeObject(req.OldObject.Raw, &oldVMI); err != nil {
		return failed(http.StatusBadRequest, err)
	}
	return verdict(ValidateVMIUpdate(&oldVMI, &newVMI, s.SystemUsers[req.UserInfo.Username]))
}

func (s *Server) validateVM(_ context.Context, req *admissionv1.AdmissionRequest) *admissionv1.AdmissionResponse {
	var vm kubevirtv1.VirtualMachine
	if err := decodeObject(req.Object.Raw, &vm); err != nil {
		return failed(http.StatusBadRequest, err)
	}
	// A VM on its way out is not judged, so that its deletion never races a rule.
	if vm.DeletionTimestamp != nil {
		return allow()
	}
	return verdict(ValidateVMSpec(field.NewPath("spec"), &vm.Spec))
}

func (s *Server) validateVMIRS(_ context.Context, req *admissionv1.AdmissionRequest) *admissionv1.AdmissionResponse {
	var rs kubevirtv1.VirtualMachineInstanceReplicaSet
	if err := decodeObject(req.Object.Raw, &rs); err != nil {
		return failed(http.StatusBadRequest, err)
	}
	return verdict(ValidateVMIRSSpec(field.NewPath("spec"), &rs.Spec))
}

func (s *Server) validateMigration(ctx context.Context, req *admissionv1.AdmissionRequest) *admissionv1.AdmissionResponse {
	var m kubevirtv1.VirtualMachineInstanceMigration
	if err := decodeObject(req.Object.Raw, &m); err != nil {
		return failed(http.StatusBadRequest, err)
	}
	if causes := ValidateMigrationSpec(field.NewPath("spec"), &m.Spec); len(causes) > 0 || req.Operation != admissionv1.Create {
		return verdict(causes)
	}
	// A VMI that is not there passes: the migration controller fails the migration, saying so.
	vmi := &kubevirtv1.VirtualMachineInstance{}
	switch err := s.Reader.Get(ctx, client.ObjectKey{Namespace: req.Namespace, Name: m.Spec.VMIName}, vmi); {
	case apierrors.IsNotFound(err):
		return allow()
	case err != nil:
		return failed(http.StatusInternalServerError, fmt.Errorf("read the VMI %s: %w", m.Spec.VMIName, err))
	}
	if msg := NotMigratable(vmi); msg != "" {
		return failed(http.StatusBadRequest, errors.New(msg))
	}
	return allow()
}

// NotMigratable is KubeVirt's refusal of a migration of a VMI whose LiveMigratable condition is
// False (empty when it may migrate).
func NotMigratable(vmi *kubevirtv1.VirtualMachineInstance) string {
	for _, c := range vmi.Status.Conditions {
		if c.Type == kubevirtv1.VirtualMachineInstanceIsMigratable && c.Status == corev1.ConditionFalse {
			return fmt.Sprintf("Cannot migrate VMI, Reason: %s, Message: %s", c.Reason, c.Message)
		}
	}
	return ""
}

func (s *Server) validatePreset(_ context.Context, req *admissionv1.AdmissionRequest) *admissionv1.AdmissionResponse {
	var p kubevirtv1.VirtualMachineInstancePreset
	if err := decodeObject(req.Object.Raw, &p); err != nil {
		return failed(http.StatusBadRequest, err)
	}
	return verdict(ValidatePresetSpec(field.NewPath("spec"), &p.Spec))
}
