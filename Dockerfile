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
# The chart's appVersion: the images' tag and their OCI version label.
ARG VERSION=0.1.0

# -- builder: the wheel ------------------------------------------------------------------------------
FROM ${PYTHON_IMAGE} AS builder
WORKDIR /src
COPY pyproject.toml README.md ./
COPY requirements/operator.lock requirements/
COPY operator/ operator/
COPY spark/ spark/
COPY rules/ rules/
# In a virtualenv: a Debian base's own Python refuses pip outside one (PEP 668; .ci/run builds on
# an mmdebstrap Debian base), and on python:* images it changes nothing. The lock file travels
# with the wheel: the operator stage takes only /wheels from here.
RUN python3 -m venv /opt/build \
    && /opt/build/bin/pip wheel --no-cache-dir --no-deps --wheel-dir /wheels . \
    && cp requirements/operator.lock /wheels/operator.lock

# -- operator: `connectops run` --------------------------------------------------------------------------
FROM ${PYTHON_IMAGE} AS operator
ARG PYTHON_IMAGE
ARG VERSION
LABEL org.opencontainers.image.title="connectops-operator" \
      org.opencontainers.image.description="Kubernetes operator for Kafka Connect connectors' configuration and offsets" \
      org.opencontainers.image.source="https://github.com/connectops/connectops" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.base.name="${PYTHON_IMAGE}"
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
# Only the wheel and the lock cross over from the builder: no compilers, no sources, no build
# tools here. The virtualenv for the same reason as the builder's (the spark-check stage has one
# too). Dependencies exactly as locked (every file checked against its hash), then the wheel
# alone. kubernetes/aio (68 MB, the client's asyncio twin) is never imported: kopf talks to the
# API with aiohttp, the operator's own calls use the synchronous client; the build fails if
# anything in the image still imports it.
RUN --mount=type=bind,from=builder,source=/wheels,target=/wheels \
    python3 -m venv /opt/connectops/venv \
    && /opt/connectops/venv/bin/pip install --no-cache-dir --require-hashes --no-deps -r /wheels/operator.lock \
    && /opt/connectops/venv/bin/pip install --no-cache-dir --no-deps /wheels/connectops-*.whl \
    && /opt/connectops/venv/bin/pip check \
    && rm -rf /opt/connectops/venv/lib/python3*/site-packages/kubernetes/aio \
    && ! grep -rlq --include='*.py' -e 'kubernetes\.aio' -e 'from kubernetes import aio' /opt/connectops/venv/lib \
    && connectops --help >/dev/null \
    && /opt/connectops/venv/bin/python -c 'import connectops.handlers'
USER 10001:10001
WORKDIR /tmp
EXPOSE 8080 9090
ENTRYPOINT ["connectops", "run"]

# -- spark-check: the lag / balance job, run by the Spark operator ----------------------------------------
FROM ${SPARK_IMAGE} AS spark-check
ARG SPARK_IMAGE
ARG VERSION
LABEL org.opencontainers.image.title="connectops-spark-check" \
      org.opencontainers.image.description="connectops's lag and partition-balance check, run as a SparkApplication" \
      org.opencontainers.image.source="https://github.com/connectops/connectops" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.base.name="${SPARK_IMAGE}"
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
