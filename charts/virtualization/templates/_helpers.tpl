{{/*
Names. Namespaced objects have fixed names, as the ones virt-operator makes (virt-api,
virt-controller ...): one installation per namespace. Cluster-scoped objects carry the release
name, so that they say where they come from.
*/}}
{{- define "virtualization.clusterName" -}}
{{- printf "%s-%s" .root.Release.Name .name | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "virtualization.labels" -}}
app.kubernetes.io/name: virtualization
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: virtualization
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
{{- end -}}

{{/* The labels that select virt-operator's pods: they never change, a selector cannot. */}}
{{- define "virtualization.operatorSelector" -}}
app.kubernetes.io/name: virtualization
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/component: virt-operator
{{- end -}}

{{/* The tag of the module's images. */}}
{{- define "virtualization.tag" -}}
{{- .Values.images.tag | default .Chart.AppVersion -}}
{{- end -}}

{{/*
An image reference: (dict "root" $ "name" "virt-operator" "override" .Values.images.virtOperator).
An empty repository means <registry>/<name>, an empty tag the module's tag.
*/}}
{{- define "virtualization.image" -}}
{{- $repo := .override.repository | default (printf "%s/%s" (trimSuffix "/" .root.Values.images.registry) .name) -}}
{{- $tag := .override.tag | default (include "virtualization.tag" .root) -}}
{{- printf "%s:%s" $repo $tag -}}
{{- end -}}

{{- define "virtualization.operatorImage" -}}
{{- include "virtualization.image" (dict "root" . "name" "virt-operator" "override" .Values.images.virtOperator) -}}
{{- end -}}
{{- define "virtualization.rewriterImage" -}}
{{- include "virtualization.image" (dict "root" . "name" "kube-api-rewriter" "override" .Values.images.kubeApiRewriter) -}}
{{- end -}}
{{- define "virtualization.rbacProxyImage" -}}
{{- include "virtualization.image" (dict "root" . "name" "kube-rbac-proxy" "override" .Values.images.kubeRbacProxy) -}}
{{- end -}}

{{/* The PriorityClass of the module's pods, or nothing. */}}
{{- define "virtualization.priorityClassName" -}}
{{- if .Values.priorityClass.create -}}
{{- .Values.priorityClass.name | default (include "virtualization.clusterName" (dict "root" . "name" "critical")) -}}
{{- else -}}
{{- .Values.priorityClass.name -}}
{{- end -}}
{{- end -}}

{{/* True (non-empty) when prometheus-operator's API is served and monitoring is on. */}}
{{- define "virtualization.monitoring" -}}
{{- if and .Values.monitoring.enabled (.Capabilities.APIVersions.Has "monitoring.coreos.com/v1/ServiceMonitor") (.Capabilities.APIVersions.Has "monitoring.coreos.com/v1/PrometheusRule") -}}
true
{{- end -}}
{{- end -}}

{{/* kube-rbac-proxy's serving certificate Secret and the Service it answers for. */}}
{{- define "virtualization.metricsTLSSecret" -}}virt-operator-metrics-tls{{- end -}}
{{- define "virtualization.metricsService" -}}virt-operator-metrics{{- end -}}

{{/* The kubeconfig of virt-operator and virtualization-controller: their rewriter sidecar's api listener on the pod's loopback. */}}
{{- define "virtualization.operatorKubeconfig" -}}
apiVersion: v1
kind: Config
clusters: [{name: rewriter, cluster: {server: "http://127.0.0.1:23915"}}]
contexts: [{name: rewriter, context: {cluster: rewriter}}]
current-context: rewriter
{{- end -}}

{{/* The security context of containers that need nothing of the node (PSA restricted). */}}
{{- define "virtualization.restricted" -}}
allowPrivilegeEscalation: false
readOnlyRootFilesystem: true
capabilities:
  drop: [ALL]
{{- end -}}

{{/* DVCR: the labels that select its pod, its image, its Service and Secrets. */}}
{{- define "virtualization.dvcrSelector" -}}
app.kubernetes.io/name: virtualization
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/component: dvcr
{{- end -}}
{{- define "virtualization.dvcrImage" -}}
{{- include "virtualization.image" (dict "root" . "name" "dvcr" "override" .Values.images.dvcr) -}}
{{- end -}}
{{- define "virtualization.dvcrService" -}}dvcr{{- end -}}
{{- define "virtualization.dvcrTLSSecret" -}}dvcr-tls{{- end -}}

{{/* virtualization-controller: the labels that select its pods, its images, its metrics Service and Secret. */}}
{{- define "virtualization.controllerSelector" -}}
app.kubernetes.io/name: virtualization
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/component: virtualization-controller
{{- end -}}
{{- define "virtualization.controllerImage" -}}
{{- include "virtualization.image" (dict "root" . "name" "virtualization-controller" "override" .Values.images.virtualizationController) -}}
{{- end -}}
{{- define "virtualization.importerImage" -}}
{{- include "virtualization.image" (dict "root" . "name" "importer" "override" .Values.images.importer) -}}
{{- end -}}
{{- define "virtualization.controllerMetricsService" -}}virtualization-controller-metrics{{- end -}}
{{- define "virtualization.controllerMetricsTLSSecret" -}}virtualization-controller-metrics-tls{{- end -}}
{{- define "virtualization.controllerWebhookService" -}}virtualization-controller-webhook{{- end -}}
{{- define "virtualization.controllerWebhookTLSSecret" -}}virtualization-controller-webhook-tls{{- end -}}
