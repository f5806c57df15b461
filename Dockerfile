# syntax=docker/dockerfile:1
#
# connectops images (multi-stage):
#   docker build --target operator    -t ghcr.io/connectops/operator:0.1.0 .
#   docker build --target spark-check -t ghcr.io/connectops/spark-check:0.1.0 .
#
# Base images are pinned by version tag; pin them by digest too (FROM image:tag@sha256:...) in
# release builds. tests/test_dockerfile.py checks this file without a Docker engine: it replays the
# operator stage's install in a fresh virtualenv and checks the stages, users and tags.

ARG PYTHON_IMAGE=python:3.11.14-slim-bookworm
ARG SPARK_IMAGE=spark:4.0.1-scala2.13-java21-python3-ubuntu

# -- builder: the wheel ------------------------------------------------------------------------------
FROM ${PYTHON_IMAGE} AS builder
WORKDIR /src
COPY pyproject.toml README.md ./
COPY operator/ operator/
COPY spark/ spark/
# In a virtualenv: a Debian base's own Python refuses pip outside one (PEP 668; .ci/run builds on
# an mmdebstrap Debian base), and on python:* images it changes nothing.
RUN python3 -m venv /opt/build \
    && /opt/build/bin/pip wheel --no-cache-dir --no-deps --wheel-dir /wheels .

# -- operator: `connectops run` --------------------------------------------------------------------------
FROM ${PYTHON_IMAGE} AS operator
# MALLOC_ARENA_MAX: glibc gives each thread that allocates its own arena (up to 8 per core), and
# memory freed in one is rarely given back; the operator's Kubernetes-client and Kafka threads
# left 211-242 MiB resident after a burst of 1,000 Connector creations, 163-205 MiB with two
# arenas (benchmarks/README.md, "Memory").
ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    MALLOC_ARENA_MAX=2 \
    PATH=/opt/connectops/venv/bin:$PATH
RUN groupadd --system --gid 10001 connectops \
    && useradd --system --uid 10001 --gid 10001 --home-dir /nonexistent --shell /usr/sbin/nologin connectops
# Only the wheel crosses over from the builder: no compilers, no sources, no build tools here.
# The virtualenv for the same reason as the builder's (the spark-check stage has one too).
RUN --mount=type=bind,from=builder,source=/wheels,target=/wheels \
    python3 -m venv /opt/connectops/venv \
    && /opt/connectops/venv/bin/pip install --no-cache-dir /wheels/connectops-*.whl \
    && connectops --help >/dev/null
USER 10001:10001
WORKDIR /tmp
EXPOSE 8080 9090
ENTRYPOINT ["connectops", "run"]

