package nodeagent

import (
	"fmt"
	"math"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// Expand replaces $(VAR) references the way kubelet does for env values, command and args:
// $(VAR) becomes VAR's value when mapping knows VAR and stays as written otherwise; $$ is an
// escaped $; any other $ is kept.
func Expand(input string, mapping func(string) (string, bool)) string {
	var b strings.Builder
	for i := 0; i < len(input); i++ {
		if input[i] != '$' || i+1 >= len(input) {
			b.WriteByte(input[i])
			continue
		}
		switch next := input[i+1]; next {
		case '$':
			b.WriteByte('$')
			i++
		case '(':
			end := strings.IndexByte(input[i+2:], ')')
			if end < 0 {
				// Not closed: "$(" is literal, scanning goes on after it.
				b.WriteString("$(")
				i++
				continue
			}
			name := input[i+2 : i+2+end]
			if v, ok := mapping(name); ok && name != "" {
				b.WriteString(v)
			} else {
				b.WriteString(input[i : i+3+end])
			}
			i += 2 + end
		default:
			b.WriteByte('$')
			b.WriteByte(next)
			i++
		}
	}
	return b.String()
}

// envList is an ordered environment where a later definition replaces an earlier one in place.
type envList struct {
	names  []string
	values map[string]string
}

func (e *envList) set(name, value string) {
	if e.values == nil {
		e.values = map[string]string{}
	}
	if _, ok := e.values[name]; !ok {
		e.names = append(e.names, name)
	}
	e.values[name] = value
}

func (e *envList) lookup(name string) (string, bool) {
	v, ok := e.values[name]
	return v, ok
}

// Strings is the environment as KEY=VALUE in definition order.
func (e *envList) Strings() []string {
	out := make([]string, 0, len(e.names))
	for _, n := range e.names {
		out = append(out, n+"="+e.values[n])
	}
	return out
}

// EnvSource is what environment and downward API resolution read from the cluster and the node.
type EnvSource struct {
	Pod    *corev1.Pod
	PodIP  string
	HostIP string
	// NodeAllocatable stands in for unset limits in resourceFieldRef, as on a kubelet.
	NodeAllocatable corev1.ResourceList
	// APIHost and APIPort are the apiserver as a pod reaches it (KUBERNETES_SERVICE_HOST/PORT).
	APIHost, APIPort string
	ConfigMap        func(namespace, name string) (*corev1.ConfigMap, error)
	Secret           func(namespace, name string) (*corev1.Secret, error)
}

// ContainerEnv resolves a container's environment as kubelet does: the apiserver's service
// variables first, then envFrom sources, then env entries in order, each value expanded against
// what is defined before it.
func ContainerEnv(src EnvSource, c *corev1.Container) ([]string, error) {
	var env envList
	// An image's config sets PATH and HOME; the host's root filesystem stands in for every image
	// here, so every container gets what a Debian image would set.
	env.set("PATH", DefaultPath)
	env.set("HOME", "/root")
	if src.APIHost != "" {
		env.set("KUBERNETES_SERVICE_HOST", src.APIHost)
		env.set("KUBERNETES_SERVICE_PORT", src.APIPort)
		env.set("KUBERNETES_SERVICE_PORT_HTTPS", src.APIPort)
		env.set("KUBERNETES_PORT", "tcp://"+hostPort(src.APIHost, src.APIPort))
	}
	ns := src.Pod.Namespace
	for _, from := range c.EnvFrom {
		var data map[string]string
		switch {
		case from.ConfigMapRef != nil:
			cm, err := src.ConfigMap(ns, from.ConfigMapRef.Name)
			if err != nil {
				if isOptional(from.ConfigMapRef.Optional) {
					continue
				}
				return nil, fmt.Errorf("envFrom configMap %q: %w", from.ConfigMapRef.Name, err)
			}
			data = cm.Data
		case from.SecretRef != nil:
			s, err := src.Secret(ns, from.SecretRef.Name)
			if err != nil {
				if isOptional(from.SecretRef.Optional) {
					continue
				}
				return nil, fmt.Errorf("envFrom secret %q: %w", from.SecretRef.Name, err)
			}
			data = map[string]string{}
			for k, v := range s.Data {
				data[k] = string(v)
			}
		}
		keys := make([]string, 0, len(data))
		for k := range data {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			name := from.Prefix + k
			if name == "" || strings.Contains(name, "=") {
				continue // kubelet skips invalid names with an event
			}
			env.set(name, data[k])
		}
	}
	for _, e := range c.Env {
		if e.ValueFrom == nil {
			env.set(e.Name, Expand(e.Value, env.lookup))
			continue
		}
		v, ok, err := envValueFrom(src, c, e.ValueFrom)
		if err != nil {
			return nil, fmt.Errorf("env %s: %w", e.Name, err)
		}
		if ok {
			env.set(e.Name, v)
		}
	}
	return env.Strings(), nil
}

// DefaultPath is the PATH of a container whose Pod sets none, as container runtimes default it.
const DefaultPath = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

func hostPort(host, port string) string {
	if strings.Contains(host, ":") {
		return "[" + host + "]:" + port
	}
	return host + ":" + port
}

func isOptional(o *bool) bool { return o != nil && *o }

// envValueFrom resolves one valueFrom; ok is false for a missing optional key.
func envValueFrom(src EnvSource, c *corev1.Container, from *corev1.EnvVarSource) (string, bool, error) {
	ns := src.Pod.Namespace
	switch {
	case from.FieldRef != nil:
		v, err := FieldValue(src, from.FieldRef.FieldPath)
		return v, err == nil, err
	case from.ResourceFieldRef != nil:
		v, err := ResourceFieldValue(src, c, from.ResourceFieldRef)
		return v, err == nil, err
	case from.ConfigMapKeyRef != nil:
		ref := from.ConfigMapKeyRef
		return keyValue(src, kindConfigMap, ns, ref.Name, ref.Key, ref.Optional)
	case from.SecretKeyRef != nil:
		ref := from.SecretKeyRef
		return keyValue(src, kindSecret, ns, ref.Name, ref.Key, ref.Optional)
	}
	return "", false, fmt.Errorf("unsupported valueFrom")
}

// keyValue resolves one key of a configMap or secret; ok is false for a missing optional one.
func keyValue(src EnvSource, kind, ns, name, key string, optional *bool) (string, bool, error) {
	data, err := src.keyData(kind, ns, name)
	if err != nil {
		if isOptional(optional) {
			return "", false, nil
		}
		return "", false, fmt.Errorf("%s %q: %w", kind, name, err)
	}
	if v, ok := data[key]; ok {
		return string(v), true, nil
	}
	if isOptional(optional) {
		return "", false, nil
	}
	return "", false, fmt.Errorf("%s %q has no key %q", kind, name, key)
}

// The kinds keyData reads, as error messages name them.
const (
	kindConfigMap = "configMap"
	kindSecret    = "secret"
)

// keyData is the data of a configMap (binaryData included: the API keeps their keys apart) or of
// a secret, by kind.
func (src EnvSource) keyData(kind, ns, name string) (map[string][]byte, error) {
	if kind == kindSecret {
		s, err := src.Secret(ns, name)
		if err != nil {
			return nil, err
		}
		return s.Data, nil
	}
	cm, err := src.ConfigMap(ns, name)
	if err != nil {
		return nil, err
	}
	data := make(map[string][]byte, len(cm.Data)+len(cm.BinaryData))
	for k, v := range cm.BinaryData {
		data[k] = v
	}
	for k, v := range cm.Data {
		data[k] = []byte(v)
	}
	return data, nil
}

// FieldValue resolves a downward API field path of the pod.
func FieldValue(src EnvSource, path string) (string, error) {
	pod := src.Pod
	if k, ok := subscript(path, "metadata.labels"); ok {
		return pod.Labels[k], nil
	}
	if k, ok := subscript(path, "metadata.annotations"); ok {
		return pod.Annotations[k], nil
	}
	switch path {
	case "metadata.name":
		return pod.Name, nil
	case "metadata.namespace":
		return pod.Namespace, nil
	case "metadata.uid":
		return string(pod.UID), nil
	case "metadata.labels":
		return FormatMap(pod.Labels), nil
	case "metadata.annotations":
		return FormatMap(pod.Annotations), nil
	case "spec.nodeName":
		return pod.Spec.NodeName, nil
	case "spec.serviceAccountName":
		return pod.Spec.ServiceAccountName, nil
	case "status.podIP", "status.podIPs":
		return src.PodIP, nil
	case "status.hostIP", "status.hostIPs":
		return src.HostIP, nil
	}
	return "", fmt.Errorf("unsupported field path %q", path)
}

// subscript splits "metadata.labels['key']" into key.
func subscript(path, prefix string) (string, bool) {
	rest, ok := strings.CutPrefix(path, prefix+"['")
	if !ok || !strings.HasSuffix(rest, "']") {
		return "", false
	}
	return strings.TrimSuffix(rest, "']"), true
}

// FormatMap renders labels or annotations as a downward API file does: key="value" lines,
// sorted by key.
func FormatMap(m map[string]string) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	lines := make([]string, 0, len(keys))
	for _, k := range keys {
		lines = append(lines, fmt.Sprintf("%v=%q", k, m[k]))
	}
	return strings.Join(lines, "\n")
}

