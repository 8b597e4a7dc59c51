package cli

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/client-go/dynamic"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	"k8s.io/client-go/kubernetes"
	kubefake "k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/rest"
	clienttesting "k8s.io/client-go/testing"

	"github.com/d8virt/api/client/clientset/versioned"
	virtfake "github.com/d8virt/api/client/clientset/versioned/fake"
	v1alpha2 "github.com/d8virt/api/core/v1alpha2"
)

// fakeClients are fake clientsets in namespace ns.
type fakeClients struct {
	ns   string
	virt *virtfake.Clientset
	kube *kubefake.Clientset
}

func (f fakeClients) Namespace() (string, error) { return f.ns, nil }
func (f fakeClients) RESTConfig() (*rest.Config, error) {
	return &rest.Config{Host: "https://127.0.0.1:1"}, nil
}
func (f fakeClients) Virtualization() (versioned.Interface, error) { return f.virt, nil }
func (f fakeClients) Kube() (kubernetes.Interface, error)          { return f.kube, nil }
func (f fakeClients) Dynamic() (dynamic.Interface, error) {
	return dynamicfake.NewSimpleDynamicClient(runtime.NewScheme()), nil
}

// run runs the client's command line against the clients and returns its exit code, stdout
// and stderr.
func run(t *testing.T, c Clients, argv ...string) (int, string, string) {
	t.Helper()
	var out, errOut bytes.Buffer
	e := &env{name: "d8v", streams: genericiooptions.IOStreams{In: strings.NewReader(""), Out: &out, ErrOut: &errOut}, clients: c, flags: genericclioptions.NewConfigFlags(true), pollInterval: time.Millisecond}
	root := newRoot(e)
	root.SetArgs(argv)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	code := Execute(ctx, root)
	return code, out.String(), errOut.String()
}

func vm(name string, phase v1alpha2.MachinePhase) *v1alpha2.VirtualMachine {
	return &v1alpha2.VirtualMachine{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "prod"}, Status: v1alpha2.VirtualMachineStatus{Phase: phase}}
}

func newFakes(objs ...runtime.Object) fakeClients {
	return fakeClients{ns: "prod", virt: virtfake.NewSimpleClientset(objs...), kube: kubefake.NewClientset()}
}

// Bad command lines exit 2 with a message that says what is wrong and where to look.
func TestUsage(t *testing.T) {
	cases := []struct {
		name string
		argv []string
		want string
	}{
		{"unknown command", []string{"bogus"}, `unknown command "bogus": see d8v --help`},
		{"unknown flag", []string{"stop", "vm", "--bogus"}, "unknown flag: --bogus: see d8v stop --help"},
		{"start without a VM", []string{"start"}, "d8v start needs VM, got 0 argument(s): see d8v start --help"},
		{"stop with two VMs", []string{"stop", "a", "b"}, "d8v stop needs VM, got 2 argument(s)"},
		{"start takes no --force", []string{"start", "vm", "--force"}, "unknown flag: --force"},
		{"a timeout that is not one", []string{"restart", "vm", "--wait", "--timeout", "soon"}, `invalid argument "soon" for "--timeout"`},
		{"a negative timeout", []string{"migrate", "vm", "--timeout", "-1s"}, "--timeout must be positive, got -1s"},
		{"console of two VMs", []string{"console", "a", "b"}, "d8v console needs VM, got 2 argument(s)"},
		{"port-forward without a port", []string{"port-forward", "vm"}, "needs VM and at least one port"},
		{"port-forward to port 0", []string{"port-forward", "vm", "8080:0"}, `the remote port "0" is not a number from 1 to 65535`},
		{"port-forward from a bad local port", []string{"port-forward", "vm", "x:22"}, `the local port "x" is not a number from 0 to 65535`},
		{"port-forward --stdio of two ports", []string{"port-forward", "--stdio", "vm", "22", "80"}, "--stdio relays one port, got 2"},
		{"vnc on a port too high", []string{"vnc", "vm", "--port", "70000"}, "--port 70000 is not a port from 0 (any free one) to 65535"},
		{"ssh without a VM", []string{"ssh"}, "d8v ssh needs [USER@]VM"},
		{"ssh to user@", []string{"ssh", "cloud@"}, `"cloud@" is not [USER@]VM`},
		{"ssh to port 0", []string{"ssh", "vm", "--port", "0"}, "--port 0 is not a port from 1 to 65535"},
		{"scp between two local paths", []string{"scp", "a", "b"}, "exactly one of"},
		{"scp between two VMs", []string{"scp", "a:/x", "b:/y"}, "exactly one of"},
		{"addvolume of a kind that is none", []string{"addvolume", "vm", "disk", "--kind", "pvc"}, `--kind "pvc" is not VirtualDisk (vd), VirtualImage (vi) or ClusterVirtualImage (cvi)`},
		{"addvolume without a disk", []string{"addvolume", "vm"}, "d8v addvolume needs VM DISK, got 1 argument(s)"},
		{"removevolume without a disk", []string{"removevolume", "vm"}, "d8v removevolume needs VM DISK"},
		{"collect-debug-info of nothing", []string{"collect-debug-info"}, "d8v collect-debug-info needs VM"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			code, _, errOut := run(t, newFakes(), c.argv...)
			if code != ExitUsage {
				t.Errorf("exit %d, want %d; stderr %q", code, ExitUsage, errOut)
			}
			if !strings.Contains(errOut, c.want) || !strings.Contains(errOut, "--help") {
				t.Errorf("stderr %q, want it to contain %q and name the help", errOut, c.want)
			}
		})
	}
}

