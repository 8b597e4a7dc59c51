package webhooks

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"

	jsonpatch "gopkg.in/evanphx/json-patch.v4"
	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation/field"
	kubevirtv1 "kubevirt.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/d8virt/kubevirt-core/pkg/virtapicontract"
)

func vmiSpec(mut ...func(*kubevirtv1.VirtualMachineInstanceSpec)) kubevirtv1.VirtualMachineInstanceSpec {
	s := kubevirtv1.VirtualMachineInstanceSpec{
		Domain: kubevirtv1.DomainSpec{
			Resources: kubevirtv1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("128Mi")}},
			Devices:   kubevirtv1.Devices{Disks: []kubevirtv1.Disk{{Name: "root"}}},
		},
		Volumes: []kubevirtv1.Volume{{Name: "root", VolumeSource: kubevirtv1.VolumeSource{ContainerDisk: &kubevirtv1.ContainerDiskSource{Image: "img"}}}},
	}
	for _, m := range mut {
		m(&s)
	}
	return s
}

func cloudInit(userData, userDataBase64 string) func(*kubevirtv1.VirtualMachineInstanceSpec) {
	return func(s *kubevirtv1.VirtualMachineInstanceSpec) {
		s.Domain.Devices.Disks = append(s.Domain.Devices.Disks, kubevirtv1.Disk{Name: "ci"})
		s.Volumes = append(s.Volumes, kubevirtv1.Volume{Name: "ci", VolumeSource: kubevirtv1.VolumeSource{
			CloudInitNoCloud: &kubevirtv1.CloudInitNoCloudSource{UserData: userData, UserDataBase64: userDataBase64},
		}})
	}
}

func messages(causes []metav1.StatusCause) []string {
	var out []string
	for _, c := range causes {
		out = append(out, c.Message)
	}
	return out
}

func TestValidateVMI(t *testing.T) {
	spec := field.NewPath("spec")
	big := strings.Repeat("x", cloudInitUserMaxLen+1)
	tests := []struct {
		name      string
		spec      kubevirtv1.VirtualMachineInstanceSpec
		want      []string
		wantField string
	}{
		{name: "valid", spec: vmiSpec()},
		{name: "disk without volume", spec: vmiSpec(func(s *kubevirtv1.VirtualMachineInstanceSpec) { s.Domain.Devices.Disks[0].Name = "x" }),
			want: []string{"spec.domain.devices.disks[0].Name 'x' not found."}, wantField: "spec.domain.devices.disks[0].name"},
		{name: "duplicate disks", spec: vmiSpec(func(s *kubevirtv1.VirtualMachineInstanceSpec) {
			s.Domain.Devices.Disks = append(s.Domain.Devices.Disks, kubevirtv1.Disk{Name: "root"})
		}), want: []string{"spec.domain.devices.disks[1] and spec.domain.devices.disks[0] must not have the same Name."}, wantField: "spec.domain.devices.disks[1].name"},
		{name: "duplicate volumes", spec: vmiSpec(func(s *kubevirtv1.VirtualMachineInstanceSpec) { s.Volumes = append(s.Volumes, s.Volumes[0]) }),
			want: []string{"spec.volumes[1] and spec.volumes[0] must not have the same Name."}, wantField: "spec.volumes[1].name"},
		{name: "userdata at the limit", spec: vmiSpec(cloudInit(big[1:], ""))},
		{name: "userdata too large", spec: vmiSpec(cloudInit(big, "")),
			want: []string{"spec.volumes[1].cloudInitNoCloud userdata exceeds 2048 byte limit. Should use UserDataSecretRef for larger data."}, wantField: "spec.volumes[1].cloudInitNoCloud"},
		{name: "base64 userdata too large once decoded", spec: vmiSpec(cloudInit("", base64.StdEncoding.EncodeToString([]byte(big)))),
			want: []string{"spec.volumes[1].cloudInitNoCloud userdata exceeds 2048 byte limit. Should use UserDataSecretRef for larger data."}},
		{name: "two userdata sources", spec: vmiSpec(cloudInit("a", base64.StdEncoding.EncodeToString([]byte("b")))),
			want: []string{"spec.volumes[1].cloudInitNoCloud must have only one userdatasource set."}},
		{name: "invalid base64", spec: vmiSpec(cloudInit("", "!!")),
			want: []string{"spec.volumes[1].cloudInitNoCloud.userDataBase64.cloudInitNoCloud.userDataBase64 is not a valid base64 value."}},
		{name: "no memory", spec: vmiSpec(func(s *kubevirtv1.VirtualMachineInstanceSpec) { s.Domain.Resources.Requests = nil }),
			want: []string{"no memory requested, at least one of 'spec.domain.memory.guest', 'spec.domain.memory.hugepages.size' or 'spec.domain.resources.requests.memory' must be set"}},
		{name: "guest memory suffices", spec: vmiSpec(func(s *kubevirtv1.VirtualMachineInstanceSpec) {
			s.Domain.Resources.Requests = nil
			g := resource.MustParse("1Gi")
			s.Domain.Memory = &kubevirtv1.Memory{Guest: &g}
		})},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			causes := append(ValidateVMISpec(spec, &tt.spec), ValidateVMIMandatory(spec, &tt.spec)...)
			if got := messages(causes); strings.Join(got, "|") != strings.Join(tt.want, "|") {
				t.Fatalf("messages %q, want %q", got, tt.want)
			}
			if tt.wantField != "" && causes[0].Field != tt.wantField {
				t.Errorf("field %q, want %q", causes[0].Field, tt.wantField)
			}
		})
	}
}

