package vmistatus

import (
	"reflect"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kubevirtv1 "kubevirt.io/api/core/v1"

	"github.com/d8virt/kubevirt-core/pkg/launcherapi"
	"github.com/d8virt/kubevirt-core/pkg/vmicond"
)

func TestAgentConnectedCondition(t *testing.T) {
	earlier := metav1.NewTime(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	connected := kubevirtv1.VirtualMachineInstanceCondition{
		Type: kubevirtv1.VirtualMachineInstanceAgentConnected, Status: corev1.ConditionTrue, LastProbeTime: earlier,
	}
	osInfo := &kubevirtv1.VirtualMachineInstanceGuestOSInfo{ID: "d8v-guest", KernelRelease: "6.1.0"}
	tests := []struct {
		name      string
		phase     kubevirtv1.VirtualMachineInstancePhase
		had       []kubevirtv1.VirtualMachineInstanceCondition
		dom       func(*launcherapi.DomainStatus) *launcherapi.DomainStatus
		want      *kubevirtv1.VirtualMachineInstanceCondition // nil: absent
		wantProbe *metav1.Time                                // nil: now
		wantOS    string
	}{
		{
			name:  "agent connects: True, probed now",
			phase: kubevirtv1.Running,
			dom: func(d *launcherapi.DomainStatus) *launcherapi.DomainStatus {
				d.GuestAgentConnected, d.GuestOSInfo = true, osInfo
				return d
			},
			want: &connected, wantOS: "d8v-guest",
		},
		{
			name: "still connected: the condition is kept as it was", phase: kubevirtv1.Running,
			had:  []kubevirtv1.VirtualMachineInstanceCondition{connected},
			dom:  func(d *launcherapi.DomainStatus) *launcherapi.DomainStatus { d.GuestAgentConnected = true; return d },
			want: &connected, wantProbe: &earlier,
		},
		{
			name: "agent goes away: removed, OS info stays", phase: kubevirtv1.Running,
			had: []kubevirtv1.VirtualMachineInstanceCondition{connected},
			dom: func(d *launcherapi.DomainStatus) *launcherapi.DomainStatus { return d },
		},
		{
			name: "no agent ever: absent", phase: kubevirtv1.Scheduled,
			dom: func(d *launcherapi.DomainStatus) *launcherapi.DomainStatus { return d },
		},
		{
			name: "paused guest keeps its agent", phase: kubevirtv1.Running,
			had: []kubevirtv1.VirtualMachineInstanceCondition{connected},
			dom: func(d *launcherapi.DomainStatus) *launcherapi.DomainStatus {
				d.State, d.GuestAgentConnected = launcherapi.StatePaused, true
				return d
			},
			want: &connected, wantProbe: &earlier,
		},
		{
			name: "guest ended: removed", phase: kubevirtv1.Running,
			had: []kubevirtv1.VirtualMachineInstanceCondition{connected},
			dom: func(*launcherapi.DomainStatus) *launcherapi.DomainStatus { return ended(0, "Shutdown") },
		},
	}
	now := time.Date(2026, 2, 2, 10, 0, 0, 0, time.UTC)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			vmi := testVMI(tt.phase)
			vmi.Status.Conditions = tt.had
			vmi.Status.GuestOSInfo.ID = "before"
			st := Compute(vmi, testPod(corev1.PodRunning), tt.dom(dom(launcherapi.StateRunning)), now)
			got := vmicond.Get(st.Conditions, kubevirtv1.VirtualMachineInstanceAgentConnected)
			switch {
			case tt.want == nil && got != nil:
				t.Fatalf("AgentConnected = %+v, want none", got)
			case tt.want != nil && got == nil:
				t.Fatal("AgentConnected missing")
			case tt.want != nil:
				probe := metav1.NewTime(now)
				if tt.wantProbe != nil {
					probe = *tt.wantProbe
				}
				if got.Status != corev1.ConditionTrue || got.Reason != "" || !got.LastProbeTime.Equal(&probe) || !got.LastTransitionTime.IsZero() {
					t.Errorf("AgentConnected = %+v, want True probed at %s", got, probe)
				}
			}
			wantOS := tt.wantOS
			if wantOS == "" {
				wantOS = "before"
			}
			if st.GuestOSInfo.ID != wantOS {
				t.Errorf("guestOSInfo.id = %q, want %q", st.GuestOSInfo.ID, wantOS)
			}
		})
	}
}