func TestHelpAndName(t *testing.T) {
	code, out, _ := run(t, newFakes())
	if code != ExitOK || !strings.Contains(out, "d8v stop myvm --wait") {
		t.Errorf("no arguments: exit %d, help %q", code, out)
	}
	for _, sub := range []string{"console", "vnc", "port-forward", "ssh", "scp", "start", "stop", "restart", "migrate", "evict", "addvolume", "removevolume", "collect-debug-info"} {
		code, out, _ := run(t, newFakes(), sub, "--help")
		if code != ExitOK || !strings.Contains(out, "Examples:") || !strings.Contains(out, "--kubeconfig") {
			t.Errorf("%s --help: exit %d\n%s", sub, code, out)
		}
	}
	for arg0, want := range map[string]string{"/usr/local/bin/kubectl-virtualization": "kubectl virtualization", "./bin/d8v": "d8v"} {
		if got := CommandName(arg0); got != want {
			t.Errorf("CommandName(%q) = %q, want %q", arg0, got, want)
		}
	}
}

func TestParseForward(t *testing.T) {
	cases := []struct {
		in   string
		want forward
		bad  bool
	}{
		{in: "8080:80", want: forward{8080, 80}},
		{in: "22", want: forward{22, 22}},
		{in: ":22", want: forward{0, 22}},
		{in: "0:22", want: forward{0, 22}},
		{in: "22:", bad: true},
		{in: "65536", bad: true},
		{in: "1:2:3", bad: true},
		{in: "-1:22", bad: true},
	}
	for _, c := range cases {
		got, err := parseForward(c.in)
		if (err != nil) != c.bad || got != c.want {
			t.Errorf("parseForward(%q) = %+v, %v; want %+v, bad %v", c.in, got, err, c.want, c.bad)
		}
	}
}

func TestSSHArgs(t *testing.T) {
	target := sshTarget{user: "cloud", vm: "web", namespace: "prod", port: 22}
	got := sshArgs("/opt/my bin/d8v", []string{"--kubeconfig=/k/admin.conf", "--context=it's"}, target, "/id", []string{"--", "uname", "-a"})
	want := []string{
		"-o", `ProxyCommand='/opt/my bin/d8v' port-forward --stdio --namespace=prod --kubeconfig=/k/admin.conf '--context=it'\''s' web 22`,
		"-i", "/id", "cloud@web.prod", "--", "uname", "-a",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("sshArgs:\n got %q\nwant %q", got, want)
	}
}

func TestSCPArgs(t *testing.T) {
	cases := []struct {
		src, dst  string
		recursive bool
		want      []string
		bad       bool
	}{
		{src: "./a.txt", dst: "cloud@web:/tmp/", want: []string{"-o", "ProxyCommand=d8v port-forward --stdio --namespace=prod web 2222", "./a.txt", "cloud@web.prod:/tmp/"}},
		{src: "web:/var/log", dst: "logs", recursive: true, want: []string{"-o", "ProxyCommand=d8v port-forward --stdio --namespace=prod web 2222", "-r", "web.prod:/var/log", "logs"}},
		{src: "./dir:x/file", dst: "web:", want: []string{"-o", "ProxyCommand=d8v port-forward --stdio --namespace=prod web 2222", "./dir:x/file", "web.prod:"}},
		{src: "a", dst: "b", bad: true},
		{src: "a:x", dst: "b:y", bad: true},
		{src: "@web:/x", dst: "y", bad: true},
	}
	for _, c := range cases {
		got, err := scpArgs("d8v", nil, "prod", 2222, "", c.recursive, c.src, c.dst)
		if (err != nil) != c.bad || strings.Join(got, "\n") != strings.Join(c.want, "\n") {
			t.Errorf("scpArgs(%q, %q) = %q, %v; want %q, bad %v", c.src, c.dst, got, err, c.want, c.bad)
		}
	}
}

