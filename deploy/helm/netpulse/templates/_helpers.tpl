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
deploy/agent-gateway/config/agent.yaml) with the probe.* values (probe.pathMTU.enabled
included) and the release namespace
applied, then .Values.agent.config deep-merged over it, then, with gateway.shards > 1,
split by shard (netpulse.shardAgentConfig). Rendered as YAML.
*/}}
{{- define "netpulse.agentConfig" -}}
{{- $cfg := .Files.Get "files/config/agent.yaml" | fromYaml -}}
{{- $probe := $cfg.receivers.pod_probe -}}
{{- include "netpulse.setDefault" (dict "map" $probe "key" "interval" "value" .Values.probe.interval) -}}
{{- include "netpulse.setDefault" (dict "map" $probe "key" "timeout" "value" .Values.probe.timeout) -}}
{{- include "netpulse.setDefault" (dict "map" $probe "key" "k" "value" .Values.probe.k) -}}
{{- include "netpulse.setDefault" (dict "map" $probe "key" "probe_budget" "value" .Values.probe.budget) -}}
{{- include "netpulse.setDefault" (dict "map" $probe.icmp.path_mtu "key" "enabled" "value" .Values.probe.pathMTU.enabled) -}}
{{- include "netpulse.setDefault" (dict "map" $cfg.exporters.otlp_grpc "key" "endpoint" "value" (printf "netpulse-gateway.%s.svc:4317" .Release.Namespace)) -}}
{{- $cfg = mustMergeOverwrite $cfg (deepCopy .Values.agent.config) -}}
{{- $shards := int .Values.gateway.shards -}}
{{- if and (gt $shards 1) .Values.gateway.relay -}}
{{- include "netpulse.relayAgentConfig" (dict "cfg" $cfg "shards" $shards "namespace" .Release.Namespace) -}}
{{- else if gt $shards 1 -}}
{{- include "netpulse.shardAgentConfig" (dict "cfg" $cfg "shards" $shards "namespace" .Release.Namespace) -}}
{{- end -}}
{{- toYaml $cfg -}}
{{- end }}

{{/*
netpulse.relayAgentConfig rewrites a merged agent configuration (.cfg, in place) for
.shards gateway shards that relay (gateway.relay): pod_probe marks each target point with
its owning shard (netpulse.shard) and sends its heartbeat; everything goes, over one
connection, to netpulse-gateway-relay (any shard's leader, which forwards each point to its
owner and the declared checks' results to shard 0): otlp_grpc's endpoint becomes
${env:NETPULSE_GATEWAY_ENDPOINT:-netpulse-gateway-relay.<namespace>.svc:4317}.
*/}}
{{- define "netpulse.relayAgentConfig" -}}
{{- $cfg := .cfg -}}
{{- $_ := set $cfg.receivers.pod_probe "shards" .shards -}}
{{- include "netpulse.setDefault" (dict "map" $cfg.exporters.otlp_grpc "key" "endpoint" "value" (printf "netpulse-gateway-relay.%s.svc:4317" .namespace)) -}}
{{- end }}

