package webhooks

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
	kubevirtv1 "kubevirt.io/api/core/v1"
)

// TestValidateVolumeSources: KubeVirt's messages for volumes with no or several sources and for
// incomplete configMap, secret, serviceAccount, sysprep and ephemeral volumes.
func TestValidateVolumeSources(t *testing.T) {
	ref := &corev1.LocalObjectReference{Name: "x"}
	claim := &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "golden"}
	sa := func(name string) kubevirtv1.VolumeSource {
		return kubevirtv1.VolumeSource{ServiceAccount: &kubevirtv1.ServiceAccountVolumeSource{ServiceAccountName: name}}
	}
	tests := []struct {
		name      string
		sources   []kubevirtv1.VolumeSource // volumes v1, v2, ... after the root volume
		want      []string
		wantField string
	}{
		{name: "every config type, well formed", sources: []kubevirtv1.VolumeSource{
			{ConfigMap: &kubevirtv1.ConfigMapVolumeSource{LocalObjectReference: *ref}},
			{Secret: &kubevirtv1.SecretVolumeSource{SecretName: "s"}},
			{DownwardAPI: &kubevirtv1.DownwardAPIVolumeSource{}},
			sa("reader"),
			{Sysprep: &kubevirtv1.SysprepSource{Secret: ref}},
			{Sysprep: &kubevirtv1.SysprepSource{ConfigMap: ref}},
			{Ephemeral: &kubevirtv1.EphemeralVolumeSource{PersistentVolumeClaim: claim}},
		}},
		{name: "no source", sources: []kubevirtv1.VolumeSource{{}},
			want: []string{"spec.volumes[1] must have exactly one source type set"}, wantField: "spec.volumes[1]"},
		{name: "two sources", sources: []kubevirtv1.VolumeSource{{Secret: &kubevirtv1.SecretVolumeSource{SecretName: "s"}, EmptyDisk: &kubevirtv1.EmptyDiskSource{}}},
			want: []string{"spec.volumes[1] must have exactly one source type set"}, wantField: "spec.volumes[1]"},
		{name: "configMap without a name", sources: []kubevirtv1.VolumeSource{{ConfigMap: &kubevirtv1.ConfigMapVolumeSource{}}},
			want: []string{"spec.volumes[1].configMap.name is a required field"}, wantField: "spec.volumes[1].configMap.name"},
		{name: "secret without a name", sources: []kubevirtv1.VolumeSource{{Secret: &kubevirtv1.SecretVolumeSource{}}},
			want: []string{"spec.volumes[1].secret.secretName is a required field"}, wantField: "spec.volumes[1].secret.secretName"},
		{name: "serviceAccount without a name", sources: []kubevirtv1.VolumeSource{sa("")},
			want:      []string{"spec.volumes[1].serviceAccount.serviceAccountName is a required field"},
			wantField: "spec.volumes[1].serviceAccount.serviceAccountName"},
		{name: "two serviceAccount volumes", sources: []kubevirtv1.VolumeSource{sa("a"), sa("b")},
			want: []string{"spec.volumes must have max one serviceAccount volume set"}, wantField: "spec.volumes"},
		{name: "sysprep without a source", sources: []kubevirtv1.VolumeSource{{Sysprep: &kubevirtv1.SysprepSource{}}},
			want: []string{"Sysprep must have Secret or ConfigMap reference set"}, wantField: "spec.volumes[1].sysprep"},
		{name: "sysprep Secret without a name", sources: []kubevirtv1.VolumeSource{{Sysprep: &kubevirtv1.SysprepSource{Secret: &corev1.LocalObjectReference{}}}},
			want: []string{"spec.volumes[1].sysprep.secret.name is a required field"}, wantField: "spec.volumes[1].sysprep.secret.name"},
		{name: "ephemeral without a claim", sources: []kubevirtv1.VolumeSource{{Ephemeral: &kubevirtv1.EphemeralVolumeSource{}}},
			want:      []string{"spec.volumes[1].ephemeral.persistentVolumeClaim.claimName is a required field"},
			wantField: "spec.volumes[1].ephemeral.persistentVolumeClaim.claimName"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			spec := vmiSpec(func(s *kubevirtv1.VirtualMachineInstanceSpec) {
				for i, src := range tt.sources {
					s.Volumes = append(s.Volumes, kubevirtv1.Volume{Name: "v" + string(rune('1'+i)), VolumeSource: src})
				}
			})
			causes := ValidateVMISpec(field.NewPath("spec"), &spec)
			if got := messages(causes); strings.Join(got, "|") != strings.Join(tt.want, "|") {
				t.Fatalf("messages %q, want %q", got, tt.want)
			}
			if tt.wantField != "" && causes[0].Field != tt.wantField {
				t.Errorf("field %q, want %q", causes[0].Field, tt.wantField)
			}
		})
	}
}
