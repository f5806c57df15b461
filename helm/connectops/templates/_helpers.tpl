{{/* Names, labels and small computed values shared by the templates. */}}

{{- define "connectops.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "connectops.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- $name := default .Chart.Name .Values.nameOverride -}}
{{- if contains $name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{- define "connectops.selectorLabels" -}}
app.kubernetes.io/name: {{ include "connectops.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "connectops.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{ include "connectops.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: connectops
{{- with .Values.commonLabels }}
{{ toYaml . }}
{{- end }}
{{- end -}}

{{/* The operator's pods and the objects about them (Deployment, PDB, NetworkPolicy, Service). */}}
{{- define "connectops.operatorLabels" -}}
{{ include "connectops.labels" . }}
app.kubernetes.io/component: operator
{{- end -}}

{{/* The Deployment's strategy: the user's, else RollingUpdate with leader election (the new pod
stands by, ready to take the Lease, before the old one stops), else Recreate. */}}
{{- define "connectops.strategy" -}}
{{- if .Values.strategy -}}
{{- toYaml .Values.strategy -}}
{{- else if include "connectops.standalone" . -}}
type: Recreate
{{- else -}}
type: RollingUpdate
rollingUpdate:
  maxSurge: 1
  maxUnavailable: 0
{{- end -}}
{{- end -}}

{{/* A resource quantity (512Mi, 1Gi, 500M, 1073741824) in bytes, for the memory alert. */}}
{{- define "connectops.bytes" -}}
{{- $q := toString . -}}
{{- $units := dict "Ki" 1024 "Mi" 1048576 "Gi" 1073741824 "Ti" 1099511627776 "k" 1000 "M" 1000000 "G" 1000000000 "T" 1000000000000 -}}
{{- $number := regexFind "^[0-9.]+" $q -}}
{{- $unit := trimPrefix $number $q -}}
{{- if not (regexMatch "^[0-9.]+(Ki|Mi|Gi|Ti|k|M|G|T)?$" $q) -}}
{{- fail (printf "resources.limits.memory %q: write it as a number with Ki, Mi, Gi, Ti, k, M, G or T" $q) -}}
{{- end -}}
{{- if $unit -}}
{{- mulf (float64 $number) (index $units $unit) | int64 -}}
{{- else -}}
{{- float64 $number | int64 -}}
{{- end -}}
{{- end -}}

{{- define "connectops.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- default (include "connectops.fullname" .) .Values.serviceAccount.name -}}
{{- else -}}
{{- default "default" .Values.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{- define "connectops.image" -}}
{{- if .Values.image.digest -}}
{{- printf "%s@%s" .Values.image.repository .Values.image.digest -}}
{{- else -}}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) -}}
{{- end -}}
{{- end -}}

{{/* The check's image: the value given, else the default repository at the digest or appVersion. */}}
{{- define "connectops.sparkImage" -}}
{{- $c := .Values.sparkCheck -}}
{{- if $c.image -}}
{{- $c.image -}}
{{- else if $c.imageDigest -}}
{{- printf "ghcr.io/connectops/spark-check@%s" $c.imageDigest -}}
{{- else -}}
{{- printf "ghcr.io/connectops/spark-check:%s" .Chart.AppVersion -}}
{{- end -}}
{{- end -}}

{{- define "connectops.sparkServiceAccountName" -}}
{{- default (printf "%s-spark-check" (include "connectops.fullname" .) | trunc 63 | trimSuffix "-") .Values.sparkCheck.serviceAccount.name -}}
{{- end -}}

{{/* "true" when the operator watches every namespace (no watch.namespaces). */}}
{{- define "connectops.clusterwide" -}}
{{- if empty .Values.watch.namespaces -}}true{{- end -}}
{{- end -}}

{{/* "true" when the operator runs without leader election (--standalone). */}}
{{- define "connectops.standalone" -}}
{{- if not .Values.leaderElection.enabled -}}true{{- end -}}
{{- end -}}

{{/* The leader-election Lease's name (one per release). */}}
{{- define "connectops.leaseName" -}}
{{- printf "%s-leader" (include "connectops.fullname" .) | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* Namespaces where Spark checks run, as a JSON list. */}}
{{- define "connectops.sparkNamespaces" -}}
{{- if .Values.sparkCheck.namespaces -}}
{{- toJson .Values.sparkCheck.namespaces -}}
{{- else if .Values.watch.namespaces -}}
{{- toJson .Values.watch.namespaces -}}
{{- else -}}
{{- toJson (list .Release.Namespace) -}}
{{- end -}}
{{- end -}}

{{/* Refuse combinations that would run two un-coordinated operators. */}}
{{- define "connectops.validate" -}}
{{- $le := .Values.leaderElection -}}
{{- if and (gt (int .Values.replicas) 1) (not $le.enabled) -}}
{{- fail "replicas > 1 needs leaderElection.enabled=true: without it every replica would reconcile every object" -}}
{{- end -}}
{{- if and (not $le.enabled) (eq (toString (dig "type" "" .Values.strategy)) "RollingUpdate") -}}
{{- fail "strategy RollingUpdate needs leaderElection.enabled=true: without it the new pod and the old one would both reconcile every object" -}}
{{- end -}}
{{- if $le.enabled -}}
{{- if le (int $le.leaseDurationSeconds) (int $le.renewDeadlineSeconds) -}}
{{- fail "leaderElection.renewDeadlineSeconds must be shorter than leaseDurationSeconds: a leader must be gone before its Lease expires" -}}
{{- end -}}
{{- if le (mulf (int $le.renewDeadlineSeconds) 1.0) (mulf (int $le.retryPeriodSeconds) 1.2) -}}
{{- fail "leaderElection.renewDeadlineSeconds must exceed 1.2 x retryPeriodSeconds" -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{/* The metadata lines the CRD templates put in place of the crds/ files' `metadata:` line. */}}
{{- define "connectops.crdMetadata" -}}
metadata:
  labels:
    {{- include "connectops.labels" . | nindent 4 }}
{{- if .Values.crds.keep }}
  annotations:
    helm.sh/resource-policy: keep
{{- end }}
{{ end -}}
