package integration

import (
	"bytes"
	"context"
	"crypto/tls"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/client-go/util/retry"
	kubevirtv1 "kubevirt.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/d8virt/devstack/testenv"
	"github.com/d8virt/kube-api-rewriter/pkg/proxy"
	"github.com/d8virt/kube-api-rewriter/pkg/rewrite"
	"github.com/d8virt/kube-api-rewriter/pkg/rules"
	"github.com/d8virt/kubevirt-core/pkg/virtapi/webhooks"
	"github.com/d8virt/kubevirt-core/pkg/virtapicontract"
)

const renamedGroup = "internal.virtualization.deckhouse.io"

// startWebhooks runs virt-api's webhook server on loopback behind a real rewriter webhook listener
// and registers webhook configurations for the renamed kinds, scoped to ns, as production does.
func startWebhooks(t *testing.T, fx *fixture, ns string) {
	t.Helper()
	ctx := testenv.Context(t)
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))

	srv := &webhooks.Server{Reader: fx.client, SystemUsers: map[string]bool{}, Log: log}
	compCert, _ := testenv.ServingCert(t, []string{"localhost"}, []net.IP{net.ParseIP("127.0.0.1")})
	compLn, err := tls.Listen("tcp", "127.0.0.1:0", &tls.Config{Certificates: []tls.Certificate{compCert}})
	if err != nil {
		t.Fatal(err)
	}
	comp := &http.Server{Handler: srv.Handler(), ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = comp.Serve(compLn) }()
	t.Cleanup(func() { _ = comp.Close() })

	gw := fx.env.Net.GatewayIP().String()
	hookCert, caPEM := testenv.ServingCert(t, []string{"virt-api-webhooks"}, []net.IP{net.ParseIP(gw)})
	hookLn, err := tls.Listen("tcp", net.JoinHostPort(gw, "0"), &tls.Config{Certificates: []tls.Certificate{hookCert}})
	if err != nil {
		t.Fatal(err)
	}
	target, _ := url.Parse("https://" + compLn.Addr().String())
	hook := &http.Server{ReadHeaderTimeout: 10 * time.Second, Handler: &proxy.Webhook{
		Rewriter: rewrite.New(rules.Default()), Target: target, Log: log,
		// The component's certificate is self-signed for loopback; the sidecar trusts its pod.
		Client: &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}},
	}}
	go func() { _ = hook.Serve(hookLn) }()
	t.Cleanup(func() { _ = hook.Close() })
	base := "https://" + hookLn.Addr().String()

	none := admissionregistrationv1.SideEffectClassNone
	fail := admissionregistrationv1.Fail
	scope := &metav1.LabelSelector{MatchLabels: map[string]string{"kubernetes.io/metadata.name": ns}}
	create, update := admissionregistrationv1.Create, admissionregistrationv1.Update
	rule := func(resource string, ops ...admissionregistrationv1.OperationType) []admissionregistrationv1.RuleWithOperations {
		return []admissionregistrationv1.RuleWithOperations{{Operations: ops, Rule: admissionregistrationv1.Rule{
			APIGroups: []string{renamedGroup}, APIVersions: []string{"v1"}, Resources: []string{"internalvirtualization" + resource},
		}}}
	}
	clientConfig := func(path string) admissionregistrationv1.WebhookClientConfig {
		u := base + path
		return admissionregistrationv1.WebhookClientConfig{URL: &u, CABundle: caPEM}
	}
	validating := func(name, path string, rules []admissionregistrationv1.RuleWithOperations) admissionregistrationv1.ValidatingWebhook {
		return admissionregistrationv1.ValidatingWebhook{Name: name + ".test.kubevirt.io", ClientConfig: clientConfig(path), Rules: rules,
			SideEffects: &none, FailurePolicy: &fail, NamespaceSelector: scope, AdmissionReviewVersions: []string{"v1"}}
	}
	mutating := func(name, path string, rules []admissionregistrationv1.RuleWithOperations) admissionregistrationv1.MutatingWebhook {
		return admissionregistrationv1.MutatingWebhook{Name: name + ".test.kubevirt.io", ClientConfig: clientConfig(path), Rules: rules,
			SideEffects: &none, FailurePolicy: &fail, NamespaceSelector: scope, AdmissionReviewVersions: []string{"v1"}}
	}
	admission := fx.env.Kube.AdmissionregistrationV1()
	vwc, err := admission.ValidatingWebhookConfigurations().Create(ctx, &admissionregistrationv1.ValidatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{GenerateName: "virt-api-test-"},
		Webhooks: []admissionregistrationv1.ValidatingWebhook{
			validating("vmi-create", virtapicontract.PathVMICreate, rule("virtualmachineinstances", create)),
			validating("vmi-update", virtapicontract.PathVMIUpdate, rule("virtualmachineinstances", update)),
			validating("vm", virtapicontract.PathVM, rule("virtualmachines", create, update)),
			validating("vmirs", virtapicontract.PathVMIRS, rule("virtualmachineinstancereplicasets", create, update)),
			validating("vmim", virtapicontract.PathMigration, rule("virtualmachineinstancemigrations", create)),
			validating("preset", virtapicontract.PathPreset, rule("virtualmachineinstancepresets", create, update)),
		},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = admission.ValidatingWebhookConfigurations().Delete(context.Background(), vwc.Name, metav1.DeleteOptions{})
	})
	mwc, err := admission.MutatingWebhookConfigurations().Create(ctx, &admissionregistrationv1.MutatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{GenerateName: "virt-api-test-"},
		Webhooks: []admissionregistrationv1.MutatingWebhook{
			mutating("vmi-mutate", virtapicontract.PathVMIMutate, rule("virtualmachineinstances", create)),
			mutating("vm-mutate", virtapicontract.PathVMMutate, rule("virtualmachines", create, update)),
		},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = admission.MutatingWebhookConfigurations().Delete(context.Background(), mwc.Name, metav1.DeleteOptions{})
	})

	// Configurations take effect asynchronously: wait until a probe is denied, then until a probe
	// comes back mutated (the two configurations are picked up independently).
	probeMsg := "spec.domain.devices.disks[0].Name 'probe' not found."
	err = wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 90*time.Second, true, func(ctx context.Context) (bool, error) {
		probe := newVMI(ns, "")
		probe.GenerateName = "probe-"
		probe.Spec.Domain.Devices.Disks = []kubevirtv1.Disk{{Name: "probe"}}
		if err := fx.client.Create(ctx, probe); err == nil {
			_ = fx.client.Delete(ctx, probe)
			return false, nil
		} else {
			return strings.Contains(err.Error(), probeMsg), nil
		}
	})
	if err != nil {
		t.Fatalf("validating webhooks never became active: %v", err)
	}
	err = wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 90*time.Second, true, func(ctx context.Context) (bool, error) {
		probe := newVMI(ns, "")
		probe.GenerateName = "probe-"
		if err := fx.client.Create(ctx, probe); err != nil {
			return false, err
		}
		_ = fx.client.Delete(ctx, probe)
		return probe.Spec.Domain.Machine != nil, nil
	})
	if err != nil {
		t.Fatalf("mutating webhooks never became active: %v", err)
	}
}

