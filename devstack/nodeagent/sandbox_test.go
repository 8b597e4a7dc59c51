package nodeagent

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestRequestedIP(t *testing.T) {
	for _, tc := range []struct {
		ann     map[string]string
		want    string
		wantErr string
	}{
		{ann: nil, want: "invalid IP"},
		{ann: map[string]string{RequestedIPAnnotation: "10.213.0.200"}, want: "10.213.0.200"},
		{ann: map[string]string{RequestedIPAnnotation: " 10.213.0.200\n"}, want: "10.213.0.200"},
		{ann: map[string]string{RequestedIPAnnotation: "fd00::1"}, wantErr: `annotation cni.cilium.io/ipAddress: "fd00::1" is not an IPv4 address`},
		{ann: map[string]string{RequestedIPAnnotation: ""}, wantErr: `annotation cni.cilium.io/ipAddress: "" is not an IPv4 address`},
	} {
		got, err := requestedIP(&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Annotations: tc.ann}})
		if tc.wantErr != "" {
			if err == nil || err.Error() != tc.wantErr {
				t.Errorf("%v: %v, want %q", tc.ann, err, tc.wantErr)
			}
			continue
		}
		if err != nil || got.String() != tc.want {
			t.Errorf("%v: %v, %v; want %s", tc.ann, got, err, tc.want)
		}
	}
}
