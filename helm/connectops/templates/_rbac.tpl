{{/*
The operator's RBAC rules: the ONE place they are defined. The ClusterRole (all namespaces), the
per-namespace Roles and the cluster-scoped reads of namespaced mode all render from this list, so
they cannot drift apart. No wildcards, anywhere.

Each entry:
  id        stable name; rbac.omitRules takes an id ("secrets") or an id/verb ("configmaps/patch")
            to render without that rule or verb (least-privilege experiments, see the README)
  scope     namespaced | cluster   (what kind of resource: cluster-scoped ones never go into a Role)
  mode      any | clusterwide | namespaced   (which watch mode needs the rule)
            | leader   (the release namespace's Role for leader election, with leaderElection.enabled)
            | release  (the release namespace's Role for the operator's own objects: reset locks)
  named     true: limited to the leader-election Lease by resourceNames
  setting   (optional) a boolean under .Values.settings: the rule is rendered only when it is true
  why       rendered as a comment above the rule
*/}}
{{- define "connectops.ruleCatalog" -}}
- id: connectops-resources
  scope: namespaced
  mode: any
  why: watch ConnectClusters, Connectors, OffsetResets and GroupFailovers; patch is kopf's finalizer and annotations, and a rename's hand-over mark
  apiGroups: [connectops.io]
  resources: [connectclusters, connectors, offsetresets, groupfailovers]
  verbs: [get, list, watch, patch]
- id: offsetresets-create
  scope: namespaced
  mode: any
  why: a Connector's spec.offsets (onCreate clear or set, or a rename) is applied by an OffsetReset the operator creates, owned by that Connector
  apiGroups: [connectops.io]
  resources: [offsetresets]
  verbs: [create]
- id: connectops-status
  scope: namespaced
  mode: any
  why: conditions and bookkeeping live in the status subresource
  apiGroups: [connectops.io]
  resources: [connectclusters/status, connectors/status, offsetresets/status, groupfailovers/status]
  verbs: [patch]
- id: events
  scope: namespaced
  mode: any
  why: every change and drift correction is an Event (kopf posts core/v1 Events, never patches them)
  apiGroups: [""]
  resources: [events]
  verbs: [create]
- id: configmaps
  scope: namespaced
  mode: any
  why: offset backups before a reset's first change (create only, checked by a dry-run create before the connector stops; a resumed step reads its own back, never overwrites), check verdicts (get)
  apiGroups: [""]
  resources: [configmaps]
  verbs: [get, create]
- id: secrets
  scope: namespaced
  mode: any
  why: read-only; configFrom values and ConnectCluster credentials
  apiGroups: [""]
  resources: [secrets]
  verbs: [get]
- id: secrets-watch
  scope: namespaced
  mode: any
  setting: secretRotation
  why: a rotated Secret is applied within seconds (settings.secretRotation); a watch of the watched namespaces' Secrets, where a get already reads any of them by name, instead of polling each referenced Secret (no API call while nothing changes); only names and keyed digests of referenced keys are kept
  apiGroups: [""]
  resources: [secrets]
  verbs: [list, watch]
- id: leases
  scope: namespaced
  mode: release
  why: the per-connector offset-reset lock, in the release namespace whichever namespace a reset comes from (taken by create, released by delete, read by every reconcile; update hands it to a restore or takes it from a reset that no longer exists); create also makes the leader-election Lease once (create cannot be limited by name)
  apiGroups: [coordination.k8s.io]
  resources: [leases]
  verbs: [get, create, delete, update]
- id: sparkapplications
  scope: namespaced
  mode: any
  why: lag and partition-balance checks run as SparkApplications (Spark operator)
  apiGroups: [sparkoperator.k8s.io]
  resources: [sparkapplications]
  verbs: [get, create, delete]
- id: leader-lease
  scope: namespaced
  mode: leader
  named: true
  why: leader election reads and renews its own Lease, and no other
  apiGroups: [coordination.k8s.io]
  resources: [leases]
  verbs: [get, update]
- id: crds
  scope: cluster
  mode: any
  why: kopf lists and watches CRDs to notice its resources appearing and changing
  apiGroups: [apiextensions.k8s.io]
  resources: [customresourcedefinitions]
  verbs: [list, watch]
- id: namespaces
  scope: cluster
  mode: namespaced
  why: kopf lists and watches namespaces when given --namespace (not when watching all of them)
  apiGroups: [""]
  resources: [namespaces]
  verbs: [list, watch]
{{- end -}}

{{/*
connectops.rules: the rules for one target, as a YAML list (without a leading "rules:").
  (dict "root" $ "target" "clusterwide")    everything the all-namespaces ClusterRole needs
  (dict "root" $ "target" "namespaced")     the namespaced rules of each watched namespace's Role
  (dict "root" $ "target" "cluster-reads")  the cluster-scoped rules of namespaced mode
  (dict "root" $ "target" "leader")         the release namespace's leader-election rules
  (dict "root" $ "target" "release")        the release namespace's rules for the operator's own objects
rbac.extraRules are added to the "clusterwide" and "namespaced" targets.
*/}}
{{- define "connectops.rules" -}}
{{- $root := .root -}}
{{- $target := .target -}}
{{- $omit := $root.Values.rbac.omitRules | default list -}}
{{- range $rule := include "connectops.ruleCatalog" $root | fromYamlArray -}}
{{- $in := false -}}
{{- if eq $target "clusterwide" -}}
{{- $in = has $rule.mode (list "any" "clusterwide") -}}
{{- else if eq $target "namespaced" -}}
{{- $in = and (eq $rule.scope "namespaced") (has $rule.mode (list "any" "namespaced")) -}}
{{- else if eq $target "cluster-reads" -}}
{{- $in = and (eq $rule.scope "cluster") (has $rule.mode (list "any" "namespaced")) -}}
{{- else if eq $target "leader" -}}
{{- $in = eq $rule.mode "leader" -}}
{{- else if eq $target "release" -}}
{{- $in = eq $rule.mode "release" -}}
{{- else -}}
{{- fail (printf "connectops.rules: unknown target %q" $target) -}}
{{- end -}}
{{- if has $rule.id $omit -}}
{{- $in = false -}}
{{- end -}}
{{- if and $rule.setting (not (index $root.Values.settings $rule.setting)) -}}
{{- $in = false -}}
{{- end -}}
{{- $verbs := list -}}
{{- range $verb := $rule.verbs -}}
{{- if not (has (printf "%s/%s" $rule.id $verb) $omit) -}}
{{- $verbs = append $verbs $verb -}}
{{- end -}}
{{- end -}}
{{- if and $in $verbs }}
# {{ $rule.id }}: {{ $rule.why }}
- apiGroups: {{ toJson $rule.apiGroups }}
  resources: {{ toJson $rule.resources }}
  {{- if $rule.named }}
  resourceNames: {{ toJson (list (include "connectops.leaseName" $root)) }}
  {{- end }}
  verbs: {{ toJson $verbs }}
{{- end -}}
{{- end -}}
{{- if has $target (list "clusterwide" "namespaced") -}}
{{- range $root.Values.rbac.extraRules }}
# extra (rbac.extraRules)
- {{ toYaml . | indent 2 | trim }}
{{- end -}}
{{- end -}}
{{- end -}}
