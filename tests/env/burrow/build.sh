#!/usr/bin/env bash
# Builds LinkedIn's Burrow (the consumer-lag evaluator the check's rules come from) into the test
# cache, for the live comparison (tests/spark/test_burrow_live.py) only.
#
#   tests/env/burrow/build.sh BURROW_SOURCE_DIR
#
# Why a source directory and not `go install github.com/linkedin/Burrow@v1.9.5`: the Go module
# proxy this project's machines reach refuses that module ("403 This module version is not
# available" for v1.9.5, v1.9.3..v1.9.4, @latest and the version list), while it serves every
# dependency in Burrow's go.sum. So the module's own tree (git tag v1.9.5, commit ced55ba) must be
# supplied; its dependencies come from the Go module proxy, checked against its go.sum
# (-mod=readonly: a missing or different sum fails the build). Not run by provision.sh, since a
# cold machine has no such tree.
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
SRC="${1:?usage: build.sh BURROW_SOURCE_DIR (the tree of Burrow v1.9.5)}"
CACHE="${CONNECTOPS_TESTENV_CACHE:-$HOME/.cache/connectops-testenv}"
VERSION=1.9.5
OUT="$CACHE/burrow-$VERSION"
GO="${GO:-/usr/local/go/bin/go}"

grep -q '^module github.com/linkedin/Burrow$' "$SRC/go.mod" || { echo "$SRC is not Burrow's module" >&2; exit 1; }
# v1.9.5's go.mod and go.sum, by checksum: the tree is that release's dependency graph
(cd "$SRC" && sha256sum --quiet -c "$HERE/SHA256SUMS") \
  || { echo "$SRC is not Burrow $VERSION's module (go.mod/go.sum differ)" >&2; exit 1; }
if [ -x "$OUT/burrow" ] && [ -f "$OUT/.complete" ]; then
  exit 0
fi
mkdir -p "$OUT"
start=$(date +%s)
(cd "$SRC" && CGO_ENABLED=0 GOFLAGS=-mod=readonly GOMODCACHE="$OUT/gomod" GOCACHE="$OUT/gocache" \
  "$GO" build -trimpath -o "$OUT/burrow.tmp" .)
mv "$OUT/burrow.tmp" "$OUT/burrow"
rm -rf "$OUT/gocache"
chmod -R u+w "$OUT/gomod" && rm -rf "$OUT/gomod"
echo "$VERSION" > "$OUT/.complete"
echo "Burrow $VERSION built into $OUT in $(( $(date +%s) - start )) s" >&2
