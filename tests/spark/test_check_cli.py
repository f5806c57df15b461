"""``connectops-check`` end to end from a snapshot file: in-process and as a real subprocess."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from connectops_check.cli import duration_s, main, parser
from connectops_check.snapshot import ConnectorKind, Snapshot, TaskInfo
from connectops_check.synthetic import random_snapshot
from tests.spark.check_helpers import History, member, snapshot

REPO = Path(__file__).resolve().parents[2]


def paused_sink(tmp_path: Path) -> Path:
    """A paused sink whose one partition is 140 behind and stuck: UNHEALTHY (Burrow STOP)."""
    ends = [100 + 10 * i for i in range(10)]
    snap = snapshot(
        [History("orders", 0, ends, [50] * 10)],
        members=[member(0, ("orders", 0))],
        tasks=[TaskInfo(0, "w", "PAUSED")],
        connector_state="PAUSED",
    )
    path = tmp_path / "snap.json"
    snap.save(path)
    return path


@pytest.mark.spark
def test_replay_in_process(spark: SparkSession, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "verdict.json"
    code = main(["--snapshot", str(paused_sink(tmp_path)), "--output", str(out), "--max-lag", "1000"])
    assert code == 0
    printed = json.loads(capsys.readouterr().out)
    assert printed == json.loads(out.read_text())
    assert printed["verdict"] == "UNHEALTHY"
    assert printed["headline"]["totalLag"] == 140
    assert printed["lag"]["burrow"]["worstPartitionStatus"] == "STOP"
    assert printed["settings"]["maxLag"] == 1000


@pytest.mark.spark
def test_replay_subprocess_generated_snapshot(tmp_path: Path) -> None:
    """The installed entry point's module, in its own interpreter and JVM."""
    snap_path = tmp_path / "generated.json"
    random_snapshot(200, samples=12, seed=7).save(snap_path)
    env = {**os.environ, "PYTHONPATH": str(REPO / "spark")}
    proc = subprocess.run(
        [sys.executable, "-m", "connectops_check.cli", "--snapshot", str(snap_path), "--master", "local[2]"],
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    assert doc["verdict"] == "UNHEALTHY"  # the generator always includes STOP/STALL/REWIND
    assert doc["headline"]["partitions"] == 200
    assert len(doc["lag"]["burrow"]["nonOkPartitions"]) == 20


def test_source_connector_exits_zero_without_spark(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "src.json"
    Snapshot(connector="files", kind=ConnectorKind.SOURCE).save(path)
    assert main(["--snapshot", str(path)]) == 0
    assert json.loads(capsys.readouterr().out)["verdict"] == "NOT_APPLICABLE"


def test_job_failure_exits_one(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--snapshot", str(tmp_path / "missing.json")]) == 1
    assert "FileNotFoundError" in capsys.readouterr().err


def test_undeliverable_configmap_is_a_failure(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """No cluster credentials: the verdict cannot reach the operator, so the job failed."""
    path = tmp_path / "src.json"
    Snapshot(connector="files", kind=ConnectorKind.SOURCE).save(path)
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    monkeypatch.setenv("KUBECONFIG", str(tmp_path / "no-kubeconfig"))
    out = tmp_path / "verdict.json"
    code = main(["--snapshot", str(path), "--output", str(out), "--output-configmap", "ns/check-files"])
    assert code == 1
    assert out.exists()  # the file output had already been written
    assert capsys.readouterr().out == ""


def test_argument_errors_exit_two(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as raised:
        main(["--connector", "x"])
    assert raised.value.code == 2
    with pytest.raises(SystemExit) as raised:
        main(["--snapshot", "x", "--output-configmap", "no-slash"])
    assert raised.value.code == 2


@pytest.mark.parametrize(
    ("text", "seconds"), [("10s", 10.0), ("500ms", 0.5), ("2m", 120.0), ("1.5", 1.5), ("1h", 3600.0)]
)
def test_durations(text: str, seconds: float) -> None:
    assert duration_s(text) == seconds


def test_kind_option_names_every_kind_and_nothing_else() -> None:
    assert parser().parse_args(["--kind", "mirror-checkpoint"]).kind == "mirror-checkpoint"
    assert parser().parse_args([]).kind is None  # default: class name, then stored offsets' shape
    with pytest.raises(SystemExit):
        parser().parse_args(["--kind", "mirror"])
