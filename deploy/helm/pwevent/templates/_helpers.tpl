{{/*
Shared pieces of the chart's templates: names, the checks on values, the storage paths, the
job's configuration (rendered once, read by the FlinkDeployment, the ConfigMap and the topic Job),
and durations in seconds for the alert rules.
*/}}

{{/* The image of the job and of the topic Job. */}}
{{- define "pwevent.image" -}}
{{ .Values.image.repository }}:{{ .Values.image.tag }}
{{- end -}}

{{/* Labels of every object of the release. */}}
{{- define "pwevent.labels" -}}
app.kubernetes.io/name: pwevent
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ .Chart.Name }}-{{ .Chart.Version }}
{{- end -}}

{{/* The upgrade mode, refused when it would start every ledger afresh. */}}
{{- define "pwevent.upgradeMode" -}}
{{- $mode := .Values.upgradeMode -}}
{{- if eq $mode "stateless" -}}
{{- fail "upgradeMode: stateless starts the job without its state on every change, so every user's ledger would start afresh and the spent budget be forgotten; use savepoint or last-state" -}}
{{- end -}}
{{- if not (has $mode (list "savepoint" "last-state")) -}}
{{- fail (printf "upgradeMode: %v is not savepoint or last-state" $mode) -}}
{{- end -}}
{{- $mode -}}
{{- end -}}

{{/* Where checkpoints, savepoints and the HA metadata go: s3://bucket/prefix or file://mount. */}}
{{- define "pwevent.storageRoot" -}}
{{- $s := .Values.storage -}}
{{- if eq $s.type "s3" -}}
s3://{{ required "storage.s3.bucket is required with storage.type s3" $s.s3.bucket }}/{{ $s.s3.prefix | default .Release.Name }}
{{- else if eq $s.type "volume" -}}
file://{{ $s.volume.mountPath }}
{{- else -}}
{{- fail (printf "storage.type: %v is not s3 or volume" $s.type) -}}
{{- end -}}
{{- end -}}

{{/* The claim of storage.type volume: the user's, or the one the chart creates. */}}
{{- define "pwevent.claimName" -}}
{{ .Values.storage.volume.existingClaim | default (printf "%s-flink-data" .Release.Name) }}
{{- end -}}

{{/* The job's configuration (job.yaml) as YAML. */}}
{{- define "pwevent.jobConfig" -}}
{{- $config := deepCopy .Values.job.config -}}
{{- range $key := list "slot" "kafka" -}}
{{- if hasKey $config $key -}}
{{- fail (printf "job.config.%s: set it in the chart's own values (job.slot, kafka)" $key) -}}
{{- end -}}
{{- end -}}
{{- $flink := deepCopy (default dict $config.flink) -}}
{{- range $key := list "parallelism" "checkpoint_dir" "checkpoint_interval" "retained_checkpoints" "release_delay" "upgrade_mode" -}}
{{- if hasKey $flink $key -}}
{{- fail (printf "job.config.flink.%s: the chart sets it from its own values (parallelism, storage, checkpoints, job.releaseDelay, upgradeMode)" $key) -}}
{{- end -}}
{{- end -}}
{{- $_ := set $flink "parallelism" (int .Values.parallelism) -}}
{{- $_ := set $flink "checkpoint_dir" (printf "%s/checkpoints" (include "pwevent.storageRoot" .)) -}}
{{- $_ := set $flink "checkpoint_interval" .Values.checkpoints.interval -}}
{{- $_ := set $flink "retained_checkpoints" (int .Values.checkpoints.retained) -}}
{{- $_ := set $flink "release_delay" .Values.job.releaseDelay -}}
{{- $_ := set $flink "upgrade_mode" (include "pwevent.upgradeMode" .) -}}
{{- $_ := set $config "flink" $flink -}}
{{- $_ := set $config "slot" .Values.job.slot -}}
{{- $k := .Values.kafka -}}
{{- $security := dict "protocol" $k.security.protocol -}}
{{- if hasPrefix "SASL_" $k.security.protocol -}}
{{- $_ := set $security "sasl_mechanism" $k.security.saslMechanism -}}
{{- $_ := set $security "username" $k.jobPrincipal.username -}}
{{- $_ := set $security "password" "${PWEVENT_KAFKA_PASSWORD}" -}}
{{- end -}}
{{- if $k.security.caSecret -}}
{{- $_ := set $security "ca_file" "/opt/pwevent/kafka-ca/ca.crt" -}}
{{- end -}}
{{- $_ := set $config "kafka" (dict "bootstrap" $k.bootstrap "group_id" $k.groupId "topics" $k.topics "security" $security "resume_after_last_release" $k.resumeAfterLastRelease) -}}
{{- $requirements := deepCopy (default dict $config.requirements) -}}
{{- with .Values.job.requirementKey -}}
{{- if .secretName -}}
{{- $_ := set $requirements "signature" (dict "key_env" "PWEVENT_REQUIREMENT_KEY" "field" .field) -}}
{{- end -}}
{{- end -}}
{{- $_ := set $config "requirements" $requirements -}}
{{- toYaml $config -}}
{{- end -}}