{{/*
netpulse.shardAgentConfig rewrites a merged agent configuration (.cfg, in place) for
.shards gateway shards: pod_probe marks each target point with its owning shard
(netpulse.shard); the otlp_grpc exporter becomes one exporter per shard
(otlp_grpc/shard-<i>, its settings as the merged otlp_grpc's, endpoint
${env:NETPULSE_GATEWAY_ENDPOINT_<i>:-netpulse-gateway-<i>.<namespace>.svc:4317}); the
metrics pipeline becomes one pipeline per shard (metrics/shard-<i>) whose filter/shard-<i>
drops the points another shard owns (points without the attribute, the observer's
heartbeat, reach every shard); every other pipeline's otlp_grpc becomes otlp_grpc/shard-0,
the shard that runs the declared checks. Done after the agent.config merge, so what it
sets on otlp_grpc or the metrics pipeline applies to every shard; an exporter, processor or
pipeline of a shard's own name in agent.config is merged over the generated one.
*/}}
{{- define "netpulse.shardAgentConfig" -}}
{{- $cfg := .cfg -}}
{{- $_ := set $cfg.receivers.pod_probe "shards" .shards -}}
{{- $exporter := $cfg.exporters.otlp_grpc -}}
{{- $_ = unset $cfg.exporters "otlp_grpc" -}}
{{- $processors := default (dict) $cfg.processors -}}
{{- $_ = set $cfg "processors" $processors -}}
{{- $pipelines := $cfg.service.pipelines -}}
{{- $metrics := $pipelines.metrics -}}
{{- $_ = unset $pipelines "metrics" -}}
{{- range $name, $p := $pipelines -}}
{{- if and $p (kindIs "slice" $p.exporters) -}}
{{- $exporters := list -}}
{{- range $p.exporters }}{{ $exporters = append $exporters (ternary "otlp_grpc/shard-0" . (eq . "otlp_grpc")) }}{{ end -}}
{{- $_ = set $p "exporters" $exporters -}}
{{- end -}}
{{- end -}}
{{- range $i := until .shards -}}
{{- $name := printf "otlp_grpc/shard-%d" $i -}}
{{- $e := deepCopy $exporter -}}
{{- $_ = set $e "endpoint" (printf "${env:NETPULSE_GATEWAY_ENDPOINT_%d:-netpulse-gateway-%d.%s.svc:4317}" $i $i $.namespace) -}}
{{- $_ = set $cfg.exporters $name (mustMergeOverwrite $e (get $cfg.exporters $name | default (dict))) -}}
{{- $filter := printf "filter/shard-%d" $i -}}
{{- $f := dict "error_mode" "ignore" "metrics" (dict "datapoint" (list (printf "attributes[\"netpulse.shard\"] != nil and attributes[\"netpulse.shard\"] != %d" $i))) -}}
{{- $_ = set $processors $filter (mustMergeOverwrite $f (get $processors $filter | default (dict))) -}}
{{- /* The filter goes before the batch processor (else last): batches hold one shard's points. */ -}}
{{- $procs := list -}}
{{- $placed := false -}}
{{- range $metrics.processors -}}
{{- if and (not $placed) (or (eq . "batch") (hasPrefix "batch/" .)) }}{{ $procs = append $procs $filter }}{{ $placed = true }}{{ end -}}
{{- $procs = append $procs . -}}
{{- end -}}
{{- if not $placed }}{{ $procs = append $procs $filter }}{{ end -}}
{{- $exporters := list -}}
{{- range $metrics.exporters }}{{ $exporters = append $exporters (ternary $name . (eq . "otlp_grpc")) }}{{ end -}}
{{- $p := dict "receivers" (deepCopy $metrics.receivers) "processors" $procs "exporters" $exporters -}}
{{- $pname := printf "metrics/shard-%d" $i -}}
{{- $_ = set $pipelines $pname (mustMergeOverwrite $p (get $pipelines $pname | default (dict))) -}}
{{- end -}}
{{- end }}

