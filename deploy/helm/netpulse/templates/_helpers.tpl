{{/*
Object names are fixed (netpulse-agent, netpulse-gateway, ...), as in deploy/: the shipped
collector configurations name them, and netpulse is installed once per cluster (its
ClusterRoles, its CRD and the single API writer are cluster-wide).
*/}}

{{/* Labels every object carries besides its own app.kubernetes.io/* labels. */}}
{{- define "netpulse.helmLabels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
{{- with .Values.commonLabels }}
{{ toYaml . }}
{{- end }}
{{- end }}

{{/* The collector image: repository:tag[@digest]. */}}
{{- define "netpulse.image" -}}
{{- $tag := .Values.image.tag | default .Chart.AppVersion -}}
{{- $img := printf "%s:%s" .Values.image.repository $tag -}}
{{- with .Values.image.digest }}{{ $img = printf "%s@%s" $img . }}{{ end -}}
{{- $img -}}
{{- end }}

{{/*
netpulse.setDefault sets key of map to value. A value of the form
${env:NAME:-default} keeps its environment variable and gets value as its default, so
the suite's and the simulated cluster's overrides still apply and the default values render
the shipped file unchanged.
*/}}
{{- define "netpulse.setDefault" -}}
{{- $old := get .map .key -}}
{{- if and (kindIs "string" $old) (regexMatch "^\\$\\{env:[A-Za-z_][A-Za-z0-9_]*:-.*\\}$" $old) -}}
{{- $_ := set .map .key (regexReplaceAll "^(\\$\\{env:[A-Za-z_][A-Za-z0-9_]*:-).*\\}$" $old (printf "${1}%v}" .value)) -}}
{{- else -}}
{{- $_ := set .map .key .value -}}
{{- end -}}
{{- end }}

{{/*
The agent's collector configuration: files/config/agent.yaml (a copy of
deploy/agent-gateway/config/agent.yaml) with the probe.* values and the release namespace
applied, then .Values.agent.config deep-merged over it. Rendered as YAML.
*/}}
{{- define "netpulse.agentConfig" -}}
{{- $cfg := .Files.Get "files/config/agent.yaml" | fromYaml -}}
{{- $probe := $cfg.receivers.pod_probe -}}
{{- include "netpulse.setDefault" (dict "map" $probe "key" "interval" "value" .Values.probe.interval) -}}
{{- include "netpulse.setDefault" (dict "map" $probe "key" "timeout" "value" .Values.probe.timeout) -}}
{{- include "netpulse.setDefault" (dict "map" $probe "key" "k" "value" .Values.probe.k) -}}
{{- include "netpulse.setDefault" (dict "map" $probe "key" "probe_budget" "value" .Values.probe.budget) -}}
{{- include "netpulse.setDefault" (dict "map" $cfg.exporters.otlp_grpc "key" "endpoint" "value" (printf "netpulse-gateway.%s.svc:4317" .Release.Namespace)) -}}
{{- $cfg = mustMergeOverwrite $cfg (deepCopy .Values.agent.config) -}}
{{- toYaml $cfg -}}
{{- end }}

{{/*
The gateway's collector configuration: files/config/gateway.yaml (a copy of
deploy/agent-gateway/config/gateway.yaml) with the switches, the token audience, the write
budget and the release namespace applied, then .Values.gateway.config deep-merged over it.
*/}}
{{- define "netpulse.gatewayConfig" -}}
{{- $cfg := .Files.Get "files/config/gateway.yaml" | fromYaml -}}
{{- $auth := $cfg.extensions.k8s_token_auth -}}
{{- $_ := set $auth "audience" .Values.token.audience -}}
{{- $_ = set $auth "service_accounts" (list (printf "%s/netpulse-agent" .Release.Namespace)) -}}
{{- $pnh := $cfg.exporters.pod_network_health -}}
{{- $_ = set $pnh.node_conditions "enabled" .Values.nodeConditions.enabled -}}
{{- if .Values.readinessGate.enabled -}}
{{- $_ = set $pnh "readiness_gate" (mustMergeOverwrite (default (dict) $pnh.readiness_gate) (dict "enabled" true "min_reaching_nodes" .Values.readinessGate.minReachingNodes)) -}}
{{- end -}}
{{- with .Values.gateway.writeBudget -}}
{{- if not (kindIs "invalid" .qps) }}{{ $_ = set $pnh "qps" .qps }}{{ end -}}
{{- if not (kindIs "invalid" .burst) }}{{ $_ = set $pnh "burst" .burst }}{{ end -}}
{{- end -}}
{{- $cfg = mustMergeOverwrite $cfg (deepCopy .Values.gateway.config) -}}
{{- toYaml $cfg -}}
{{- end }}

{{/* Whether the merged gateway configuration enables an opt-in writer ("true" or ""). */}}
{{- define "netpulse.gatewayEnables" -}}
{{- $cfg := include "netpulse.gatewayConfig" .root | fromYaml -}}
{{- $pnh := dig "exporters" "pod_network_health" (dict) $cfg -}}
{{- if dig .feature "enabled" false $pnh }}true{{ end -}}
{{- end }}

{{/*
The pod condition type of the readiness gate: the merged gateway configuration's
pod_network_health readiness_gate.condition_type, else the exporter's default (its
factory's; internal/helmtest checks they agree). The injection policy adds this type, so
the gate pods declare is the condition the exporter writes.
*/}}
{{- define "netpulse.readinessConditionType" -}}
{{- $cfg := include "netpulse.gatewayConfig" . | fromYaml -}}
{{- dig "exporters" "pod_network_health" "readiness_gate" "condition_type" "netpulse.io/network-ready" $cfg -}}
{{- end }}

{{/*
netpulse.goMemLimit is a collector's GOMEMLIMIT: its goMemLimit when set, else its
resources.limits.memory (a quantity in Mi or Gi) less 24 MiB, and at least half of it:
what the Go runtime does not count, mostly the binary's pages the collector runs (12-20 MiB
measured under the limit, docs/figures.md "Agent memory"); nothing without a memory limit.
*/}}
{{- define "netpulse.goMemLimit" -}}
{{- if .goMemLimit -}}
{{- .goMemLimit -}}
{{- else -}}
{{- $limit := dig "limits" "memory" "" (.resources | default dict) | toString -}}
{{- $mib := 0 -}}
{{- if hasSuffix "Mi" $limit -}}
{{- $mib = trimSuffix "Mi" $limit | atoi -}}
{{- else if hasSuffix "Gi" $limit -}}
{{- $mib = mul (trimSuffix "Gi" $limit | atoi) 1024 -}}
{{- else if $limit -}}
{{- fail (printf "agent.goMemLimit: set it, or give the memory limit in Mi or Gi (not %q)" $limit) -}}
{{- end -}}
{{- if $mib -}}
{{- printf "%dMiB" (max (sub $mib 24) (div $mib 2)) -}}
{{- end -}}
{{- end -}}
{{- end }}
