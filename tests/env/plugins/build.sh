#!/usr/bin/env bash
# Builds the test-only Connect plugins under tests/env/plugins against the real connect-api and
# kafka-clients jars that provision.sh resolved into $CONNECTOPS_TESTENV_CACHE/kafka-<version>/libs:
#   mm2shapes -> $CACHE/mm2shapes.jar  (connectors with MirrorMaker 2's offset shapes under other
#                                       class names; the reset tests run the real connect-mirror)
#   testsinks -> $CACHE/testsinks.jar  (a sink that keeps Connect's default alterOffsets, i.e. does
#                                       not confirm offset changes, as most real sinks)
#   floodsource -> $CACHE/floodsource.jar  (a rate-limited source of fixed-size records whose
#                                           offsets count records, for producer-pressure tests)
#   promreporter -> $CACHE/promreporter.jar (a MetricsReporter serving Strimzi's JMX-exporter
#                                           names; for the worker's class path, not plugin.path)
#   versioned -> $CACHE/versioned/versioned-<v>/versioned-source-<v>.jar, one jar per version in
#                versioned/src/versions.txt: the same classes, the version in the manifest; the
#                directory is a plugin.path entry holding the versions side by side (KIP-891)
# Idempotent and cached: the jar is rebuilt only when the hash of its sources changes. The hash
# (recorded next to the jar as mm2shapes.jar.sha256) is the same one tests/env/plugins/__init__.py
# computes to refuse a stale jar: sha256 over "sha256sum"-style lines of every file under
# mm2shapes/src, sorted by path.
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
CACHE="${CONNECTOPS_TESTENV_CACHE:-$HOME/.cache/connectops-testenv}"
KAFKA_VERSION="$(sed -n 's:.*<kafka.version>\(.*\)</kafka.version>.*:\1:p' "$HERE/../kafka/pom.xml")"
JARS="$CACHE/kafka-$KAFKA_VERSION/libs"
log() { printf '[plugins %(%H:%M:%S)T] %s\n' -1 "$*" >&2; }

[ -f "$JARS/.complete" ] || { echo "Kafka Connect jars missing in $JARS: run tests/env/provision.sh" >&2; exit 1; }
for tool in javac jar; do
  command -v "$tool" >/dev/null || { echo "$tool not found: install a JDK (Debian: default-jdk-headless)" >&2; exit 1; }
done

sources_hash() {
  (cd "$1" && find src -type f -print | LC_ALL=C sort | while IFS= read -r f; do
     printf '%s  %s\n' "$(sha256sum < "$f" | cut -d' ' -f1)" "$f"
   done) | sha256sum | cut -d' ' -f1
}

build_plugin() {
  local name="$1" src="$HERE/$1" out="$CACHE/$1.jar" want have
  want="$(sources_hash "$src")"
  have="$(cat "$out.sha256" 2>/dev/null || true)"
  if [ -f "$out" ] && [ "$have" = "$want" ]; then
    return 0
  fi
  log "building $name.jar (sources ${want:0:12})"
  local work
  work="$(mktemp -d)"
  # shellcheck disable=SC2064  # expand now: $work is local
  trap "rm -rf '$work'" RETURN
  local cp
  cp="$(ls "$JARS"/connect-api-*.jar "$JARS"/kafka-clients-*.jar | tr '\n' ':')"
  mkdir -p "$work/classes"
  find "$src/src/main/java" -name '*.java' -print0 | xargs -0 javac --release 17 -nowarn -Xlint:-deprecation \
    -cp "$cp" -d "$work/classes"
  if [ -d "$src/src/main/resources" ]; then
    cp -R "$src/src/main/resources/." "$work/classes/"
  fi
  jar --create --file "$work/$name.jar" -C "$work/classes" .
  # Jar first, hash last: an interrupted build never looks up to date.
  mv "$work/$name.jar" "$out"
  printf '%s\n' "$want" > "$out.sha256"
  log "built $out"
}

build_versioned() {
  local name=versioned src="$HERE/versioned" out="$CACHE/versioned" want have
  want="$(sources_hash "$src")"
  have="$(cat "$out.sha256" 2>/dev/null || true)"
  if [ -d "$out" ] && [ "$have" = "$want" ]; then
    return 0
  fi
  log "building $name plugin versions (sources ${want:0:12})"
  local work cp version
  work="$(mktemp -d)"
  # shellcheck disable=SC2064  # expand now: $work is local
  trap "rm -rf '$work'" RETURN
  cp="$(ls "$JARS"/connect-api-*.jar "$JARS"/kafka-clients-*.jar | tr '\n' ':')"
  mkdir -p "$work/classes" "$work/out"
  find "$src/src/main/java" -name '*.java' -print0 | xargs -0 javac --release 17 -nowarn -cp "$cp" -d "$work/classes"
  while IFS= read -r version; do
    [ -n "$version" ] || continue
    mkdir -p "$work/out/versioned-$version"
    printf 'Implementation-Version: %s\n' "$version" > "$work/manifest-$version"
    jar --create --file "$work/out/versioned-$version/versioned-source-$version.jar" \
      --manifest "$work/manifest-$version" -C "$work/classes" .
  done < "$src/src/versions.txt"
  # Directory first, hash last: an interrupted build never looks up to date.
  rm -rf "$out"
  mv "$work/out" "$out"
  printf '%s\n' "$want" > "$out.sha256"
  log "built $out"
}

build_plugin mm2shapes
build_plugin testsinks
build_plugin floodsource
build_plugin promreporter
build_versioned
