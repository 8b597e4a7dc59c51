package importerpod

import (
	"context"
	"fmt"
	"maps"
	"path"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/d8virt/logopts"
	"github.com/d8virt/virtualization-controller/pkg/importer/contract"
	"github.com/d8virt/virtualization-controller/pkg/importerresult"
)

// An importer outside the module's namespace (a VirtualDisk's, an image's filler) that reads an
// image in DVCR reads it through a DVCR exporter: the importer binary with --export-image, in
// the module's namespace, which mounts the puller's credentials and DVCR's CA from their Secrets
// there and serves the image's disk with a token of its own. The importer holds only that token:
// DVCR's credentials never leave the module's namespace. The exporter lives while its importer
// does and is deleted with it.

const (
	// ExportPort is where an exporter serves its disk, named "export".
	ExportPort = 8090
	// KeyExportToken is the token in an exporter's Secret, and in its importer's.
	KeyExportToken = "export-token"
	exportTokenDir = "/etc/exporter"
	dvcrPullDir    = "/etc/dvcr/pull"
	dvcrTLSDir     = "/etc/dvcr/tls"
)

// ExportURL is where a running exporter serves its disk.
func ExportURL(exporter *corev1.Pod) string {
	return "http://" + exporter.Status.PodIP + ":" + strconv.Itoa(ExportPort) + contract.ExportPath
}

// ExportContainer is the importer container serving what args say, with the token its Secret
// (mounted as volume "token") holds.
func ExportContainer(image string, log logopts.Options, args ...string) corev1.Container {
	c := Container(image, log)
	c.Args = append(append(c.Args, args...),
		Flag(contract.FlagExportAddress, ":"+strconv.Itoa(ExportPort)),
		Flag(contract.FlagExportTokenFile, path.Join(exportTokenDir, KeyExportToken)),
		Flag(contract.FlagMetricsAddress, ":"+strconv.Itoa(MetricsPort)),
	)
	c.Ports = append(c.Ports, corev1.ContainerPort{Name: "export", ContainerPort: ExportPort, Protocol: corev1.ProtocolTCP})
	c.VolumeMounts = []corev1.VolumeMount{{Name: "token", MountPath: exportTokenDir, ReadOnly: true}}
	return c
}

// DVCRExporter runs DVCR exporters in Namespace, the module's.
type DVCRExporter struct {
	Namespace string
	// Image is the importer's image; Log how it logs.
	Image string
	Log   logopts.Options
	// PullerSecret (.dockerconfigjson) and TLSSecret (ca.crt) are DVCR's Secrets in Namespace.
	PullerSecret, TLSSecret string
	// Client writes; Reader reads past the cache (the exporters are in another namespace than
	// the objects they serve, so their Pods' events bring no reconcile: the caller looks again).
	Client   client.Client
	Reader   client.Reader
	NewToken func() (string, error)
}

// ExportFor is whom an exporter serves: the labels and annotations of its Pod and Secret (the
// serving object's, so that its Pod watch may find them) and the label that names that object.
type ExportFor struct {
	Labels, Annotations map[string]string
	UIDLabel            string
}

// Export is a ready exporter: where it serves and the token it takes.
type Export struct {
	URL   string
	Token []byte
}

// FailedError is an exporter that ended before serving: its image cannot be read.
type FailedError struct{ Result contract.Result }

func (e *FailedError) Error() string {
	return fmt.Sprintf("the DVCR exporter ended: %s: %s", e.Result.Reason, e.Result.Message)
}

// Secret is the exporter name's Secret: its token.
func (e DVCRExporter) Secret(name string, c ExportFor, token string) *corev1.Secret {
	return &corev1.Secret{ObjectMeta: e.meta(name, c), Type: corev1.SecretTypeOpaque, Data: map[string][]byte{KeyExportToken: []byte(token)}}
}