// The lifecycle commands create a VirtualMachineOperation of their type; --force only where
// the type takes it, and a machine that is not there is named with what to do.
func TestOperationCreated(t *testing.T) {
	cases := []struct {
		argv  []string
		typ   v1alpha2.VMOPType
		force bool
	}{
		{[]string{"start", "web"}, v1alpha2.VMOPTypeStart, false},
		{[]string{"stop", "web", "--force"}, v1alpha2.VMOPTypeStop, true},
		{[]string{"restart", "web"}, v1alpha2.VMOPTypeRestart, false},
		{[]string{"migrate", "web"}, v1alpha2.VMOPTypeMigrate, false},
		{[]string{"evict", "web", "--force"}, v1alpha2.VMOPTypeEvict, true},
	}
	for _, c := range cases {
		t.Run(string(c.typ), func(t *testing.T) {
			f := newFakes(vm("web", v1alpha2.MachineRunning))
			code, out, errOut := run(t, f, c.argv...)
			if code != ExitOK {
				t.Fatalf("exit %d: %s", code, errOut)
			}
			ops, _ := f.virt.VirtualizationV1alpha2().VirtualMachineOperations("prod").List(context.Background(), metav1.ListOptions{})
			if len(ops.Items) != 1 {
				t.Fatalf("%d operations", len(ops.Items))
			}
			op := ops.Items[0]
			if op.Spec.Type != c.typ || op.Spec.VirtualMachineName != "web" || (op.Spec.Force != nil) != c.force || op.GenerateName != "web-"+strings.ToLower(string(c.typ))+"-" {
				t.Errorf("operation %+v", op)
			}
			if !strings.Contains(out, "follow it with: kubectl get vmop") {
				t.Errorf("stdout %q", out)
			}
		})
	}
	code, _, errOut := run(t, newFakes(), "start", "nope")
	if code != ExitError || !strings.Contains(errOut, "VirtualMachine prod/nope") || !strings.Contains(errOut, "kubectl get vm -n prod lists them") {
		t.Errorf("start of a missing VM: exit %d, %q", code, errOut)
	}
}

