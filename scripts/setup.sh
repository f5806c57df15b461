#!/usr/bin/env bash
# One-time (idempotent) set-up of a development machine: a virtualenv with the project and its
# dev/spark extras, and the real test servers (tests/env/provision.sh: kube-apiserver, Apache Kafka,
# Kafka Connect). Safe to re-run; everything cached is reused.
set -euo pipefail
cd "$(dirname "$0")/.."
PY="${PYTHON:-python3}"
if [ ! -x .venv/bin/python ]; then
  "$PY" -m venv .venv
fi
.venv/bin/python -m pip install -q --upgrade pip >/dev/null
.venv/bin/python -m pip install -q -e '.[dev,spark]'
bash tests/env/provision.sh