func TestValidateVMIUpdate(t *testing.T) {
	old := &kubevirtv1.VirtualMachineInstance{Spec: vmiSpec()}
	changed := old.DeepCopy()
	changed.Spec.Hostname = "other"
	relabelled := old.DeepCopy()
	relabelled.Labels = map[string]string{"a": "b"}
	tests := []struct {
		name   string
		newVMI *kubevirtv1.VirtualMachineInstance
		system bool
		want   string
	}{
		{name: "user changes spec", newVMI: changed, want: "update of VMI object is restricted"},
		{name: "system changes spec", newVMI: changed, system: true},
		{name: "user changes labels", newVMI: relabelled},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := strings.Join(messages(ValidateVMIUpdate(old, tt.newVMI, tt.system)), "|"); got != tt.want {
				t.Fatalf("got %q, want %q", got, tt.want)
			}
		})
	}
}

func TestValidateVM(t *testing.T) {
	yes := true
	always, bogus, wait := kubevirtv1.RunStrategyAlways, kubevirtv1.VirtualMachineRunStrategy("Sometimes"), kubevirtv1.RunStrategyWaitAsReceiver
	vm := func(mut func(*kubevirtv1.VirtualMachineSpec)) kubevirtv1.VirtualMachineSpec {
		s := kubevirtv1.VirtualMachineSpec{RunStrategy: &always, Template: &kubevirtv1.VirtualMachineInstanceTemplateSpec{Spec: vmiSpec()}}
		mut(&s)
		return s
	}
	tests := []struct {
		name      string
		spec      kubevirtv1.VirtualMachineSpec
		want      string
		wantField string
	}{
		{name: "valid", spec: vm(func(*kubevirtv1.VirtualMachineSpec) {})},
		{name: "running and runStrategy", spec: vm(func(s *kubevirtv1.VirtualMachineSpec) { s.Running = &yes }),
			want: "Running and RunStrategy are mutually exclusive. Note that Running is deprecated, please use RunStrategy instead", wantField: "spec.running"},
		{name: "neither", spec: vm(func(s *kubevirtv1.VirtualMachineSpec) { s.RunStrategy = nil }), want: "RunStrategy must be specified"},
		{name: "invalid strategy", spec: vm(func(s *kubevirtv1.VirtualMachineSpec) { s.RunStrategy = &bogus }), want: "Invalid RunStrategy (Sometimes)", wantField: "spec.runStrategy"},
		{name: "wait as receiver", spec: vm(func(s *kubevirtv1.VirtualMachineSpec) { s.RunStrategy = &wait }),
			want: "Invalid RunStrategy (WaitAsReceiver), DecentralizedLiveMigration feature gate is not enabled in kubevirt resource"},
		{name: "missing template", spec: vm(func(s *kubevirtv1.VirtualMachineSpec) { s.Template = nil }), want: "missing virtual machine template.", wantField: "spec.template"},
		{name: "template disk without volume", spec: vm(func(s *kubevirtv1.VirtualMachineSpec) { s.Template.Spec.Domain.Devices.Disks[0].Name = "x" }),
			want: "spec.template.spec.domain.devices.disks[0].Name 'x' not found.", wantField: "spec.template.spec.domain.devices.disks[0].name"},
		{name: "template without memory is fine", spec: vm(func(s *kubevirtv1.VirtualMachineSpec) { s.Template.Spec.Domain.Resources.Requests = nil })},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			causes := ValidateVMSpec(field.NewPath("spec"), &tt.spec)
			if got := strings.Join(messages(causes), "|"); got != tt.want {
				t.Fatalf("got %q, want %q", got, tt.want)
			}
			if tt.wantField != "" && causes[0].Field != tt.wantField {
				t.Errorf("field %q, want %q", causes[0].Field, tt.wantField)
			}
		})
	}
}