// --wait shows each change of the operation (the controller's steps, played by a reactor that
// advances the operation on each read) and ends with its end: 0 on Completed, 1 with the
// reason on Failed.
func TestOperationWait(t *testing.T) {
	completed := func(phase v1alpha2.VMOPPhase, reason, msg string) v1alpha2.VirtualMachineOperationStatus {
		st := metav1.ConditionFalse
		if phase == v1alpha2.VMOPPhaseCompleted {
			st = metav1.ConditionTrue
		}
		return v1alpha2.VirtualMachineOperationStatus{Phase: phase, Conditions: []metav1.Condition{{Type: "Completed", Status: st, Reason: reason, Message: msg}}}
	}
	cases := []struct {
		name  string
		steps []v1alpha2.VirtualMachineOperationStatus
		code  int
		want  []string
	}{
		{
			name: "completed",
			steps: []v1alpha2.VirtualMachineOperationStatus{
				{},
				{Phase: v1alpha2.VMOPPhasePending},
				{Phase: v1alpha2.VMOPPhasePending},
				completed(v1alpha2.VMOPPhaseInProgress, "OperationInProgress", "stopping"),
				completed(v1alpha2.VMOPPhaseCompleted, "OperationCompleted", ""),
			},
			code: ExitOK,
			want: []string{": Created, VirtualMachine Running", ": Pending, VirtualMachine Running", ": InProgress (OperationInProgress: stopping), VirtualMachine Running", ": Completed (OperationCompleted), VirtualMachine Running", "Stop of VirtualMachine prod/web completed"},
		},
		{
			name: "failed",
			steps: []v1alpha2.VirtualMachineOperationStatus{
				{Phase: v1alpha2.VMOPPhasePending},
				completed(v1alpha2.VMOPPhaseFailed, "NotApplicableForVirtualMachinePhase", "Operation type Stop is not applicable for VirtualMachine in phase Stopped"),
			},
			code: ExitError,
			want: []string{": Pending", "Stop of VirtualMachine prod/web failed: Operation type Stop is not applicable for VirtualMachine in phase Stopped (kubectl describe vmop"},
		},
		{
			name:  "superseded",
			steps: []v1alpha2.VirtualMachineOperationStatus{completed(v1alpha2.VMOPPhaseSuperseded, "Superseded", "Superseded by halt with type Start")},
			code:  ExitError,
			want:  []string{"was superseded: Superseded by halt with type Start"},
		},
		{
			name:  "never ends",
			steps: []v1alpha2.VirtualMachineOperationStatus{{Phase: v1alpha2.VMOPPhaseInProgress}},
			code:  ExitError,
			want:  []string{"has not ended (InProgress): context deadline exceeded; follow it with kubectl get vmop"},
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f := newFakes(vm("web", v1alpha2.MachineRunning))
			f.virt.PrependReactor("create", "virtualmachineoperations", func(a clienttesting.Action) (bool, runtime.Object, error) {
				op := a.(clienttesting.CreateAction).GetObject().(*v1alpha2.VirtualMachineOperation)
				op.Name = op.GenerateName + "x1"
				return false, nil, nil
			})
			reads := 0
			f.virt.PrependReactor("get", "virtualmachineoperations", func(a clienttesting.Action) (bool, runtime.Object, error) {
				obj, err := f.virt.Tracker().Get(a.GetResource(), a.GetNamespace(), a.(clienttesting.GetAction).GetName())
				if err != nil {
					return true, nil, err
				}
				op := obj.(*v1alpha2.VirtualMachineOperation).DeepCopy()
				op.Status = c.steps[min(reads, len(c.steps)-1)]
				reads++
				return true, op, nil
			})
			code, out, errOut := run(t, f, "stop", "web", "--wait", "--timeout", "200ms")
			if code != c.code {
				t.Errorf("exit %d, want %d; stderr %q", code, c.code, errOut)
			}
			all := out + errOut
			at := 0
			for _, w := range c.want {
				i := strings.Index(all[at:], w)
				if i < 0 {
					t.Errorf("output lacks %q after offset %d:\n%s", w, at, all)
					break
				}
				at += i + len(w)
			}
			if strings.Count(out, "Pending") > 1 {
				t.Errorf("an unchanged state reported twice:\n%s", out)
			}
		})
	}
}

// addvolume makes the attachment of the friendly disk and waits for it; removevolume deletes
// the attachments of that disk to that machine.
func TestVolumes(t *testing.T) {
	f := newFakes(vm("web", v1alpha2.MachineRunning))
	f.virt.PrependReactor("get", "virtualmachineblockdeviceattachments", func(a clienttesting.Action) (bool, runtime.Object, error) {
		obj, err := f.virt.Tracker().Get(a.GetResource(), a.GetNamespace(), a.(clienttesting.GetAction).GetName())
		if err != nil {
			return true, nil, err
		}
		b := obj.(*v1alpha2.VirtualMachineBlockDeviceAttachment).DeepCopy()
		b.Status.Phase = v1alpha2.BlockDeviceAttachmentPhaseAttached
		return true, b, nil
	})
	code, out, errOut := run(t, f, "addvolume", "web", "data", "--wait")
	if code != ExitOK || !strings.Contains(out, "VirtualDisk data attached to VirtualMachine prod/web") {
		t.Fatalf("addvolume: exit %d\n%s%s", code, out, errOut)
	}
	b, err := f.virt.VirtualizationV1alpha2().VirtualMachineBlockDeviceAttachments("prod").Get(context.Background(), "web-vd-data", metav1.GetOptions{})
	if err != nil || b.Spec.VirtualMachineName != "web" || b.Spec.BlockDeviceRef != (v1alpha2.VMBDAObjectRef{Kind: v1alpha2.VMBDAObjectRefKindVirtualDisk, Name: "data"}) {
		t.Fatalf("attachment %+v, %v", b, err)
	}
	if code, _, errOut := run(t, f, "removevolume", "web", "data", "--kind", "cvi"); code != ExitError || !strings.Contains(errOut, "no VirtualMachineBlockDeviceAttachment plugs ClusterVirtualImage data into VirtualMachine prod/web") {
		t.Errorf("removevolume of another kind: exit %d, %q", code, errOut)
	}
	if code, out, errOut := run(t, f, "removevolume", "web", "data"); code != ExitOK || !strings.Contains(out, "virtualmachineblockdeviceattachment/web-vd-data deleted") {
		t.Errorf("removevolume: exit %d\n%s%s", code, out, errOut)
	}
}