{{/*
The gateway's collector configuration: files/config/gateway.yaml (a copy of
deploy/agent-gateway/config/gateway.yaml) with the switches, the token audience, the flap
window, the pair objects, the write budget, the Lease timings and the release namespace applied, then .Values.gateway.config deep-merged over it;
with gateway.shards > 1, pod_network_health's shard (count, and the index from the
Deployment's NETPULSE_SHARD_INDEX) last: it must match the Deployments.
*/}}
{{- define "netpulse.gatewayConfig" -}}
{{- $cfg := .Files.Get "files/config/gateway.yaml" | fromYaml -}}
{{- $auth := $cfg.extensions.k8s_token_auth -}}
{{- $_ := set $auth "audience" .Values.token.audience -}}
{{- $_ = set $auth "service_accounts" (list (printf "%s/netpulse-agent" .Release.Namespace)) -}}
{{- $pnh := $cfg.exporters.pod_network_health -}}
{{- $_ = set $pnh.node_conditions "enabled" .Values.nodeConditions.enabled -}}
{{- include "netpulse.setDefault" (dict "map" $pnh "key" "flap_window" "value" .Values.gateway.flapWindow) -}}
{{- $_ = set $pnh "pair_objects" .Values.gateway.pairObjects -}}
{{- $_ = set $pnh "freshness" .Values.gateway.freshness -}}
{{- if .Values.readinessGate.enabled -}}
{{- $_ = set $pnh "readiness_gate" (mustMergeOverwrite (default (dict) $pnh.readiness_gate) (dict "enabled" true "min_reaching_nodes" .Values.readinessGate.minReachingNodes "fail_open_timeout" .Values.readinessGate.failOpenTimeout)) -}}
{{- end -}}
{{- with .Values.gateway.writeBudget -}}
{{- if not (kindIs "invalid" .qps) }}{{ $_ = set $pnh "qps" .qps }}{{ end -}}
{{- if not (kindIs "invalid" .burst) }}{{ $_ = set $pnh "burst" .burst }}{{ end -}}
{{- end -}}
{{- with .Values.gateway.leaderElection -}}
{{- if not (kindIs "invalid" .leaseDuration) }}{{ $_ = set $pnh.leader_election "lease_duration" .leaseDuration }}{{ end -}}
{{- if not (kindIs "invalid" .renewDeadline) }}{{ $_ = set $pnh.leader_election "renew_deadline" .renewDeadline }}{{ end -}}
{{- if not (kindIs "invalid" .retryPeriod) }}{{ $_ = set $pnh.leader_election "retry_period" .retryPeriod }}{{ end -}}
{{- end -}}
{{- $cfg = mustMergeOverwrite $cfg (deepCopy .Values.gateway.config) -}}
{{- $shards := int .Values.gateway.shards -}}
{{- if gt $shards 1 -}}
{{- /* One configuration for every shard: each Deployment sets its index. */ -}}
{{- $_ = set $cfg.exporters.pod_network_health "shard" (dict "count" $shards "index" "${env:NETPULSE_SHARD_INDEX}") -}}
{{- if .Values.gateway.relay -}}
{{- include "netpulse.relayGatewayConfig" (dict "cfg" $cfg "shards" $shards "namespace" .Release.Namespace) -}}
{{- end -}}
{{- end -}}
{{- toYaml $cfg -}}
{{- end }}