func TestValidateOthers(t *testing.T) {
	rs := func(sel *metav1.LabelSelector, lbls map[string]string) []metav1.StatusCause {
		return ValidateVMIRSSpec(field.NewPath("spec"), &kubevirtv1.VirtualMachineInstanceReplicaSetSpec{
			Selector: sel,
			Template: &kubevirtv1.VirtualMachineInstanceTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: lbls}, Spec: vmiSpec()},
		})
	}
	app := &metav1.LabelSelector{MatchLabels: map[string]string{"app": "a"}}
	tests := []struct {
		name   string
		causes []metav1.StatusCause
		want   string
	}{
		{name: "vmirs matching", causes: rs(app, map[string]string{"app": "a"})},
		{name: "vmirs selector mismatch", causes: rs(app, map[string]string{"app": "b"}), want: "selector does not match labels."},
		{name: "vmirs without selector", causes: rs(nil, map[string]string{"app": "b"}), want: "selector does not match labels."},
		{name: "vmirs without template", causes: ValidateVMIRSSpec(field.NewPath("spec"), &kubevirtv1.VirtualMachineInstanceReplicaSetSpec{Selector: app}), want: "missing virtual machine template."},
		{name: "migration without vmi", causes: ValidateMigrationSpec(field.NewPath("spec"), &kubevirtv1.VirtualMachineInstanceMigrationSpec{}), want: "vmiName is missing"},
		{name: "migration", causes: ValidateMigrationSpec(field.NewPath("spec"), &kubevirtv1.VirtualMachineInstanceMigrationSpec{VMIName: "v"})},
		{name: "preset without domain", causes: ValidatePresetSpec(field.NewPath("spec"), &kubevirtv1.VirtualMachineInstancePresetSpec{Selector: *app}), want: "missing domain."},
		{name: "preset", causes: ValidatePresetSpec(field.NewPath("spec"), &kubevirtv1.VirtualMachineInstancePresetSpec{Selector: *app, Domain: &kubevirtv1.DomainSpec{}})},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := strings.Join(messages(tt.causes), "|"); got != tt.want {
				t.Fatalf("got %q, want %q", got, tt.want)
			}
		})
	}
}

