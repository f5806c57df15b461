#!/usr/bin/env bash
# Copy the generated CRDs (crds/, from `connectops crds`) into the Helm chart's crds/ directory,
# which must hold identical files (tests/helm/test_chart.py fails on drift).
# templates/crds.yaml (value crds.enabled) renders these same files: there is no other copy.
#   scripts/sync-chart-crds.sh           copy (and remove chart CRDs that no longer exist)
#   scripts/sync-chart-crds.sh --check   exit 1 if the chart's copy differs
set -euo pipefail
cd "$(dirname "$0")/.."
src=crds
dst=helm/connectops/crds

if [[ "${1:-}" == "--check" ]]; then
  if diff -r "$src" "$dst" >/dev/null; then
    exit 0
  fi
  echo "helm/connectops/crds differs from crds/ (run scripts/sync-chart-crds.sh):" >&2
  diff -rq "$src" "$dst" >&2 || true
  exit 1
fi

mkdir -p "$dst"
rm -f "$dst"/*.yaml
cp "$src"/*.yaml "$dst"/
ls "$dst"/*.yaml