{{/* The topic Job's configuration: the job's, connecting as the administrator, without the
requirement signature (creating topics needs no key). */}}
{{- define "pwevent.topicsConfig" -}}
{{- $config := include "pwevent.jobConfig" . | fromYaml -}}
{{- $k := .Values.kafka -}}
{{- if hasPrefix "SASL_" $k.security.protocol -}}
{{- $_ := set $config.kafka.security "username" $k.adminPrincipal.username -}}
{{- $_ := set $config.kafka.security "password" "${PWEVENT_KAFKA_ADMIN_PASSWORD}" -}}
{{- end -}}
{{- $_ := unset $config.requirements "signature" -}}
{{- toYaml $config -}}
{{- end -}}

{{/* The environment of the job's pods: the secrets job.yaml names and the object store's. */}}
{{- define "pwevent.jobEnv" -}}
{{- $s3 := eq .Values.storage.type "s3" }}
{{- if hasPrefix "SASL_" .Values.kafka.security.protocol }}
- name: PWEVENT_KAFKA_PASSWORD
  valueFrom: {secretKeyRef: {name: {{ .Values.kafka.jobPrincipal.passwordSecret.name }}, key: {{ .Values.kafka.jobPrincipal.passwordSecret.key }}}}
{{- end }}
{{- with .Values.job.requirementKey }}
{{- if .secretName }}
- name: PWEVENT_REQUIREMENT_KEY
  valueFrom: {secretKeyRef: {name: {{ .secretName }}, key: {{ .key }}}}
{{- end }}
{{- end }}
{{- if $s3 }}
- name: ENABLE_BUILT_IN_PLUGINS
  value: {{ .Values.storage.s3.plugin }}
- name: AWS_ACCESS_KEY_ID
  valueFrom: {secretKeyRef: {name: {{ .Values.storage.s3.credentials.secretName }}, key: {{ .Values.storage.s3.credentials.accessKeyIdKey }}}}
- name: AWS_SECRET_ACCESS_KEY
  valueFrom: {secretKeyRef: {name: {{ .Values.storage.s3.credentials.secretName }}, key: {{ .Values.storage.s3.credentials.secretAccessKeyKey }}}}
{{- end }}
{{- end -}}

{{/* A duration value ("30s", "15m", "1h", "1d") in whole seconds; fails naming the field. Called
with (dict "field" NAME "value" VALUE). */}}
{{- define "pwevent.seconds" -}}
{{- $value := toString .value -}}
{{- if not (regexMatch "^[0-9]+(s|m|h|d)$" $value) -}}
{{- fail (printf "%s: %q is not a duration in s, m, h or d (30s, 15m, 1h, 1d)" .field $value) -}}
{{- end -}}
{{- $unit := regexFind "[smhd]$" $value -}}
{{- mul (trimSuffix $unit $value | int) (get (dict "s" 1 "m" 60 "h" 3600 "d" 86400) $unit) -}}
{{- end -}}

{{/* The label matchers of this deployment's series: the scrape job (the PodMonitor's jobLabel,
the pods' `app`, the FlinkDeployment's name) and the namespace. */}}
{{- define "pwevent.selector" -}}
namespace="{{ .Release.Namespace }}", job="{{ .Release.Name }}"
{{- end -}}
