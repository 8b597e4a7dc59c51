package subresources

import (
	"net/http"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	kubevirtv1 "kubevirt.io/api/core/v1"
)

func TestValidatePortForward(t *testing.T) {
	paused := vmi(kubevirtv1.Running)
	paused.Status.Conditions = []kubevirtv1.VirtualMachineInstanceCondition{{Type: kubevirtv1.VirtualMachineInstancePaused, Status: corev1.ConditionTrue}}
	for _, tc := range []struct {
		name     string
		vmi      *kubevirtv1.VirtualMachineInstance
		wantCode int32
		wantMsg  string
	}{
		{"running", vmi(kubevirtv1.Running), 0, ""},
		{"scheduled", vmi(kubevirtv1.Scheduled), http.StatusBadRequest, "Unable to connect to VirtualMachineInstance because phase is Scheduled instead of Running"},
		{"succeeded", vmi(kubevirtv1.Succeeded), http.StatusBadRequest, "phase is Succeeded"},
		{"paused", paused, http.StatusConflict, "VMI is paused"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := ValidatePortForward(tc.vmi)
			if tc.wantCode == 0 {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			if err == nil || err.ErrStatus.Code != tc.wantCode || !strings.Contains(err.Error(), tc.wantMsg) {
				t.Errorf("got %v, want %d %q", err, tc.wantCode, tc.wantMsg)
			}
		})
	}
}