{{/*
netpulse.relayGatewayConfig rewrites a merged gateway configuration (.cfg, in place) for
.shards relaying shards (gateway.relay): pod_network_health's relay (one connection per
other shard: endpoints ${env:NETPULSE_RELAY_ENDPOINT_<i>:-netpulse-gateway-<i>.<namespace>.svc:4317},
TLS against the gateway's own CA, the gateway pod's projected token through
bearertokenauth/relay, reconnection backoff capped by grpc_backoff); k8s_token_auth accepts the gateway's own service account as a relay
(relay_service_accounts); k8s_net_attributes keeps the identity a relay vouched for on each
Resource for pod_network_health, and metrics/export runs a copy of it that removes it
(k8s_net_attributes/export) after filter/own_shard, which keeps only this shard's points
(each pair's series are exported by its owner, where the relay brings them). Set in
gateway.config what to change of it.
*/}}
{{- define "netpulse.relayGatewayConfig" -}}
{{- $cfg := .cfg -}}
{{- $ns := .namespace -}}
{{- $pnh := $cfg.exporters.pod_network_health -}}
{{- $endpoints := list -}}
{{- range $i := until .shards -}}
{{- $endpoints = append $endpoints (printf "${env:NETPULSE_RELAY_ENDPOINT_%d:-netpulse-gateway-%d.%s.svc:4317}" $i $i $ns) -}}
{{- end -}}
{{- $client := dict "tls" (dict "ca_file" "${env:NETPULSE_RELAY_CA_FILE:-/var/run/secrets/netpulse/tls/ca.crt}") "auth" (dict "authenticator" "bearertokenauth/relay") "keepalive" (dict "time" "10s" "timeout" "5s") "middlewares" (list (dict "id" "grpc_backoff")) -}}
{{- $relay := dict "enabled" true "endpoints" $endpoints "client" $client -}}
{{- $_ := set $pnh "relay" (mustMergeOverwrite $relay (default (dict) $pnh.relay)) -}}
{{- $_ = set $cfg.extensions "bearertokenauth/relay" (mustMergeOverwrite (dict "filename" "${env:NETPULSE_RELAY_TOKEN_FILE:-/var/run/secrets/netpulse/relay-token/token}") (get $cfg.extensions "bearertokenauth/relay" | default (dict))) -}}
{{- /* A restarted shard's peers reconnect within a round, as the agents do (grpc_backoff). */ -}}
{{- $_ = set $cfg.extensions "grpc_backoff" (mustMergeOverwrite (dict "max_delay" "10s") (get $cfg.extensions "grpc_backoff" | default (dict))) -}}
{{- range $ext := list "bearertokenauth/relay" "grpc_backoff" -}}
{{- if not (has $ext $cfg.service.extensions) }}{{ $_ := set $cfg.service "extensions" (append $cfg.service.extensions $ext) }}{{ end -}}
{{- end -}}
{{- $auth := $cfg.extensions.k8s_token_auth -}}
{{- $agents := default $auth.service_accounts $auth.agent_service_accounts -}}
{{- $gateway := printf "%s/netpulse-gateway" $ns -}}
{{- if not (has $gateway $auth.service_accounts) }}{{ $_ = set $auth "service_accounts" (append $auth.service_accounts $gateway) }}{{ end -}}
{{- $_ = set $auth "agent_service_accounts" $agents -}}
{{- $_ = set $auth "relay_service_accounts" (list $gateway) -}}
{{- /* The health pipeline's admission keeps the relayed identity for pod_network_health;
the export pipeline's (a copy, k8s_net_attributes/export) removes it, so no series carries it. */ -}}
{{- $nat := get $cfg.processors "k8s_net_attributes" -}}
{{- $_ = set $cfg.processors "k8s_net_attributes/export" (mustMergeOverwrite (deepCopy $nat) (get $cfg.processors "k8s_net_attributes/export" | default (dict))) -}}
{{- $_ = set $nat "admission" (mustMergeOverwrite (default (dict) $nat.admission) (dict "keep_relayed_identity" true)) -}}
{{- $own := dict "error_mode" "ignore" "metrics" (dict "datapoint" (list "attributes[\"netpulse.shard\"] != nil and attributes[\"netpulse.shard\"] != ${env:NETPULSE_SHARD_INDEX}")) -}}
{{- $_ = set $cfg.processors "filter/own_shard" (mustMergeOverwrite $own (get $cfg.processors "filter/own_shard" | default (dict))) -}}
{{- $export := get $cfg.service.pipelines "metrics/export" -}}
{{- if and $export (not (has "filter/own_shard" $export.processors)) -}}
{{- $procs := list -}}
{{- range $export.processors -}}
{{- $procs = append $procs (ternary "k8s_net_attributes/export" . (eq . "k8s_net_attributes")) -}}
{{- if eq . "memory_limiter" }}{{ $procs = append $procs "filter/own_shard" }}{{ end -}}
{{- end -}}
{{- if not (has "filter/own_shard" $procs) }}{{ $procs = prepend $procs "filter/own_shard" }}{{ end -}}
{{- $_ = set $export "processors" $procs -}}
{{- end -}}
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
factory's; testbed/helmtest checks they agree). The injection policy adds this type, so
the gate pods declare is the condition the exporter writes.
*/}}
{{- define "netpulse.readinessConditionType" -}}
{{- $cfg := include "netpulse.gatewayConfig" . | fromYaml -}}
{{- dig "exporters" "pod_network_health" "readiness_gate" "condition_type" "netpulse.io/network-ready" $cfg -}}
{{- end }}