// Pod is the one builder of a DVCR exporter: the importer serving the disk of image (a DVCR
// reference at the read-only address) with the puller's credentials.
func (e DVCRExporter) Pod(name string, c ExportFor, image string) *corev1.Pod {
	container := ExportContainer(e.Image, e.Log,
		Flag(contract.FlagExportImage, image),
		Flag(contract.FlagSourceAuthFile, path.Join(dvcrPullDir, corev1.DockerConfigJsonKey)),
		Flag(contract.FlagSourceCABundle, path.Join(dvcrTLSDir, "ca.crt")),
	)
	container.VolumeMounts = append(container.VolumeMounts,
		corev1.VolumeMount{Name: "dvcr-pull", MountPath: dvcrPullDir, ReadOnly: true},
		corev1.VolumeMount{Name: "dvcr-tls", MountPath: dvcrTLSDir, ReadOnly: true})
	volumes := []corev1.Volume{
		{Name: "token", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: name}}},
		{Name: "dvcr-pull", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{
			SecretName: e.PullerSecret, Items: []corev1.KeyToPath{{Key: corev1.DockerConfigJsonKey, Path: corev1.DockerConfigJsonKey}},
		}}},
		{Name: "dvcr-tls", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{
			SecretName: e.TLSSecret, Items: []corev1.KeyToPath{{Key: "ca.crt", Path: "ca.crt"}},
		}}},
	}
	return &corev1.Pod{ObjectMeta: e.meta(name, c), Spec: Spec(container, volumes)}
}

func (e DVCRExporter) meta(name string, c ExportFor) metav1.ObjectMeta {
	l := maps.Clone(c.Labels)
	if l == nil {
		l = map[string]string{}
	}
	l["app.kubernetes.io/name"] = "dvcr-exporter"
	return metav1.ObjectMeta{Name: name, Namespace: e.Namespace, Labels: l, Annotations: maps.Clone(c.Annotations)}
}

// Ensure makes sure the exporter name serves image to c, one step a call: its Secret, its Pod,
// then its address once it is ready (ok). An exporter made for another object (at c.UIDLabel)
// goes first; one that ended is deleted, with a
// *FailedError when it failed (a Completed one was stopped from outside: it starts again).
func (e DVCRExporter) Ensure(ctx context.Context, name string, c ExportFor, image string) (exp Export, ok bool, err error) {
	key := types.NamespacedName{Namespace: e.Namespace, Name: name}
	secret := &corev1.Secret{}
	if err := e.Reader.Get(ctx, key, secret); err != nil && !apierrors.IsNotFound(err) {
		return Export{}, false, fmt.Errorf("DVCR exporter secret: %w", err)
	} else if err != nil {
		token, err := e.NewToken()
		if err != nil {
			return Export{}, false, fmt.Errorf("export token: %w", err)
		}
		secret = e.Secret(name, c, token)
		if err := e.Client.Create(ctx, secret); err != nil && !apierrors.IsAlreadyExists(err) {
			return Export{}, false, fmt.Errorf("create DVCR exporter secret: %w", err)
		}
		return Export{}, false, nil
	}
	if secret.Labels[c.UIDLabel] != c.Labels[c.UIDLabel] {
		return Export{}, false, e.Delete(ctx, name)
	}
	pod := &corev1.Pod{}
	err = e.Reader.Get(ctx, key, pod)
	switch {
	case apierrors.IsNotFound(err):
		pod = e.Pod(name, c, image)
		if err := e.Client.Create(ctx, pod); err != nil && !apierrors.IsAlreadyExists(err) {
			return Export{}, false, fmt.Errorf("create DVCR exporter pod: %w", err)
		}
		log.FromContext(ctx).Info("DVCR exporter pod created", "pod", e.Namespace+"/"+name, "image", image)
		return Export{}, false, nil
	case err != nil:
		return Export{}, false, fmt.Errorf("DVCR exporter pod: %w", err)
	case pod.Labels[c.UIDLabel] != c.Labels[c.UIDLabel]:
		return Export{}, false, e.Delete(ctx, name)
	case importerresult.Done(pod):
		res := importerresult.Of(pod)
		if err := e.Delete(ctx, name); err != nil {
			return Export{}, false, err
		}
		if res.Reason != contract.ReasonCompleted {
			return Export{}, false, &FailedError{Result: res}
		}
		return Export{}, false, nil
	case pod.Status.PodIP == "" || !Ready(pod):
		return Export{}, false, nil
	}
	return Export{URL: ExportURL(pod), Token: secret.Data[KeyExportToken]}, true, nil
}

// Delete deletes the exporter name's Pod and Secret, if they are there.
func (e DVCRExporter) Delete(ctx context.Context, name string) error {
	m := metav1.ObjectMeta{Namespace: e.Namespace, Name: name}
	for _, obj := range []client.Object{&corev1.Pod{ObjectMeta: m}, &corev1.Secret{ObjectMeta: m}} {
		if err := e.Client.Delete(ctx, obj); err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("delete DVCR exporter: %w", err)
		}
	}
	return nil
}
