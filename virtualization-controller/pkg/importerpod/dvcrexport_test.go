package importerpod

import (
	"context"
	"errors"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/d8virt/virtualization-controller/pkg/importer/contract"
	"github.com/d8virt/virtualization-controller/pkg/importerresult"
)

const exporterName = "vd-export-uid-1"

var exportFor = ExportFor{Labels: map[string]string{"uid": "uid-1"}, Annotations: map[string]string{"name": "tiny"}, UIDLabel: "uid"}

func exporterWorld(objs ...client.Object) (DVCRExporter, client.Client) {
	c := fake.NewClientBuilder().WithObjects(objs...).WithStatusSubresource(&corev1.Pod{}).Build()
	return DVCRExporter{Namespace: "d8v", Image: "importer:dev", PullerSecret: "dvcr-puller", TLSSecret: "dvcr-tls",
		Client: c, Reader: c, NewToken: func() (string, error) { return "exp0rt", nil }}, c
}

func exporterPod(uid string, status corev1.PodStatus) *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "d8v", Name: exporterName, Labels: map[string]string{"uid": uid}}, Status: status}
}

func exporterSecret(uid string) *corev1.Secret {
	return &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "d8v", Name: exporterName, Labels: map[string]string{"uid": uid}},
		Data: map[string][]byte{KeyExportToken: []byte("s3cret")}}
}

var ready = corev1.PodStatus{Phase: corev1.PodRunning, PodIP: "10.0.0.9", Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}}

func ended(reason contract.Reason, phase corev1.PodPhase) corev1.PodStatus {
	return corev1.PodStatus{Phase: phase, ContainerStatuses: []corev1.ContainerStatus{{Name: importerresult.Container, State: corev1.ContainerState{
		Terminated: &corev1.ContainerStateTerminated{Message: `{"reason":"` + string(reason) + `","message":"no such image"}`},
	}}}}
}

// Ensure takes one step a call: the Secret, the Pod, then the address once the Pod is ready; an
// exporter of another object goes; one that ended goes, with the failure of a failed one.
func TestEnsure(t *testing.T) {
	for _, tc := range []struct {
		name      string
		objs      []client.Object
		ok        bool
		failed    contract.Reason
		secret    bool // the Secret is there after the step
		pod       bool
		wantToken string
	}{
		{name: "nothing yet: the Secret", secret: true},
		{name: "the Secret: the Pod", objs: []client.Object{exporterSecret("uid-1")}, secret: true, pod: true},
		{name: "starting", objs: []client.Object{exporterSecret("uid-1"), exporterPod("uid-1", corev1.PodStatus{Phase: corev1.PodPending})}, secret: true, pod: true},
		{name: "ready", objs: []client.Object{exporterSecret("uid-1"), exporterPod("uid-1", ready)}, ok: true, secret: true, pod: true, wantToken: "s3cret"},
		{name: "another object's Secret goes", objs: []client.Object{exporterSecret("uid-0"), exporterPod("uid-0", ready)}},
		{name: "another object's Pod goes", objs: []client.Object{exporterSecret("uid-1"), exporterPod("uid-0", ready)}},
		{name: "failed: it goes, with its reason", objs: []client.Object{exporterSecret("uid-1"), exporterPod("uid-1", ended(contract.ReasonSourceNotFound, corev1.PodFailed))}, failed: contract.ReasonSourceNotFound},
		{name: "stopped from outside: it goes, to start again", objs: []client.Object{exporterSecret("uid-1"), exporterPod("uid-1", ended(contract.ReasonCompleted, corev1.PodSucceeded))}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e, c := exporterWorld(tc.objs...)
			exp, ok, err := e.Ensure(context.Background(), exporterName, exportFor, "dvcr.d8v.svc/cvi/tiny:latest")
			var failed *FailedError
			switch {
			case tc.failed != "":
				if !errors.As(err, &failed) || failed.Result.Reason != tc.failed {
					t.Fatalf("error %v, want the exporter's failure %s", err, tc.failed)
				}
			case err != nil:
				t.Fatal(err)
			}
			if ok != tc.ok || string(exp.Token) != tc.wantToken || (ok && exp.URL != "http://10.0.0.9:8090/export") {
				t.Errorf("ok %v, export %+v", ok, exp)
			}
			key := types.NamespacedName{Namespace: "d8v", Name: exporterName}
			secret, pod := &corev1.Secret{}, &corev1.Pod{}
			if err := c.Get(context.Background(), key, secret); apierrors.IsNotFound(err) == tc.secret {
				t.Errorf("secret there: %v, want %v", err == nil, tc.secret)
			}
			if err := c.Get(context.Background(), key, pod); apierrors.IsNotFound(err) == tc.pod {
				t.Errorf("pod there: %v, want %v", err == nil, tc.pod)
			}
			if tc.name == "nothing yet: the Secret" && (string(secret.Data[KeyExportToken]) != "exp0rt" || secret.Labels["uid"] != "uid-1") {
				t.Errorf("new secret %+v", secret)
			}
		})
	}
}

// The exporter's Pod: the importer serving the image with the puller's credentials and DVCR's CA
// mounted from their Secrets in the module's namespace, its token from its own, labelled and
// annotated for whom it serves.
func TestDVCRExporterPod(t *testing.T) {
	e, _ := exporterWorld()
	p := e.Pod(exporterName, exportFor, "dvcr.d8v.svc/cvi/tiny:latest")
	if p.Namespace != "d8v" || p.Labels["uid"] != "uid-1" || p.Labels["app.kubernetes.io/name"] != "dvcr-exporter" || p.Annotations["name"] != "tiny" {
		t.Fatalf("meta %+v", p.ObjectMeta)
	}
	args := map[string]bool{}
	for _, a := range p.Spec.Containers[0].Args {
		args[a] = true
	}
	for _, want := range []string{"--export-image=dvcr.d8v.svc/cvi/tiny:latest", "--source-auth-file=/etc/dvcr/pull/.dockerconfigjson",
		"--source-ca-bundle=/etc/dvcr/tls/ca.crt", "--export-token-file=/etc/exporter/export-token", "--export-address=:8090"} {
		if !args[want] {
			t.Errorf("no %s in %q", want, p.Spec.Containers[0].Args)
		}
	}
	secrets := map[string]string{}
	for _, v := range p.Spec.Volumes {
		secrets[v.Name] = v.Secret.SecretName
	}
	if secrets["token"] != exporterName || secrets["dvcr-pull"] != "dvcr-puller" || secrets["dvcr-tls"] != "dvcr-tls" {
		t.Errorf("volumes %v", secrets)
	}
	if exportFor.Labels["app.kubernetes.io/name"] != "" {
		t.Error("the caller's labels were changed")
	}
}