{{/*
netpulse's condition types, as JSON (a CEL list literal): the merged gateway configuration's
node_conditions.type (the exporter's default netpulse.io/PodNetworkProblem), its
degraded_type when set, and readiness_gate.condition_type. The gateway admission policy
lets the gateway change only these in node and pod status.
*/}}
{{- define "netpulse.conditionTypes" -}}
{{- $cfg := include "netpulse.gatewayConfig" . | fromYaml -}}
{{- $nc := dig "exporters" "pod_network_health" "node_conditions" (dict) $cfg -}}
{{- $types := list (dig "type" "netpulse.io/PodNetworkProblem" $nc) -}}
{{- /* The gray condition's documented name always (it can be turned on in gateway.config
without touching this), and the configured one when it is another. */ -}}
{{- $types = append $types "netpulse.io/PodNetworkDegraded" -}}
{{- with dig "degraded_type" "" $nc }}{{ $types = append $types . }}{{ end -}}
{{- $types = append $types (include "netpulse.readinessConditionType" .) -}}
{{- $types | uniq | toJson -}}
{{- end }}

{{/* The gateway's leader label (leader_election.leader_label of the merged configuration; "" when unset). */}}
{{- define "netpulse.leaderLabel" -}}
{{- $cfg := include "netpulse.gatewayConfig" . | fromYaml -}}
{{- dig "exporters" "pod_network_health" "leader_election" "leader_label" "" $cfg -}}
{{- end }}

{{/*
netpulse.goMemLimit is a collector's GOMEMLIMIT, of .values (.Values.agent or
.Values.gateway; .key names it): its goMemLimit when set, else from its
resources.limits.memory (a quantity in Mi or Gi); nothing without a memory limit.
  - agent: the limit less 24 MiB, and at least half of it: what the Go runtime does not
    count, mostly the binary's pages the collector runs (12-20 MiB measured under the
    limit, docs/figures.md "Agent memory");
  - gateway: 25/32 of the limit (400MiB of the default 512Mi): its memory outside the Go
    heap grows with the agents it serves (connections, TLS, requests in flight: RSS ~480 MB
    at 230 MB of live heap with 1,000 agents, docs/figures.md "Gateway ingest"), so the
    headroom is a share of the limit, not a constant.
*/}}
{{- define "netpulse.goMemLimit" -}}
{{- $v := .values -}}
{{- if $v.goMemLimit -}}
{{- $v.goMemLimit -}}
{{- else -}}
{{- $limit := dig "limits" "memory" "" ($v.resources | default dict) | toString -}}
{{- $mib := 0 -}}
{{- if hasSuffix "Mi" $limit -}}
{{- $mib = trimSuffix "Mi" $limit | atoi -}}
{{- else if hasSuffix "Gi" $limit -}}
{{- $mib = mul (trimSuffix "Gi" $limit | atoi) 1024 -}}
{{- else if $limit -}}
{{- fail (printf "%s.goMemLimit: set it, or give the memory limit in Mi or Gi (not %q)" .key $limit) -}}
{{- end -}}
{{- if $mib -}}
{{- if eq .key "gateway" -}}
{{- printf "%dMiB" (div (mul $mib 25) 32) -}}
{{- else -}}
{{- printf "%dMiB" (max (sub $mib 24) (div $mib 2)) -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- end }}

{{/*
netpulse.gatewayShards is the list of gateway shards to render, each a dict: index (int),
suffix ("" for a single gateway, else "-<index>": the names netpulse-gateway<suffix>), and
selector (the labels that select its pods: the name label, plus netpulse.io/shard when
sharded, so each Deployment's selector is its own).
*/}}
{{- define "netpulse.gatewayShards" -}}
{{- $shards := int .Values.gateway.shards -}}
{{- $list := list -}}
{{- range $i := until $shards -}}
{{- $sel := dict "app.kubernetes.io/name" "netpulse-gateway" -}}
{{- $suffix := "" -}}
{{- if gt $shards 1 -}}
{{- $suffix = printf "-%d" $i -}}
{{- $_ := set $sel "netpulse.io/shard" (toString $i) -}}
{{- end -}}
{{- $list = append $list (dict "index" $i "suffix" $suffix "selector" $sel) -}}
{{- end -}}
{{- toJson $list -}}
{{- end }}
