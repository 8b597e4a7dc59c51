package scrapeconfig

import (
	"net"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
)

// TargetGroup is an entry of a file_sd file.
type TargetGroup struct {
	Targets []string          `json:"targets"`
	Labels  map[string]string `json:"labels"`
}

// Targets are the targets Prometheus' Kubernetes service discovery finds with role
// endpointslice in one namespace, with its __meta_kubernetes_* labels: one per address and port
// of each EndpointSlice, with the labels of the slice, of its Service (the
// kubernetes.io/service-name label) and of the Pod an address points at. The scrape
// configuration's relabelings then select and label them as they would the discovered ones.
func Targets(namespace string, eps []discoveryv1.EndpointSlice, svcs []corev1.Service, pods []corev1.Pod) []TargetGroup {
	services := map[string]*corev1.Service{}
	for i := range svcs {
		services[svcs[i].Name] = &svcs[i]
	}
	podsByName := map[string]*corev1.Pod{}
	for i := range pods {
		podsByName[pods[i].Name] = &pods[i]
	}
	out := []TargetGroup{}
	for _, es := range eps {
		for _, ep := range es.Endpoints {
			for _, port := range es.Ports {
				if port.Port == nil {
					continue
				}
				for _, addr := range ep.Addresses {
					l := map[string]string{
						"__meta_kubernetes_namespace":                  namespace,
						"__meta_kubernetes_endpointslice_name":         es.Name,
						"__meta_kubernetes_endpointslice_address_type": string(es.AddressType),
						"__meta_kubernetes_endpointslice_port":         strconv.Itoa(int(*port.Port)),
					}
					metaLabels(l, "endpointslice_label", es.Labels)
					endpointLabels(l, ep, port)
					if svc := services[es.Labels[discoveryv1.LabelServiceName]]; svc != nil {
						l["__meta_kubernetes_service_name"] = svc.Name
						metaLabels(l, "service_label", svc.Labels)
						metaLabels(l, "service_annotation", svc.Annotations)
					}
					if ref := ep.TargetRef; ref != nil && ref.Kind == "Pod" {
						if pod := podsByName[ref.Name]; pod != nil {
							podLabels(l, pod, *port.Port)
						}
					}
					out = append(out, TargetGroup{Targets: []string{net.JoinHostPort(addr, strconv.Itoa(int(*port.Port)))}, Labels: l})
				}
			}
		}
	}
	return out
}

func endpointLabels(l map[string]string, ep discoveryv1.Endpoint, port discoveryv1.EndpointPort) {
	if port.Name != nil {
		l["__meta_kubernetes_endpointslice_port_name"] = *port.Name
	}
	if port.Protocol != nil {
		l["__meta_kubernetes_endpointslice_port_protocol"] = string(*port.Protocol)
	}
	if ref := ep.TargetRef; ref != nil {
		l["__meta_kubernetes_endpointslice_address_target_kind"] = ref.Kind
		l["__meta_kubernetes_endpointslice_address_target_name"] = ref.Name
	}
	for name, v := range map[string]*bool{"ready": ep.Conditions.Ready, "serving": ep.Conditions.Serving, "terminating": ep.Conditions.Terminating} {
		if v != nil {
			l["__meta_kubernetes_endpointslice_endpoint_conditions_"+name] = strconv.FormatBool(*v)
		}
	}
	if ep.NodeName != nil {
		l["__meta_kubernetes_endpointslice_endpoint_node_name"] = *ep.NodeName
	}
	if ep.Hostname != nil {
		l["__meta_kubernetes_endpointslice_endpoint_hostname"] = *ep.Hostname
	}
}

// podLabels are the pod role's labels of the pod an address points at, with the container
// that declares the port.
func podLabels(l map[string]string, pod *corev1.Pod, port int32) {
	l["__meta_kubernetes_pod_name"] = pod.Name
	l["__meta_kubernetes_pod_ip"] = pod.Status.PodIP
	l["__meta_kubernetes_pod_node_name"] = pod.Spec.NodeName
	l["__meta_kubernetes_pod_host_ip"] = pod.Status.HostIP
	l["__meta_kubernetes_pod_uid"] = string(pod.UID)
	l["__meta_kubernetes_pod_phase"] = string(pod.Status.Phase)
	l["__meta_kubernetes_pod_ready"] = "false"
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodReady {
			l["__meta_kubernetes_pod_ready"] = strconv.FormatBool(c.Status == corev1.ConditionTrue)
		}
	}
	for _, ref := range pod.OwnerReferences {
		if ref.Controller != nil && *ref.Controller {
			l["__meta_kubernetes_pod_controller_kind"] = ref.Kind
			l["__meta_kubernetes_pod_controller_name"] = ref.Name
		}
	}
	metaLabels(l, "pod_label", pod.Labels)
	metaLabels(l, "pod_annotation", pod.Annotations)
	for _, c := range pod.Spec.Containers {
		for _, p := range c.Ports {
			if p.ContainerPort == port {
				l["__meta_kubernetes_pod_container_name"] = c.Name
				l["__meta_kubernetes_pod_container_image"] = c.Image
				l["__meta_kubernetes_pod_container_port_name"] = p.Name
				l["__meta_kubernetes_pod_container_port_number"] = strconv.Itoa(int(p.ContainerPort))
				l["__meta_kubernetes_pod_container_port_protocol"] = string(p.Protocol)
			}
		}
	}
}

// metaLabels adds __meta_kubernetes_<kind>_<key> and its ..present_<key> twin, the way the
// discovery exposes labels and annotations ("service_label" gives service_labelpresent).
func metaLabels(l map[string]string, kind string, m map[string]string) {
	for k, v := range m {
		s := sanitize(k)
		l["__meta_kubernetes_"+kind+"_"+s] = v
		l["__meta_kubernetes_"+kind+"present_"+s] = "true"
	}
}
