package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes"
	kubevirtv1 "kubevirt.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/d8virt/kubevirt-core/pkg/vmicond"
)

// testGuestAgent runs the tiny guest's qemu-ga: the handler reports it connected with the guest's
// OS and NIC names in the VMI, and the guestosinfo, userlist and filesystemlist subresources
// answer through the whole chain (rewriter, apiserver, APIService, virt-api, virt-handler,
// launcher, libvirt, agent) in KubeVirt's types.
func testGuestAgent(t *testing.T, c *cluster, kc client.Client, ns string) {
	vm := newVM(ns, "agent")
	// The host name comes from the user-data, so the agent's answer is the guest's own.
	vm.Spec.Template.Spec.Volumes[1].CloudInitNoCloud.UserData = "#cloud-config\nhostname: agent-host\n"
	createVM(t, kc, vm)
	waitRunning(t, kc, vm.Namespace, vm.Name, "")

	vmi := &kubevirtv1.VirtualMachineInstance{}
	eventually(t, 3*time.Minute, "AgentConnected and guestOSInfo", func(ctx context.Context) error {
		if err := kc.Get(ctx, client.ObjectKeyFromObject(vm), vmi); err != nil {
			return err
		}
		cond := vmicond.Get(vmi.Status.Conditions, kubevirtv1.VirtualMachineInstanceAgentConnected)
		if cond == nil || cond.Status != corev1.ConditionTrue {
			return fmt.Errorf("AgentConnected %+v", cond)
		}
		if vmi.Status.GuestOSInfo.ID == "" {
			return fmt.Errorf("no guestOSInfo yet")
		}
		if len(vmi.Status.Interfaces) == 0 || vmi.Status.Interfaces[0].InterfaceName == "" {
			return fmt.Errorf("interfaces without the guest's names: %+v", vmi.Status.Interfaces)
		}
		return nil
	})
	osInfo := vmi.Status.GuestOSInfo
	if osInfo.ID != "d8v-guest" || osInfo.PrettyName != "d8v test guest" || !strings.HasSuffix(osInfo.KernelRelease, "-cloud-amd64") || osInfo.Machine != "x86_64" {
		t.Errorf("status.guestOSInfo = %+v", osInfo)
	}
	if iface := vmi.Status.Interfaces[0]; iface.Name != "default" || iface.InterfaceName != "eth0" || iface.InfoSource != "domain, guest-agent" || iface.IP == "" {
		t.Errorf("pod interface = %+v", iface)
	}

	kube, err := kubernetes.NewForConfig(c.rest)
	if err != nil {
		t.Fatal(err)
	}
	get := func(sub string, into any) string {
		t.Helper()
		path := fmt.Sprintf("/apis/subresources.kubevirt.io/v1/namespaces/%s/virtualmachineinstances/%s/%s", vm.Namespace, vm.Name, sub)
		var raw []byte
		eventually(t, time.Minute, "GET "+sub, func(ctx context.Context) error {
			raw, err = kube.CoreV1().RESTClient().Get().AbsPath(path).DoRaw(ctx)
			return err
		})
		if err := json.Unmarshal(raw, into); err != nil {
			t.Fatalf("%s: %v\n%s", sub, err, raw)
		}
		return string(raw)
	}

	info := &kubevirtv1.VirtualMachineInstanceGuestAgentInfo{}
	raw := get("guestosinfo", info)
	if info.Hostname != "agent-host" || info.OS.ID != "d8v-guest" || info.OS.KernelRelease != osInfo.KernelRelease ||
		!strings.HasPrefix(info.GAVersion, "7.") || info.Timezone == "" || len(info.SupportedCommands) == 0 {
		t.Errorf("guestosinfo = %s", raw)
	}
	// The lists are never null: clients range over their items.
	users := &kubevirtv1.VirtualMachineInstanceGuestOSUserList{}
	if raw := get("userlist", users); !strings.Contains(raw, `"items":[`) {
		t.Errorf("userlist = %s", raw)
	}
	fsList := &kubevirtv1.VirtualMachineInstanceFileSystemList{}
	if raw := get("filesystemlist", fsList); !strings.Contains(raw, `"items":[`) {
		t.Errorf("filesystemlist = %s", raw)
	}
	t.Logf("guest agent %s on %s (%s); %d users, %d filesystems", info.GAVersion, info.Hostname, info.OS.KernelRelease, len(users.Items), len(fsList.Items))
}
