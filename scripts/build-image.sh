#!/usr/bin/env bash
# Builds the operator image (the Dockerfile's `operator` target) with buildah, without Docker and
# without a registry: the base is a Debian bookworm root filesystem made here by mmdebstrap
# (python3 + python3-venv), imported into buildah's local storage, and passed to the Dockerfile
# as PYTHON_IMAGE, the build argument a normal registry build leaves at its python:* default.
#
#   scripts/build-image.sh [TAG]        (default TAG: localhost/connectops/operator:dev)
#
# Prints the image ID on the last line. tests/image/ builds and runs the image this way, and so
# can anyone with Debian's buildah and mmdebstrap (tests/env/provision.sh installs them):
#   buildah push localhost/connectops/operator:dev docker-archive:/tmp/operator.tar
# hands the result to any other engine.
#
# The base is cached (CONNECTOPS_TESTENV_CACHE) as a tarball keyed by its package list; the
# image itself is rebuilt on every call so that it is always the working tree's code.
# Concurrent calls (two pytest workers) are serialised with flock.
set -euo pipefail
cd "$(dirname "$0")/.."
TAG="${1:-localhost/connectops/operator:dev}"
CACHE="${CONNECTOPS_TESTENV_CACHE:-$HOME/.cache/connectops-testenv}"
SUITE=bookworm
PACKAGES=python3,python3-venv,ca-certificates,passwd
BASE="localhost/connectops-base:${SUITE}"
MIRROR="${DEBIAN_MIRROR:-http://deb.debian.org/debian}"
log() { printf '[build-image %(%H:%M:%S)T] %s\n' -1 "$*" >&2; }
for tool in buildah mmdebstrap; do
  command -v "$tool" >/dev/null || { echo "build-image: $tool not found (tests/env/provision.sh installs it)" >&2; exit 1; }
done
mkdir -p "$CACHE/image"
exec 9>"$CACHE/image/lock"
flock --timeout 600 9

# --isolation chroot and --network host: no user namespaces, no network namespace and no CNI
# plugin are needed (this machine has none configured; a container runtime is not required).
BUILDAH_ARGS=(--isolation chroot --network host)

key="$(printf '%s|%s' "$SUITE" "$PACKAGES" | sha256sum | cut -c1-16)"
tarball="$CACHE/image/base-$SUITE-$key.tar"
if [ ! -s "$tarball" ]; then
  log "mmdebstrap $SUITE ($PACKAGES)"
  mmdebstrap --quiet --format=tar --variant=minbase --include="$PACKAGES" \
    --dpkgopt='path-exclude=/usr/share/doc/*' --dpkgopt='path-exclude=/usr/share/man/*' \
    --dpkgopt='path-exclude=/usr/share/locale/*' \
    "$SUITE" "$tarball.part" "$MIRROR" >&2
  mv "$tarball.part" "$tarball"
fi
if [ "$(buildah inspect --type image --format '{{index .OCIv1.Config.Labels "connectops_base_key"}}' "$BASE" 2>/dev/null || true)" != "$key" ]; then
  log "importing the base as $BASE"
  ctx="$(mktemp -d)"
  trap 'rm -rf "$ctx"' EXIT
  ln "$tarball" "$ctx/rootfs.tar" 2>/dev/null || cp "$tarball" "$ctx/rootfs.tar"
  printf 'FROM scratch\nADD rootfs.tar /\nLABEL connectops_base_key=%s\nCMD ["/usr/bin/python3"]\n' "$key" > "$ctx/Containerfile"
  buildah build "${BUILDAH_ARGS[@]}" --quiet -f "$ctx/Containerfile" -t "$BASE" "$ctx" >&2
fi

# pip inside the build must trust what pip on this machine trusts: where a TLS-inspecting proxy
# stands between it and PyPI, the machine's pip.conf and CA bundle name that proxy's CA. Mounted
# for the RUN steps only; they are not in any layer of the image.
mounts=()
for f in /etc/pip.conf /etc/ssl/certs/ca-certificates.crt; do
  [ -f "$f" ] && mounts+=(-v "$f:$f:ro")
done
log "buildah build --target operator -t $TAG"
buildah build "${BUILDAH_ARGS[@]}" --layers=false "${mounts[@]}" \
  --build-arg PYTHON_IMAGE="$BASE" --target operator -t "$TAG" . >&2
# the previous build under this tag, now untagged
buildah rmi --prune >/dev/null 2>&1 || true
buildah images --noheading --no-trunc --format '{{.ID}}' "$TAG"
