#!/usr/bin/env bash
# Installs the real test servers this project's end-to-end tests run against, on loopback:
#   etcd + kube-apiserver (built from Go modules by tests/env/kube/build.sh; cached by version),
#   Apache Kafka (broker, Connect and MirrorMaker 2 jars from Maven Central, tests/env/kafka);
#   Debezium's PostgreSQL connector (Maven Central) with PostgreSQL (Debian); lua5.1 and promtool (Debian's prometheus
#   package) for the Argo CD health and alert-rule tests; buildah and mmdebstrap, with which
#   tests/image builds the operator image (scripts/build-image.sh) and runs it.
# Idempotent: every step is skipped when its output is already in the cache.
# Why a source build: no registry reachable here ships a kube-apiserver binary, nor an etcd new
# enough for it (Debian bookworm's is 3.4).
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
for p in default-jdk-headless maven postgresql kcat lua5.1 prometheus buildah mmdebstrap; do
  dpkg -s "$p" >/dev/null 2>&1 || need_pkgs+=("$p")
done
if [ "${#need_pkgs[@]}" -gt 0 ]; then
  log "apt-get install ${need_pkgs[*]}"
  apt_update_once
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${need_pkgs[@]}" >/dev/null
fi

# --- etcd + kube-apiserver from Go modules (tests/env/kube) -----------------------------------
# Keyed by version: a bump of tests/env/kube/*/go.mod builds anew, an unchanged one is skipped.
# Cold: 890 s of CPU (etcd 1 min, kube-apiserver the rest; module downloads included), so about
# 8-10 minutes on 2 idle cores; 2.3 GiB resident at its peak (one compile at a time holds it).
bash "$(dirname "${BASH_SOURCE[0]}")/kube/build.sh" >/dev/null

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

# --- the Prometheus JMX exporter's java agent (Maven Central), run beside the test workers -----
# tests/env/jmx/pom.xml pins the version; Maven has no lock file, so the jar is checked against
# the SHA-256 recorded in tests/env/jmx/SHA256SUMS before the cache is marked complete.
JMX_DIR_SRC="$(cd "$(dirname "${BASH_SOURCE[0]}")/jmx" && pwd)"
JMX_VERSION="$(sed -n 's:.*<jmx.exporter.version>\(.*\)</jmx.exporter.version>.*:\1:p' "$JMX_DIR_SRC/pom.xml")"
JMX_DIR="$CACHE/jmx-exporter-$JMX_VERSION"
jmx_hash="$(cat "$JMX_DIR_SRC/pom.xml" "$JMX_DIR_SRC/SHA256SUMS" | sha256sum | cut -d' ' -f1)"
if [ "$(cat "$JMX_DIR/.complete" 2>/dev/null)" != "$jmx_hash" ]; then
  log "resolving the JMX exporter agent $JMX_VERSION from Maven Central"
  rm -rf "$JMX_DIR"; mkdir -p "$JMX_DIR"
  mvn -q -B -f "$JMX_DIR_SRC/pom.xml" dependency:copy-dependencies -DincludeScope=runtime \
    -DoutputDirectory="$JMX_DIR" >"$CACHE/jmx-mvn.log" 2>&1 || { tail -n 30 "$CACHE/jmx-mvn.log" >&2; exit 1; }
  (cd "$JMX_DIR" && sha256sum --quiet -c "$JMX_DIR_SRC/SHA256SUMS") \
    || { echo "JMX exporter jar does not match tests/env/jmx/SHA256SUMS" >&2; rm -rf "$JMX_DIR"; exit 1; }
  echo "$jmx_hash" > "$JMX_DIR/.complete"
fi

# --- test-only Connect plugins (compiled against the real connect-api) ------------------------
# javac/jar come with default-jdk-headless above; rebuilt only when the plugin sources change.
bash "$(dirname "${BASH_SOURCE[0]}")/plugins/build.sh"
log "ready: $CACHE"