func TestDefaultVMI(t *testing.T) {
	no := false
	twoCPUs := func(s *kubevirtv1.VirtualMachineInstanceSpec) {
		s.Domain.Resources.Limits = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2")}
	}
	tests := []struct {
		name  string
		spec  kubevirtv1.VirtualMachineInstanceSpec
		check func(t *testing.T, vmi *kubevirtv1.VirtualMachineInstance)
	}{
		{name: "bare VMI", spec: vmiSpec(), check: func(t *testing.T, vmi *kubevirtv1.VirtualMachineInstance) {
			s := vmi.Spec
			if s.Domain.Machine.Type != "q35" || s.Architecture != "amd64" {
				t.Errorf("machine %v arch %q", s.Domain.Machine, s.Architecture)
			}
			if s.Domain.Memory.Guest.String() != "128Mi" {
				t.Errorf("guest memory %v", s.Domain.Memory.Guest)
			}
			if c := s.Domain.CPU; c.Sockets != 1 || c.Cores != 1 || c.Threads != 1 || c.Model != "host-model" {
				t.Errorf("cpu %+v", c)
			}
			if len(s.Networks) != 1 || s.Networks[0].Pod == nil || s.Networks[0].Name != "default" ||
				len(s.Domain.Devices.Interfaces) != 1 || s.Domain.Devices.Interfaces[0].Masquerade == nil {
				t.Errorf("network %+v interfaces %+v", s.Networks, s.Domain.Devices.Interfaces)
			}
			if d := s.Domain.Devices.Disks[0]; d.Disk == nil || d.Disk.Bus != kubevirtv1.DiskBusVirtio {
				t.Errorf("disk %+v", d)
			}
			if vmi.Status.Memory == nil || vmi.Status.Memory.GuestAtBoot.String() != "128Mi" || vmi.Status.CurrentCPUTopology.Sockets != 1 {
				t.Errorf("status %+v", vmi.Status)
			}
			if !containsString(vmi.Finalizers, kubevirtv1.VirtualMachineInstanceFinalizer) {
				t.Errorf("finalizers %v", vmi.Finalizers)
			}
		}},
		{name: "sockets from the cpu limit", spec: vmiSpec(twoCPUs), check: func(t *testing.T, vmi *kubevirtv1.VirtualMachineInstance) {
			if c := vmi.Spec.Domain.CPU; c.Sockets != 2 || c.Cores != 1 {
				t.Errorf("cpu %+v", c)
			}
			if vmi.Spec.Domain.Resources.Requests.Cpu().String() != "2" {
				t.Errorf("cpu request %v", vmi.Spec.Domain.Resources.Requests)
			}
		}},
		{name: "no autoattach", spec: vmiSpec(func(s *kubevirtv1.VirtualMachineInstanceSpec) { s.Domain.Devices.AutoattachPodInterface = &no }),
			check: func(t *testing.T, vmi *kubevirtv1.VirtualMachineInstance) {
				if len(vmi.Spec.Networks) != 0 || len(vmi.Spec.Domain.Devices.Interfaces) != 0 {
					t.Errorf("networks %+v", vmi.Spec.Networks)
				}
			}},
		{name: "volume without disk gets one", spec: vmiSpec(func(s *kubevirtv1.VirtualMachineInstanceSpec) { s.Domain.Devices.Disks = nil }),
			check: func(t *testing.T, vmi *kubevirtv1.VirtualMachineInstance) {
				if d := vmi.Spec.Domain.Devices.Disks; len(d) != 1 || d[0].Name != "root" || d[0].Disk.Bus != kubevirtv1.DiskBusVirtio {
					t.Errorf("disks %+v", d)
				}
			}},
		{name: "explicit values stay", spec: vmiSpec(func(s *kubevirtv1.VirtualMachineInstanceSpec) {
			s.Domain.Machine = &kubevirtv1.Machine{Type: "pc"}
			s.Domain.CPU = &kubevirtv1.CPU{Cores: 4}
			s.Domain.Devices.Disks[0].Disk = &kubevirtv1.DiskTarget{Bus: kubevirtv1.DiskBusSATA}
		}), check: func(t *testing.T, vmi *kubevirtv1.VirtualMachineInstance) {
			s := vmi.Spec
			if s.Domain.Machine.Type != "pc" || s.Domain.CPU.Cores != 4 || s.Domain.CPU.Sockets != 0 || s.Domain.Devices.Disks[0].Disk.Bus != kubevirtv1.DiskBusSATA {
				t.Errorf("explicit values overwritten: %+v %+v %+v", s.Domain.Machine, s.Domain.CPU, s.Domain.Devices.Disks[0])
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			vmi := &kubevirtv1.VirtualMachineInstance{Spec: tt.spec}
			DefaultVMI(vmi)
			tt.check(t, vmi)
		})
	}
}

func TestDefaultVM(t *testing.T) {
	vm := &kubevirtv1.VirtualMachine{Spec: kubevirtv1.VirtualMachineSpec{Template: &kubevirtv1.VirtualMachineInstanceTemplateSpec{}}}
	DefaultVM(vm)
	if vm.Spec.Template.Spec.Domain.Machine.Type != "q35" || vm.Spec.Template.Spec.Architecture != "amd64" {
		t.Fatalf("template %+v", vm.Spec.Template.Spec)
	}
	DefaultVM(&kubevirtv1.VirtualMachine{}) // no template: nothing to default, no panic
}

func preset(name string, sel map[string]string, domain kubevirtv1.DomainSpec) kubevirtv1.VirtualMachineInstancePreset {
	return kubevirtv1.VirtualMachineInstancePreset{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec:       kubevirtv1.VirtualMachineInstancePresetSpec{Selector: metav1.LabelSelector{MatchLabels: sel}, Domain: &domain},
	}
}

func TestApplyPresets(t *testing.T) {
	small := kubevirtv1.DomainSpec{CPU: &kubevirtv1.CPU{Cores: 2}}
	large := kubevirtv1.DomainSpec{CPU: &kubevirtv1.CPU{Cores: 8}}
	mem := kubevirtv1.DomainSpec{Resources: kubevirtv1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("1Gi")}}}
	tests := []struct {
		name        string
		vmi         func(*kubevirtv1.VirtualMachineInstance)
		presets     []kubevirtv1.VirtualMachineInstancePreset
		wantApplied []string
		wantErr     bool
		wantCores   uint32
	}{
		{name: "matching preset applied", presets: []kubevirtv1.VirtualMachineInstancePreset{preset("small", map[string]string{"size": "s"}, small)},
			wantApplied: []string{"small"}, wantCores: 2},
		{name: "other labels", presets: []kubevirtv1.VirtualMachineInstancePreset{preset("small", map[string]string{"size": "xl"}, small)}},
		{name: "excluded", vmi: func(v *kubevirtv1.VirtualMachineInstance) {
			v.Annotations = map[string]string{PresetExcludeAnnotation: "true"}
		},
			presets: []kubevirtv1.VirtualMachineInstancePreset{preset("small", map[string]string{"size": "s"}, small)}},
		{name: "presets conflict", presets: []kubevirtv1.VirtualMachineInstancePreset{
			preset("small", map[string]string{"size": "s"}, small), preset("large", map[string]string{"size": "s"}, large),
		}, wantErr: true},
		{name: "VMI wins over preset, preset not applied", vmi: func(v *kubevirtv1.VirtualMachineInstance) { v.Spec.Domain.CPU = &kubevirtv1.CPU{Cores: 8} },
			presets: []kubevirtv1.VirtualMachineInstancePreset{preset("small", map[string]string{"size": "s"}, small)}, wantCores: 8},
		{name: "two compatible presets", presets: []kubevirtv1.VirtualMachineInstancePreset{
			preset("small", map[string]string{"size": "s"}, small), preset("mem", map[string]string{"size": "s"}, mem),
		}, wantApplied: []string{"small", "mem"}, wantCores: 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			vmi := &kubevirtv1.VirtualMachineInstance{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"size": "s"}}}
			if tt.vmi != nil {
				tt.vmi(vmi)
			}
			res, err := ApplyPresets(vmi, tt.presets)
			if tt.wantErr {
				if !errors.Is(err, ErrPresetConflict) || !strings.Contains(err.Error(), "presets 'large' and 'small' conflict: spec.cpu") {
					t.Fatalf("err %v, want a preset conflict", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if strings.Join(res.Applied, ",") != strings.Join(tt.wantApplied, ",") {
				t.Fatalf("applied %v, want %v", res.Applied, tt.wantApplied)
			}
			for _, name := range tt.wantApplied {
				if vmi.Annotations[PresetAnnotation(name)] != "kubevirt.io/v1" {
					t.Errorf("annotations %v", vmi.Annotations)
				}
			}
			if tt.wantCores != 0 && vmi.Spec.Domain.CPU.Cores != tt.wantCores {
				t.Errorf("cores %d, want %d", vmi.Spec.Domain.CPU.Cores, tt.wantCores)
			}
		})
	}
}