// ResourceFieldValue resolves a resourceFieldRef: the container's request or limit divided by
// the divisor and rounded up; an unset limit is the node's allocatable amount.
func ResourceFieldValue(src EnvSource, self *corev1.Container, ref *corev1.ResourceFieldSelector) (string, error) {
	c := self
	if ref.ContainerName != "" && (self == nil || ref.ContainerName != self.Name) {
		c = findContainer(src.Pod, ref.ContainerName)
		if c == nil {
			return "", fmt.Errorf("resourceFieldRef: no container %q", ref.ContainerName)
		}
	}
	if c == nil {
		return "", fmt.Errorf("resourceFieldRef: no container named")
	}
	kind, name, ok := strings.Cut(ref.Resource, ".")
	if !ok || (kind != "limits" && kind != "requests") {
		return "", fmt.Errorf("unsupported resource %q", ref.Resource)
	}
	rn := corev1.ResourceName(name)
	var q resource.Quantity
	if kind == "limits" {
		v, set := c.Resources.Limits[rn]
		if !set {
			v = src.NodeAllocatable[rn]
		}
		q = v
	} else {
		q = c.Resources.Requests[rn]
	}
	divisor := ref.Divisor
	if divisor.IsZero() {
		divisor = resource.MustParse("1")
	}
	switch rn {
	case corev1.ResourceCPU:
		return fmt.Sprint(int64(math.Ceil(float64(q.MilliValue()) / float64(divisor.MilliValue())))), nil
	case corev1.ResourceMemory, corev1.ResourceEphemeralStorage:
		return fmt.Sprint(int64(math.Ceil(float64(q.Value()) / float64(divisor.Value())))), nil
	}
	if strings.HasPrefix(name, "hugepages-") {
		return fmt.Sprint(int64(math.Ceil(float64(q.Value()) / float64(divisor.Value())))), nil
	}
	return "", fmt.Errorf("unsupported resource %q", ref.Resource)
}

func findContainer(pod *corev1.Pod, name string) *corev1.Container {
	for i := range pod.Spec.Containers {
		if pod.Spec.Containers[i].Name == name {
			return &pod.Spec.Containers[i]
		}
	}
	for i := range pod.Spec.InitContainers {
		if pod.Spec.InitContainers[i].Name == name {
			return &pod.Spec.InitContainers[i]
		}
	}
	return nil
}

// ExpandArgs expands $(VAR) in command and args against the container's resolved environment.
func ExpandArgs(env []string, in []string) []string {
	m := map[string]string{}
	for _, kv := range env {
		k, v, _ := strings.Cut(kv, "=")
		m[k] = v
	}
	lookup := func(n string) (string, bool) { v, ok := m[n]; return v, ok }
	out := make([]string, len(in))
	for i, s := range in {
		out[i] = Expand(s, lookup)
	}
	return out
}
