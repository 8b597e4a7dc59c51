{{/*
The module's alerts, as the groups of a PrometheusRule spec (and of a promtool rule file: the
chart test feeds them to promtool check rules and promtool test rules). Every series is scoped to
the release namespace, whose targets carry it as their namespace label.
*/}}
{{- define "virtualization.alertGroups" -}}
{{- $ns := .Release.Namespace -}}
{{- $severity := .Values.monitoring.alerts.severity -}}
groups:
  - name: virtualization.components
    rules:
      - alert: D8VirtualizationTargetDown
        expr: up{namespace="{{ $ns }}"} == 0
        for: 5m
        labels:
          severity: {{ $severity }}
        annotations:
          summary: {{ `A metrics endpoint of the virtualization module is down: {{ $labels.job }} {{ $labels.pod }}` | quote }}
          description: {{ `Prometheus has not scraped {{ $labels.instance }} ({{ $labels.pod }}, container {{ $labels.container }}) for 5 minutes. Check the pod and its kube-rbac-proxy container.` | quote }}
      - alert: D8VirtualizationOperatorDown
        expr: absent(up{namespace="{{ $ns }}", job="{{ include "virtualization.metricsService" . }}"} == 1)
        for: 10m
        labels:
          severity: {{ $severity }}
          # absent() of a comparison carries no labels of its own.
          namespace: {{ $ns }}
        annotations:
          summary: "No virt-operator replica answers"
          description: {{ printf "No virt-operator in namespace %s has been scraped for 10 minutes: nothing installs or repairs virt-api, virt-controller and virt-handler." $ns | quote }}
      - alert: D8VirtualizationDeploymentUnavailable
        expr: kube_deployment_status_replicas_available{namespace="{{ $ns }}", deployment=~"virt-operator|virt-api|virt-controller"} == 0
        for: 5m
        labels:
          severity: {{ $severity }}
        annotations:
          summary: {{ `{{ $labels.deployment }} has no available replica` | quote }}
          description: {{ `Every replica of {{ $labels.deployment }} in {{ $labels.namespace }} has been unavailable for 5 minutes (kube-state-metrics).` | quote }}
      - alert: D8VirtualizationHandlerUnavailable
        expr: kube_daemonset_status_number_unavailable{namespace="{{ $ns }}", daemonset="virt-handler"} > 0
        for: 10m
        labels:
          severity: {{ $severity }}
        annotations:
          summary: {{ `virt-handler is unavailable on {{ $value }} nodes` | quote }}
          description: {{ `{{ $value }} virt-handler pods in {{ $labels.namespace }} have not been available for 10 minutes: virtual machines on those nodes are not managed (kube-state-metrics).` | quote }}
  - name: virtualization.kube-api-rewriter
    rules:
      - alert: D8VirtualizationRewriterRewriteErrors
        expr: sum by (namespace, pod) (rate(kube_api_rewriter_rewrite_errors_total{namespace="{{ $ns }}"}[5m])) > 0
        for: 5m
        labels:
          severity: {{ $severity }}
        annotations:
          summary: {{ `kube-api-rewriter in {{ $labels.pod }} fails to rewrite payloads` | quote }}
          description: {{ `The rewriter sidecar of {{ $labels.pod }} could not rename or restore payloads for 5 minutes ({{ $value | humanize }}/s): its component sees errors. Its debug log (logLevel debug) shows each rewrite.` | quote }}
      - alert: D8VirtualizationRewriterServerErrors
        expr: |-
          sum by (namespace, pod) (rate(kube_api_rewriter_requests_total{namespace="{{ $ns }}", code=~"5.."}[5m]))
            / sum by (namespace, pod) (rate(kube_api_rewriter_requests_total{namespace="{{ $ns }}"}[5m])) > 0.05
        for: 10m
        labels:
          severity: {{ $severity }}
        annotations:
          summary: {{ `More than 5% of the requests through kube-api-rewriter in {{ $labels.pod }} fail` | quote }}
          description: {{ `{{ $value | humanizePercentage }} of the requests proxied by {{ $labels.pod }}'s rewriter have answered 5xx for 10 minutes.` | quote }}
  - name: virtualization.virtual-machines
    rules:
      - alert: D8VirtualizationVMStuckPending
        expr: sum by (namespace) (kubevirt_vmi_phase_count{namespace="{{ $ns }}", phase=~"pending|scheduling"}) > 0
        for: {{ .Values.monitoring.alerts.vmPendingFor }}
        labels:
          severity: warning
        annotations:
          summary: {{ `{{ $value }} virtual machines are stuck before running` | quote }}
          description: {{ printf "Virtual machine instances have been Pending or Scheduling for %s (kubevirt_vmi_phase_count from virt-controller): no node fits them, or their launcher pods do not start. kubectl get intvirtvmi -A shows which." .Values.monitoring.alerts.vmPendingFor | quote }}
{{- end -}}