// review posts an AdmissionReview to the handler and returns the response.
func review(t *testing.T, h http.Handler, path string, req admissionv1.AdmissionRequest) *admissionv1.AdmissionResponse {
	t.Helper()
	body, _ := json.Marshal(admissionv1.AdmissionReview{
		TypeMeta: metav1.TypeMeta{APIVersion: "admission.k8s.io/v1", Kind: "AdmissionReview"}, Request: &req,
	})
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, path, bytes.NewReader(body)))
	if rec.Code != http.StatusOK {
		t.Fatalf("%s: status %d: %s", path, rec.Code, rec.Body)
	}
	var out admissionv1.AdmissionReview
	if err := json.Unmarshal(rec.Body.Bytes(), &out); err != nil || out.Response == nil {
		t.Fatalf("%s: answer %s: %v", path, rec.Body, err)
	}
	if out.Response.UID != req.UID || out.APIVersion != "admission.k8s.io/v1" {
		t.Fatalf("%s: answer uid %q version %q", path, out.Response.UID, out.APIVersion)
	}
	return out.Response
}

func raw(t *testing.T, obj any) runtime.RawExtension {
	b, err := json.Marshal(obj)
	if err != nil {
		t.Fatal(err)
	}
	return runtime.RawExtension{Raw: b}
}