func TestWebhooks(t *testing.T) {
	fx := setup(t)
	ctx := testenv.Context(t)
	ns := fx.env.Namespace(t)
	startWebhooks(t, fx, ns)
	c := fx.client

	halted, yes := kubevirtv1.RunStrategyHalted, true
	newVM := func(name string) *kubevirtv1.VirtualMachine {
		tmpl := newVMI(ns, name)
		return &kubevirtv1.VirtualMachine{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
			Spec: kubevirtv1.VirtualMachineSpec{RunStrategy: &halted, Template: &kubevirtv1.VirtualMachineInstanceTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: tmpl.Labels}, Spec: tmpl.Spec,
			}},
		}
	}

	t.Run("denials arrive verbatim", func(t *testing.T) {
		noMemory := newVMI(ns, "no-memory")
		noMemory.Spec.Domain.Resources.Requests = nil
		noVolume := newVMI(ns, "no-volume")
		noVolume.Spec.Domain.Devices.Disks = []kubevirtv1.Disk{{Name: "x"}}
		bigUserData := newVMI(ns, "big-userdata")
		bigUserData.Spec.Volumes = []kubevirtv1.Volume{{Name: "ci", VolumeSource: kubevirtv1.VolumeSource{
			CloudInitNoCloud: &kubevirtv1.CloudInitNoCloudSource{UserData: strings.Repeat("#", 2049)},
		}}}
		dupVolumes := newVMI(ns, "dup-volumes")
		ci := kubevirtv1.Volume{Name: "ci", VolumeSource: kubevirtv1.VolumeSource{CloudInitNoCloud: &kubevirtv1.CloudInitNoCloudSource{UserData: "#cloud-config"}}}
		dupVolumes.Spec.Volumes = []kubevirtv1.Volume{ci, ci}
		noSecretName := newVMI(ns, "no-secret-name")
		noSecretName.Spec.Volumes = append(noSecretName.Spec.Volumes, kubevirtv1.Volume{Name: "sec", VolumeSource: kubevirtv1.VolumeSource{
			Secret: &kubevirtv1.SecretVolumeSource{}}})
		twoAccounts := newVM("two-accounts")
		for _, name := range []string{"sa1", "sa2"} {
			twoAccounts.Spec.Template.Spec.Volumes = append(twoAccounts.Spec.Template.Spec.Volumes, kubevirtv1.Volume{Name: name,
				VolumeSource: kubevirtv1.VolumeSource{ServiceAccount: &kubevirtv1.ServiceAccountVolumeSource{ServiceAccountName: name}}})
		}
		both := newVM("both")
		both.Spec.Running = &yes
		vmNoVolume := newVM("vm-no-volume")
		vmNoVolume.Spec.Template.Spec.Domain.Devices.Disks = []kubevirtv1.Disk{{Name: "x"}}
		rs := &kubevirtv1.VirtualMachineInstanceReplicaSet{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "rs"},
			Spec: kubevirtv1.VirtualMachineInstanceReplicaSetSpec{
				Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "other"}},
				Template: &kubevirtv1.VirtualMachineInstanceTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "rs"}}, Spec: newVMI(ns, "rs").Spec},
			},
		}
		vmim := &kubevirtv1.VirtualMachineInstanceMigration{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "mig"}}
		preset := &kubevirtv1.VirtualMachineInstancePreset{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "no-domain"},
			Spec: kubevirtv1.VirtualMachineInstancePresetSpec{Selector: metav1.LabelSelector{MatchLabels: map[string]string{"a": "b"}}}}
		tests := []struct {
			name string
			obj  client.Object
			want string
		}{
			{"vmi disk without volume", noVolume, "spec.domain.devices.disks[0].Name 'x' not found."},
			{"vmi without memory", noMemory, "no memory requested, at least one of 'spec.domain.memory.guest', 'spec.domain.memory.hugepages.size' or 'spec.domain.resources.requests.memory' must be set"},
			{"vmi userdata too large", bigUserData, "spec.volumes[0].cloudInitNoCloud userdata exceeds 2048 byte limit. Should use UserDataSecretRef for larger data."},
			{"vmi duplicate volumes", dupVolumes, "spec.volumes[1] and spec.volumes[0] must not have the same Name."},
			{"vmi secret volume without a name", noSecretName, "spec.volumes[0].secret.secretName is a required field"},
			{"vm template with two serviceAccount volumes", twoAccounts, "spec.template.spec.volumes must have max one serviceAccount volume set"},
			{"vm running and runStrategy", both, "Running and RunStrategy are mutually exclusive. Note that Running is deprecated, please use RunStrategy instead"},
			{"vm template disk without volume", vmNoVolume, "spec.template.spec.domain.devices.disks[0].Name 'x' not found."},
			{"vmirs selector mismatch", rs, "selector does not match labels."},
			{"vmim without vmi", vmim, "vmiName is missing"},
			{"preset without domain", preset, "missing domain."},
		}
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				err := c.Create(ctx, tt.obj)
				if err == nil || !strings.Contains(err.Error(), "denied the request: "+tt.want) {
					t.Fatalf("create %s: %v, want the message %q", tt.obj.GetName(), err, tt.want)
				}
			})
		}
	})

	t.Run("a migration of a VMI that cannot migrate live is denied with the condition's words", func(t *testing.T) {
		vmi := newVMI(ns, "pinned")
		if err := c.Create(ctx, vmi); err != nil {
			t.Fatal(err)
		}
		const want = "Cannot migrate VMI, Reason: DisksNotLiveMigratable, Message: cannot migrate VMI: PVC root is not shared"
		n := 0
		// The condition is virt-handler's; here the test sets it (again, should the VMI's
		// controller write the status in between).
		eventually(t, "migration denied", func(ctx context.Context) error {
			if err := c.Get(ctx, client.ObjectKeyFromObject(vmi), vmi); err != nil {
				return err
			}
			vmi.Status.Conditions = append(vmi.Status.Conditions, kubevirtv1.VirtualMachineInstanceCondition{
				Type: kubevirtv1.VirtualMachineInstanceIsMigratable, Status: corev1.ConditionFalse,
				Reason: kubevirtv1.VirtualMachineInstanceReasonDisksNotMigratable, Message: "cannot migrate VMI: PVC root is not shared"})
			if err := c.Update(ctx, vmi); err != nil { // VMIs have no status subresource
				return err
			}
			n++
			m := &kubevirtv1.VirtualMachineInstanceMigration{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprintf("pinned-%d", n)},
				Spec: kubevirtv1.VirtualMachineInstanceMigrationSpec{VMIName: "pinned"}}
			err := c.Create(ctx, m)
			if err == nil || !strings.Contains(err.Error(), "denied the request: "+want) {
				return fmt.Errorf("create a migration: %v, want the message %q", err, want)
			}
			return nil
		})
	})

	t.Run("VMI spec update by a user is denied", func(t *testing.T) {
		vmi := newVMI(ns, "update")
		if err := c.Create(ctx, vmi); err != nil {
			t.Fatal(err)
		}
		err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
			if err := c.Get(ctx, client.ObjectKeyFromObject(vmi), vmi); err != nil {
				return err
			}
			vmi.Spec.Hostname = "changed"
			return c.Update(ctx, vmi)
		})
		if err == nil || !strings.Contains(err.Error(), "denied the request: update of VMI object is restricted") {
			t.Fatalf("spec update: %v", err)
		}
	})

	t.Run("a created VMI has KubeVirt's defaults", func(t *testing.T) {
		vmi := newVMI(ns, "defaults")
		vmi.Spec.Volumes = []kubevirtv1.Volume{{Name: "root", VolumeSource: kubevirtv1.VolumeSource{ContainerDisk: &kubevirtv1.ContainerDiskSource{Image: "img:1"}}}}
		if err := c.Create(ctx, vmi); err != nil {
			t.Fatal(err)
		}
		got := &kubevirtv1.VirtualMachineInstance{}
		if err := c.Get(ctx, client.ObjectKeyFromObject(vmi), got); err != nil {
			t.Fatal(err)
		}
		s := got.Spec
		if s.Domain.Machine == nil || s.Domain.Machine.Type != "q35" {
			t.Errorf("machine %+v", s.Domain.Machine)
		}
		if s.Domain.Memory == nil || s.Domain.Memory.Guest == nil || s.Domain.Memory.Guest.String() != "128Mi" {
			t.Errorf("memory %+v", s.Domain.Memory)
		}
		if cpu := s.Domain.CPU; cpu == nil || cpu.Sockets != 1 || cpu.Cores != 1 || cpu.Threads != 1 {
			t.Errorf("cpu %+v", cpu)
		}
		if len(s.Networks) != 1 || s.Networks[0].Pod == nil || len(s.Domain.Devices.Interfaces) != 1 || s.Domain.Devices.Interfaces[0].Masquerade == nil {
			t.Errorf("networks %+v interfaces %+v", s.Networks, s.Domain.Devices.Interfaces)
		}
		if d := s.Domain.Devices.Disks; len(d) != 1 || d[0].Name != "root" || d[0].Disk == nil || d[0].Disk.Bus != kubevirtv1.DiskBusVirtio {
			t.Errorf("disks %+v", d)
		}
	})

	t.Run("a preset is applied on create", func(t *testing.T) {
		p := &kubevirtv1.VirtualMachineInstancePreset{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "two-cores"},
			Spec: kubevirtv1.VirtualMachineInstancePresetSpec{
				Selector: metav1.LabelSelector{MatchLabels: map[string]string{"flavor": "small"}},
				Domain:   &kubevirtv1.DomainSpec{CPU: &kubevirtv1.CPU{Cores: 2}},
			},
		}
		if err := c.Create(ctx, p); err != nil {
			t.Fatal(err)
		}
		vmi := newVMI(ns, "preset")
		vmi.Labels["flavor"] = "small"
		if err := c.Create(ctx, vmi); err != nil {
			t.Fatal(err)
		}
		if vmi.Spec.Domain.CPU == nil || vmi.Spec.Domain.CPU.Cores != 2 {
			t.Errorf("cpu %+v, want the preset's 2 cores", vmi.Spec.Domain.CPU)
		}
		if got := vmi.Annotations["virtualmachinepreset.kubevirt.io/two-cores"]; got != "kubevirt.io/v1" {
			t.Errorf("annotations %v", vmi.Annotations)
		}
		other := newVMI(ns, "no-preset")
		if err := c.Create(ctx, other); err != nil {
			t.Fatal(err)
		}
		if _, ok := other.Annotations["virtualmachinepreset.kubevirt.io/two-cores"]; ok || other.Spec.Domain.CPU.Cores != 1 {
			t.Errorf("preset applied to a VMI it does not select: %v %+v", other.Annotations, other.Spec.Domain.CPU)
		}
	})

	t.Run("kubectl sees the message verbatim", func(t *testing.T) {
		kubectl := filepath.Join(os.Getenv("HOME"), ".cache", "d8-virtualization", "k8s-v1.37.2", "bin", "kubectl")
		if _, err := os.Stat(kubectl); err != nil {
			t.Skipf("no kubectl: %v", err)
		}
		kc := clientcmdapi.NewConfig()
		kc.Clusters["sidecar"] = &clientcmdapi.Cluster{Server: fx.sidecar.Host}
		kc.AuthInfos["sidecar"] = &clientcmdapi.AuthInfo{}
		kc.Contexts["sidecar"] = &clientcmdapi.Context{Cluster: "sidecar", AuthInfo: "sidecar", Namespace: ns}
		kc.CurrentContext = "sidecar"
		path := filepath.Join(t.TempDir(), "kubeconfig")
		if err := clientcmd.WriteToFile(*kc, path); err != nil {
			t.Fatal(err)
		}
		manifest := `apiVersion: kubevirt.io/v1
kind: VirtualMachine
metadata:
  name: kubectl-both
spec:
  running: false
  runStrategy: Halted
  template:
    spec:
      domain:
        devices: {}
        resources:
          requests:
            memory: 128Mi
`
		cmd := exec.CommandContext(ctx, kubectl, "--kubeconfig", path, "apply", "-f", "-")
		cmd.Stdin = strings.NewReader(manifest)
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		err := cmd.Run()
		// The denial is a 422 with causes, so kubectl prints the cause's field and message, as it
		// does against upstream KubeVirt.
		want := "The request is invalid: spec.running: Running and RunStrategy are mutually exclusive. Note that Running is deprecated, please use RunStrategy instead"
		if err == nil || !strings.Contains(out.String(), want) {
			t.Fatalf("kubectl apply: %v\n%s\nwant %q", err, out.String(), want)
		}
	})
}