func TestGuestInterfaces(t *testing.T) {
	tests := []struct {
		name  string
		guest []launcherapi.GuestInterface
		want  []kubevirtv1.VirtualMachineInstanceNetworkInterface
	}{
		{
			name: "no agent: the domain's view",
			want: []kubevirtv1.VirtualMachineInstanceNetworkInterface{
				{Name: "default", MAC: "52:54:00:00:00:01", IP: "10.213.0.7", IPs: []string{"10.213.0.7"}, PodInterfaceName: "eth0", InfoSource: InfoSourceDomain},
				{Name: "extra", MAC: "52:54:00:00:00:02", IP: "192.168.1.5", IPs: []string{"192.168.1.5"}, InfoSource: InfoSourceDomain},
			},
		},
		{
			name: "agent names both; the pod network keeps the Pod's IP, the other takes the guest's; extra NICs follow",
			guest: []launcherapi.GuestInterface{
				{InterfaceName: "eth0", MAC: "52:54:00:00:00:01", IPs: []string{"10.0.2.2", "fe80::1"}},
				{InterfaceName: "eth1", MAC: "52:54:00:00:00:02", IPs: []string{"192.168.1.9"}},
				{InterfaceName: "docker0", MAC: "02:42:00:00:00:01", IPs: []string{"172.17.0.1"}},
				{InterfaceName: "dummy0", MAC: "02:42:00:00:00:02"},
			},
			want: []kubevirtv1.VirtualMachineInstanceNetworkInterface{
				{Name: "default", MAC: "52:54:00:00:00:01", IP: "10.213.0.7", IPs: []string{"10.213.0.7"}, PodInterfaceName: "eth0", InterfaceName: "eth0", InfoSource: InfoSourceDomainAndGA},
				{Name: "extra", MAC: "52:54:00:00:00:02", IP: "192.168.1.9", IPs: []string{"192.168.1.9"}, InterfaceName: "eth1", InfoSource: InfoSourceDomainAndGA},
				{MAC: "02:42:00:00:00:01", IP: "172.17.0.1", IPs: []string{"172.17.0.1"}, InterfaceName: "docker0", InfoSource: InfoSourceGuestAgent},
				{MAC: "02:42:00:00:00:02", InterfaceName: "dummy0", InfoSource: InfoSourceGuestAgent},
			},
		},
		{
			name:  "no guest IP keeps the domain's",
			guest: []launcherapi.GuestInterface{{InterfaceName: "ens4", MAC: "52:54:00:00:00:02"}},
			want: []kubevirtv1.VirtualMachineInstanceNetworkInterface{
				{Name: "default", MAC: "52:54:00:00:00:01", IP: "10.213.0.7", IPs: []string{"10.213.0.7"}, PodInterfaceName: "eth0", InfoSource: InfoSourceDomain},
				{Name: "extra", MAC: "52:54:00:00:00:02", IP: "192.168.1.5", IPs: []string{"192.168.1.5"}, InterfaceName: "ens4", InfoSource: InfoSourceDomainAndGA},
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := dom(launcherapi.StateRunning)
			d.GuestAgentConnected = len(tt.guest) > 0
			d.GuestInterfaces = tt.guest
			st := Compute(testVMI(kubevirtv1.Running), testPod(corev1.PodRunning), d, time.Now())
			if !reflect.DeepEqual(st.Interfaces, tt.want) {
				t.Errorf("interfaces:\ngot  %+v\nwant %+v", st.Interfaces, tt.want)
			}
		})
	}
}