func TestHandler(t *testing.T) {
	scheme := runtime.NewScheme()
	if err := kubevirtv1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	p := preset("small", map[string]string{"size": "s"}, kubevirtv1.DomainSpec{CPU: &kubevirtv1.CPU{Cores: 2}})
	p.Namespace = "ns"
	pinned := &kubevirtv1.VirtualMachineInstance{ObjectMeta: metav1.ObjectMeta{Name: "pinned", Namespace: "ns"}}
	pinned.Status.Conditions = []kubevirtv1.VirtualMachineInstanceCondition{{Type: kubevirtv1.VirtualMachineInstanceIsMigratable,
		Status: corev1.ConditionFalse, Reason: "DisksNotLiveMigratable", Message: "cannot migrate VMI: PVC root is not shared"}}
	free := &kubevirtv1.VirtualMachineInstance{ObjectMeta: metav1.ObjectMeta{Name: "free", Namespace: "ns"}}
	free.Status.Conditions = []kubevirtv1.VirtualMachineInstanceCondition{{Type: kubevirtv1.VirtualMachineInstanceIsMigratable, Status: corev1.ConditionTrue}}
	s := &Server{
		Reader:      fake.NewClientBuilder().WithScheme(scheme).WithObjects(&p, pinned, free).Build(),
		SystemUsers: map[string]bool{"system:serviceaccount:kubevirt:kubevirt-controller": true},
		Log:         slog.New(slog.NewTextHandler(io.Discard, nil)),
	}
	h := s.Handler()

	bad := &kubevirtv1.VirtualMachineInstance{ObjectMeta: metav1.ObjectMeta{Name: "v", Namespace: "ns"}, Spec: vmiSpec(func(s *kubevirtv1.VirtualMachineInstanceSpec) { s.Domain.Devices.Disks[0].Name = "x" })}
	resp := review(t, h, virtapicontract.PathVMICreate, admissionv1.AdmissionRequest{UID: "1", Operation: admissionv1.Create, Object: raw(t, bad)})
	if resp.Allowed || resp.Result.Code != 422 || resp.Result.Reason != metav1.StatusReasonInvalid ||
		resp.Result.Message != "spec.domain.devices.disks[0].Name 'x' not found." || resp.Result.Details.Causes[0].Field != "spec.domain.devices.disks[0].name" {
		t.Fatalf("denial %+v", resp.Result)
	}

	good := &kubevirtv1.VirtualMachineInstance{
		TypeMeta:   metav1.TypeMeta{APIVersion: "kubevirt.io/v1", Kind: "VirtualMachineInstance"},
		ObjectMeta: metav1.ObjectMeta{Name: "v", Namespace: "ns", Labels: map[string]string{"size": "s"}}, Spec: vmiSpec(),
	}
	resp = review(t, h, virtapicontract.PathVMIMutate, admissionv1.AdmissionRequest{UID: "2", Operation: admissionv1.Create, Namespace: "ns", Object: raw(t, good)})
	if !resp.Allowed || resp.PatchType == nil || *resp.PatchType != admissionv1.PatchTypeJSONPatch {
		t.Fatalf("mutation %+v", resp)
	}
	patch, err := jsonpatch.DecodePatch(resp.Patch)
	if err != nil {
		t.Fatal(err)
	}
	mutated, err := patch.Apply(raw(t, good).Raw)
	if err != nil {
		t.Fatalf("apply patch %s: %v", resp.Patch, err)
	}
	var after kubevirtv1.VirtualMachineInstance
	if err := json.Unmarshal(mutated, &after); err != nil {
		t.Fatal(err)
	}
	if after.Spec.Domain.CPU.Cores != 2 || after.Annotations["virtualmachinepreset.kubevirt.io/small"] != "kubevirt.io/v1" || after.Spec.Domain.Machine.Type != "q35" {
		t.Fatalf("mutated VMI: cpu %+v annotations %v machine %+v", after.Spec.Domain.CPU, after.Annotations, after.Spec.Domain.Machine)
	}

	changed := good.DeepCopy()
	changed.Spec.Hostname = "h"
	upd := admissionv1.AdmissionRequest{UID: "3", Operation: admissionv1.Update, Object: raw(t, changed), OldObject: raw(t, good)}
	upd.UserInfo.Username = "alice"
	if resp := review(t, h, virtapicontract.PathVMIUpdate, upd); resp.Allowed || resp.Result.Message != "update of VMI object is restricted" {
		t.Fatalf("user update %+v", resp.Result)
	}
	upd.UserInfo.Username = "system:serviceaccount:kubevirt:kubevirt-controller"
	if resp := review(t, h, virtapicontract.PathVMIUpdate, upd); !resp.Allowed {
		t.Fatalf("system update %+v", resp.Result)
	}

	// A migration of a VMI that is not LiveMigratable is refused with the condition's words; of
	// one that is, or of one that is not there (the controller fails that migration), allowed.
	for i, tc := range []struct {
		vmi, want string
	}{
		{"pinned", "Cannot migrate VMI, Reason: DisksNotLiveMigratable, Message: cannot migrate VMI: PVC root is not shared"},
		{"free", ""},
		{"nobody", ""},
	} {
		m := &kubevirtv1.VirtualMachineInstanceMigration{ObjectMeta: metav1.ObjectMeta{Name: "m", Namespace: "ns"},
			Spec: kubevirtv1.VirtualMachineInstanceMigrationSpec{VMIName: tc.vmi}}
		resp := review(t, h, virtapicontract.PathMigration, admissionv1.AdmissionRequest{UID: types.UID(fmt.Sprint("m", i)), Operation: admissionv1.Create, Namespace: "ns", Object: raw(t, m)})
		if tc.want == "" && !resp.Allowed || tc.want != "" && (resp.Allowed || resp.Result.Message != tc.want || resp.Result.Code != http.StatusBadRequest) {
			t.Errorf("migration of %s: %+v %+v, want %q", tc.vmi, resp.Allowed, resp.Result, tc.want)
		}
	}

	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, virtapicontract.PathVM, strings.NewReader(`{"kind":"AdmissionReview"}`)))
	if rec.Code != http.StatusBadRequest {
		t.Fatalf("a review without a request: %d", rec.Code)
	}
}

