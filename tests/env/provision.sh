#!/usr/bin/env bash
# Installs the real test servers this project's end-to-end tests run against, on loopback:
#   etcd + kube-apiserver (built offline from Debian's kubernetes source package; cached),
#   Apache Kafka (broker, Connect and MirrorMaker 2 jars from Maven Central, tests/env/kafka);
#   Debezium's PostgreSQL connector (Maven Central) with PostgreSQL (Debian); lua5.1 and promtool (Debian's prometheus
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
for p in etcd-server default-jdk-headless maven postgresql kcat lua5.1 prometheus buildah mmdebstrap golang-1.19-go rsync make golang-github-modern-go-reflect2-dev dpkg-dev patch; do
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

# --- Apache Kafka: broker, Connect, MirrorMaker 2 (Maven Central) --------------------------------
# One classpath for all three, as Kafka's distribution lays out libs/: tests/env/kafka/pom.xml
# pins the version; Maven resolves every runtime dependency (Jetty 12, Jersey, log4j2 included).
# Keyed by the pom's hash, so a version bump resolves again. No tarball, nothing built.
KAFKA_POM="$(dirname "${BASH_SOURCE[0]}")/kafka/pom.xml"
KAFKA_VERSION="$(sed -n 's:.*<kafka.version>\(.*\)</kafka.version>.*:\1:p' "$KAFKA_POM")"
KAFKA_LIBS="$CACHE/kafka-$KAFKA_VERSION/libs"
pom_hash="$(sha256sum < "$KAFKA_POM" | cut -d' ' -f1)"
if [ "$(cat "$KAFKA_LIBS/.complete" 2>/dev/null)" != "$pom_hash" ]; then
  log "resolving Apache Kafka $KAFKA_VERSION from Maven Central"
  rm -rf "$KAFKA_LIBS"; mkdir -p "$KAFKA_LIBS"
  mvn -q -B -f "$KAFKA_POM" dependency:copy-dependencies -DincludeScope=runtime \
    -DoutputDirectory="$KAFKA_LIBS" >"$CACHE/kafka-mvn.log" 2>&1 || { tail -n 30 "$CACHE/kafka-mvn.log" >&2; exit 1; }
  log "Apache Kafka classpath: $(ls "$KAFKA_LIBS" | wc -l) jars"
  echo "$pom_hash" > "$KAFKA_LIBS/.complete"
fi

# --- Debezium's PostgreSQL connector (Maven Central), a plugin directory ------------------------
# Kafka's own jars are left out: the worker provides them (Debezium's plugin archive does the same).
DBZ_POM="$(dirname "${BASH_SOURCE[0]}")/debezium/pom.xml"
DBZ_VERSION="$(sed -n 's:.*<debezium.version>\(.*\)</debezium.version>.*:\1:p' "$DBZ_POM")"
DBZ_DIR="$CACHE/debezium-$DBZ_VERSION/debezium-connector-postgres"
dbz_hash="$(sha256sum < "$DBZ_POM" | cut -d' ' -f1)"
if [ "$(cat "$DBZ_DIR/.complete" 2>/dev/null)" != "$dbz_hash" ]; then
  log "resolving Debezium $DBZ_VERSION's PostgreSQL connector from Maven Central"
  rm -rf "$DBZ_DIR"; mkdir -p "$DBZ_DIR"
  mvn -q -B -f "$DBZ_POM" dependency:copy-dependencies -DincludeScope=runtime -DexcludeGroupIds=org.apache.kafka \
    -DoutputDirectory="$DBZ_DIR" >"$CACHE/debezium-mvn.log" 2>&1 || { tail -n 30 "$CACHE/debezium-mvn.log" >&2; exit 1; }
  echo "$dbz_hash" > "$DBZ_DIR/.complete"
fi

# --- test-only Connect plugins (compiled against the real connect-api) ------------------------
# javac/jar come with default-jdk-headless above; rebuilt only when the plugin sources change.
bash "$(dirname "${BASH_SOURCE[0]}")/plugins/build.sh"
log "ready: $CACHE"