# -- spark-check: the lag / balance job, run by the Spark operator ----------------------------------------
FROM ${SPARK_IMAGE} AS spark-check
# Spark's Kafka source and its dependencies, which the Spark distribution does not ship. The
# versions follow Spark 4.0.1's build (kafka.version, commons-pool2.version in spark-parent's POM);
# the build fails if they no longer match the POM of SPARK_VERSION. Each jar is checked against the
# SHA-1 Maven Central publishes with it and, when the *_SHA256 argument is set, against that pin.
ARG SPARK_VERSION=4.0.1
ARG SCALA_BINARY_VERSION=2.13
ARG KAFKA_CLIENTS_VERSION=3.9.0
ARG COMMONS_POOL2_VERSION=2.12.0
ARG MAVEN_REPO=https://repo1.maven.org/maven2
ARG SPARK_SQL_KAFKA_SHA256=""
# A checksum, not a secret (hadolint's DL3064 reacts to "TOKEN" in the name).
# hadolint ignore=DL3064
ARG SPARK_TOKEN_PROVIDER_KAFKA_SHA256=""
ARG KAFKA_CLIENTS_SHA256=""
ARG COMMONS_POOL2_SHA256=""
USER 0
SHELL ["/bin/bash", "-o", "pipefail", "-c"]
# Ubuntu jammy's python3 is 3.10 and connectops needs >= 3.11: jammy's python3.11 packages, in a
# virtualenv so nothing touches the system Python. Ubuntu package versions are not pinned: the
# archive drops superseded versions, so a pin would only break rebuilds (the base image is pinned).
# hadolint ignore=DL3008
RUN set -eux; \
    apt-get update; \
    apt-get install -y --no-install-recommends python3.11 python3.11-venv ca-certificates wget; \
    rm -rf /var/lib/apt/lists/*
RUN set -eux; \
    fetch() { \
      url="$MAVEN_REPO/$1"; jar="$SPARK_HOME/jars/$(basename "$1")"; \
      wget -nv -O "$jar" "$url"; \
      echo "$(wget -qO- "$url.sha1" | cut -c1-40)  $jar" | sha1sum -c -; \
      if [ -n "$2" ]; then echo "$2  $jar" | sha256sum -c -; fi; \
    }; \
    pom="$(wget -qO- "$MAVEN_REPO/org/apache/spark/spark-parent_${SCALA_BINARY_VERSION}/${SPARK_VERSION}/spark-parent_${SCALA_BINARY_VERSION}-${SPARK_VERSION}.pom")"; \
    echo "$pom" | grep -q "<kafka.version>${KAFKA_CLIENTS_VERSION}</kafka.version>"; \
    echo "$pom" | grep -q "<commons-pool2.version>${COMMONS_POOL2_VERSION}</commons-pool2.version>"; \
    fetch "org/apache/spark/spark-sql-kafka-0-10_${SCALA_BINARY_VERSION}/${SPARK_VERSION}/spark-sql-kafka-0-10_${SCALA_BINARY_VERSION}-${SPARK_VERSION}.jar" "$SPARK_SQL_KAFKA_SHA256"; \
    fetch "org/apache/spark/spark-token-provider-kafka-0-10_${SCALA_BINARY_VERSION}/${SPARK_VERSION}/spark-token-provider-kafka-0-10_${SCALA_BINARY_VERSION}-${SPARK_VERSION}.jar" "$SPARK_TOKEN_PROVIDER_KAFKA_SHA256"; \
    fetch "org/apache/kafka/kafka-clients/${KAFKA_CLIENTS_VERSION}/kafka-clients-${KAFKA_CLIENTS_VERSION}.jar" "$KAFKA_CLIENTS_SHA256"; \
    fetch "org/apache/commons/commons-pool2/${COMMONS_POOL2_VERSION}/commons-pool2-${COMMONS_POOL2_VERSION}.jar" "$COMMONS_POOL2_SHA256"; \
    chmod 0644 "$SPARK_HOME"/jars/*.jar
# pyspark is pinned to the image's Spark so that driver and JVM agree. check.py is the
# SparkApplication's mainApplicationFile (local:///opt/connectops/check.py, the operator's default).
RUN --mount=type=bind,from=builder,source=/wheels,target=/wheels \
    set -eux; \
    python3.11 -m venv /opt/connectops/venv; \
    wheel="$(ls /wheels/connectops-*.whl)"; \
    echo "pyspark==${SPARK_VERSION}" > /tmp/constraints.txt; \
    /opt/connectops/venv/bin/pip install --no-cache-dir --constraint /tmp/constraints.txt "${wheel}[spark]"; \
    rm /tmp/constraints.txt; \
    printf '%s\n' \
      '"""SparkApplication entry point: connectops-check with the application arguments."""' \
      'import sys' \
      'from connectops_check.cli import main' \
      'raise SystemExit(main(sys.argv[1:]))' \
      > /opt/connectops/check.py; \
    chmod 0644 /opt/connectops/check.py; \
    /opt/connectops/venv/bin/python -m py_compile /opt/connectops/check.py; \
    /opt/connectops/venv/bin/connectops-check --help >/dev/null
ENV PATH=/opt/connectops/venv/bin:$PATH \
    PYSPARK_PYTHON=/opt/connectops/venv/bin/python \
    PYSPARK_DRIVER_PYTHON=/opt/connectops/venv/bin/python \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1
# The Spark image's own non-root user (uid 185); its entrypoint (/opt/entrypoint.sh) stays.
USER 185
