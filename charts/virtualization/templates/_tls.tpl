{{/*
The chart's own certificate data of a serving certificate, as YAML (tls.crt, tls.key, ca.crt,
notAfter, each base64 but notAfter): the existing Secret's while it is valid, else issued anew.
Arguments as virtualization.servingCertificate's. A template that needs the CA elsewhere (an
APIService's caBundle) renders this once, fromYaml, and passes it on as "data".
*/}}
{{- define "virtualization.servingCertificateData" -}}
{{- $root := .root }}
{{- $ns := $root.Release.Namespace }}
{{- $svc := .service }}
{{- $dnsNames := list $svc (printf "%s.%s" $svc $ns) (printf "%s.%s.svc" $svc $ns) (printf "%s.%s.svc.cluster.local" $svc $ns) }}
{{- $notAfterKey := "virtualization.deckhouse.io/not-after" }}
{{- $namesKey := "virtualization.deckhouse.io/dns-names" }}
{{- $days := 365 }}
{{- $existing := lookup "v1" "Secret" $ns .secret }}
{{- $data := dict }}
{{- $notAfter := "" }}
{{- if $existing }}
{{- $was := dig "metadata" "annotations" $notAfterKey "" $existing }}
{{- $names := dig "metadata" "annotations" $namesKey "" $existing }}
{{- $renewAt := now | dateModify "+720h" | unixEpoch | atoi }}
{{- if and $was (eq $names (join "," $dnsNames)) (hasKey (default dict $existing.data) "tls.crt") }}
{{- if gt (toDate "2006-01-02T15:04:05Z07:00" $was | unixEpoch | atoi) $renewAt }}
{{- $data = $existing.data }}
{{- $notAfter = $was }}
{{- end }}
{{- end }}
{{- end }}
{{- if not $data }}
{{- $ca := genCA .ca (mul $days 10 | int) }}
{{- $cert := genSignedCert (printf "%s.%s.svc" $svc $ns) nil $dnsNames $days $ca }}
{{- $data = dict "tls.crt" ($cert.Cert | b64enc) "tls.key" ($cert.Key | b64enc) "ca.crt" ($ca.Cert | b64enc) }}
{{- $notAfter = dateInZone "2006-01-02T15:04:05Z" (now | dateModify (printf "+%dh" (mul $days 24))) "UTC" }}
{{- end }}
{{- $_ := set $data "notAfter" $notAfter }}
{{- toYaml $data }}
{{- end -}}

{{/*
A serving certificate Secret (tls.crt, tls.key, ca.crt) of the chart's own CA, or cert-manager's
Certificate for it. (dict "root" $ "secret" NAME "service" SVC "ca" CA-NAME "component" C)

The chart's own: an existing Secret is kept (helm upgrade does not regenerate it, so clients'
trust and the pods stay as they are) until it is less than 30 days from the expiry recorded in
its annotation, or its names differ; then both are issued anew. The readers (kube-rbac-proxy,
the registry) reload or are restarted by the checksum of nothing: a renewal rolls no pod.
*/}}
{{- define "virtualization.servingCertificate" -}}
{{- $root := .root }}
{{- $ns := $root.Release.Namespace }}
{{- $svc := .service }}
{{- $dnsNames := list $svc (printf "%s.%s" $svc $ns) (printf "%s.%s.svc" $svc $ns) (printf "%s.%s.svc.cluster.local" $svc $ns) }}
{{- $labels := include "virtualization.labels" $root }}
{{- if not $root.Values.certManager.enabled }}
{{- $notAfterKey := "virtualization.deckhouse.io/not-after" }}
{{- $namesKey := "virtualization.deckhouse.io/dns-names" }}
{{- $data := .data | default (include "virtualization.servingCertificateData" . | fromYaml) }}
{{- $notAfter := index $data "notAfter" }}
apiVersion: v1
kind: Secret
type: kubernetes.io/tls
metadata:
  name: {{ .secret }}
  namespace: {{ $ns }}
  labels:
    {{- $labels | nindent 4 }}
    app.kubernetes.io/component: {{ .component }}
  annotations:
    {{ $notAfterKey }}: {{ $notAfter | quote }}
    {{ $namesKey }}: {{ join "," $dnsNames | quote }}
data:
  tls.crt: {{ index $data "tls.crt" }}
  tls.key: {{ index $data "tls.key" }}
  ca.crt: {{ index $data "ca.crt" }}
{{- else }}
{{- $issuer := $root.Values.certManager.issuerRef }}
{{- if not $issuer.name }}
{{- $issuer = dict "name" "virt-operator-metrics-ca" "kind" "Issuer" "group" "cert-manager.io" }}
{{- end }}
# Issued and renewed by cert-manager into the same Secret the chart would write (tls.crt, tls.key,
# ca.crt).
apiVersion: cert-manager.io/v1
kind: Certificate
metadata:
  name: {{ .secret | trimSuffix "-tls" }}
  namespace: {{ $ns }}
  labels:
    {{- $labels | nindent 4 }}
    app.kubernetes.io/component: {{ .component }}
spec:
  secretName: {{ .secret }}
  commonName: {{ printf "%s.%s.svc" $svc $ns }}
  dnsNames:
    {{- toYaml $dnsNames | nindent 4 }}
  duration: 8760h
  renewBefore: 720h
  usages: [server auth, digital signature, key encipherment]
  issuerRef:
    name: {{ $issuer.name }}
    kind: {{ $issuer.kind }}
    group: {{ $issuer.group }}
{{- end }}
{{- end -}}
