#!/usr/bin/env bash
# Builds the test environment's etcd and kube-apiserver from released Go modules, as projects that
# embed the API server do: tests/env/kube/apiserver/go.mod requires k8s.io/kubernetes and pins
# every k8s.io/* staging module it replaces with a local path to the matching v0.Y.Z release;
# tests/env/kube/etcd/go.mod requires go.etcd.io/etcd/server/v3. go.sum pins every module by hash.
#
#   tests/env/kube/build.sh [MODULE_DIR...]   (default: etcd apiserver)
#
# Each binary lands in the provisioning cache keyed by its version (kube-apiserver-v1.37.2,
# etcd-v3.7.3), so a version bump builds anew and an unchanged one is never rebuilt. The module
# downloads and the compiler cache live in a private GOPATH under the cache, one per run (two
# test processes may build the same binary at once), removed once the binaries are in place:
# they are ~3 GiB and serve nothing after.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
CACHE="${CONNECTOPS_TESTENV_CACHE:-$HOME/.cache/connectops-testenv}"
mkdir -p "$CACHE"
log() { printf '[kube-build %(%H:%M:%S)T] %s\n' -1 "$*" >&2; }
GO="$(command -v go || echo /usr/local/go/bin/go)"
[ -x "$GO" ] || { echo "go not found (expected on PATH or /usr/local/go/bin/go)" >&2; exit 1; }

mod_version() {  # mod_version GO_MOD MODULE -> the version go.mod requires
  awk -v m="$2" '($1 == "require" && $2 == m) || $1 == m { print ($1 == m ? $2 : $3); exit }' "$1"
}

work="$(mktemp -d "$CACHE/go-build.XXXXXX")"
# the module cache is read-only on disk (as Go writes it): make it removable first
trap 'chmod -R u+w "$work" 2>/dev/null; rm -rf "$work"' EXIT

gobuild() {  # gobuild MODULE_DIR OUT PACKAGE LDFLAGS
  local log="$work/$(basename "$2").log"
  (cd "$1" && CGO_ENABLED=0 GOFLAGS=-mod=readonly GOPATH="$work" GOMODCACHE="$work/mod" \
     GOCACHE="$work/cache" "$GO" build -trimpath -ldflags "-s -w $4" -o "$2.tmp.$$" "$3") \
     >"$log" 2>&1 || { tail -n 40 "$log" >&2; exit 1; }
  mv "$2.tmp.$$" "$2"
}

build_apiserver() {
  local dir="$1" v major minor out
  v="$(mod_version "$dir/go.mod" k8s.io/kubernetes)"
  out="$CACHE/kube-apiserver-$v"
  [ -x "$out" ] && { echo "$out"; return; }
  major="${v#v}"; major="${major%%.*}"; minor="${v#v*.}"; minor="${minor%%.*}"
  log "building kube-apiserver $v from Go modules"
  # What `make` stamps into a release build: without it /version says v0.0.0-master.
  local pkg=k8s.io/component-base/version
  gobuild "$dir" "$out" k8s.io/kubernetes/cmd/kube-apiserver \
    "-X $pkg.gitVersion=$v -X $pkg.gitMajor=$major -X $pkg.gitMinor=$minor -X $pkg.gitTreeState=clean"
  log "kube-apiserver $v built"
  echo "$out"
}

build_etcd() {
  local dir="$1" v out
  v="$(mod_version "$dir/go.mod" go.etcd.io/etcd/server/v3)"
  out="$CACHE/etcd-$v"
  [ -x "$out" ] && { echo "$out"; return; }
  log "building etcd $v from Go modules"
  gobuild "$dir" "$out" . ""
  log "etcd $v built"
  echo "$out"
}

[ "$#" -gt 0 ] || set -- "$here/etcd" "$here/apiserver"
for dir in "$@"; do
  dir="$(cd "$dir" && pwd)"
  if [ -n "$(mod_version "$dir/go.mod" go.etcd.io/etcd/server/v3)" ]; then build_etcd "$dir"; else build_apiserver "$dir"; fi
done