// TestMutateVM: a new VM gets its defaults and the VM controller's finalizer at admission, so
// that the controller does not write the VM again to add it; an update keeps what it has.
func TestMutateVM(t *testing.T) {
	h := (&Server{Log: slog.New(slog.NewTextHandler(io.Discard, nil))}).Handler()
	apply := func(resp *admissionv1.AdmissionResponse, obj any) kubevirtv1.VirtualMachine {
		t.Helper()
		var out kubevirtv1.VirtualMachine
		doc := raw(t, obj).Raw
		if resp.Patch != nil {
			patch, err := jsonpatch.DecodePatch(resp.Patch)
			if err != nil {
				t.Fatal(err)
			}
			if doc, err = patch.Apply(doc); err != nil {
				t.Fatalf("apply patch %s: %v", resp.Patch, err)
			}
		}
		if err := json.Unmarshal(doc, &out); err != nil {
			t.Fatal(err)
		}
		return out
	}
	vm := &kubevirtv1.VirtualMachine{ObjectMeta: metav1.ObjectMeta{Name: "vm", Namespace: "ns", Finalizers: []string{"example.com/mine"}},
		Spec: kubevirtv1.VirtualMachineSpec{Template: &kubevirtv1.VirtualMachineInstanceTemplateSpec{Spec: vmiSpec()}}}
	resp := review(t, h, virtapicontract.PathVMMutate, admissionv1.AdmissionRequest{UID: "1", Operation: admissionv1.Create, Namespace: "ns", Object: raw(t, vm)})
	created := apply(resp, vm)
	if !resp.Allowed || !slices.Equal(created.Finalizers, []string{"example.com/mine", kubevirtv1.VirtualMachineControllerFinalizer}) ||
		created.Spec.Template.Spec.Domain.Machine == nil || created.Spec.Template.Spec.Domain.Machine.Type != "q35" {
		t.Fatalf("created VM: allowed %v, finalizers %v, machine %+v", resp.Allowed, created.Finalizers, created.Spec.Template.Spec.Domain.Machine)
	}
	// An update of a VM whose finalizer is gone (being deleted, or removed by hand) adds nothing.
	resp = review(t, h, virtapicontract.PathVMMutate, admissionv1.AdmissionRequest{UID: "2", Operation: admissionv1.Update, Namespace: "ns", Object: raw(t, created)})
	if !resp.Allowed || resp.Patch != nil {
		t.Fatalf("update of a defaulted VM: %+v", resp)
	}
	created.Finalizers = nil
	if resp := review(t, h, virtapicontract.PathVMMutate, admissionv1.AdmissionRequest{UID: "3", Operation: admissionv1.Update, Namespace: "ns", Object: raw(t, created)}); apply(resp, created).Finalizers != nil {
		t.Errorf("an update got finalizers %s", resp.Patch)
	}
}
