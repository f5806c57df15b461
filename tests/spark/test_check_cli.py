"""``connectops-check`` end to end from a snapshot file: in-process and as a real subprocess."""

from __future__ import annotations

import json
import os
import shlex
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


@pytest.mark.spark
def test_each_member_gets_the_verdict_it_would_get_alone(
    spark: SparkSession, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """One run, four members: each verdict equals its single run (the members' own settings over
    the common ones; two Spark computations at once in one session), and the member that fails
    gets an error document, not the others'."""
    sink = paused_sink(tmp_path)
    source = tmp_path / "source.json"
    Snapshot(connector="files", kind=ConnectorKind.SOURCE).save(source)
    members = [
        (sink, ["--max-lag", "1000"]),
        (sink, ["--desired-state", "paused"]),
        (source, []),
    ]
    alone = []
    for i, (path, own) in enumerate(members):
        out = tmp_path / f"alone-{i}.json"
        assert main(["--snapshot", str(path), "--max-lag", "50", *own, "--output", str(out)]) == 0
        alone.append(json.loads(out.read_text()))
    capsys.readouterr()
    outs = [tmp_path / f"member-{i}.json" for i in range(len(members) + 1)]
    each = [
        shlex.join(["--snapshot", str(path), *own, "--output", str(outs[i])]) for i, (path, own) in enumerate(members)
    ]
    each.append(shlex.join(["--snapshot", str(tmp_path / "missing file.json"), "--output", str(outs[-1])]))
    code = main(["--max-lag", "50", "--parallelism", "4", *[f"--each={e}" for e in each]])
    assert code == 0
    for i, expected in enumerate(alone):
        assert json.loads(outs[i].read_text()) == expected, f"member {i}"
    assert alone[0]["settings"]["maxLag"] == 1000
    # the two members of one snapshot differ by their own settings
    assert (alone[0]["verdict"], alone[1]["verdict"]) == ("UNHEALTHY", "PAUSED")
    failed = json.loads(outs[-1].read_text())
    assert failed["verdict"] is None
    assert "FileNotFoundError" in failed["error"]
    printed = json.loads(capsys.readouterr().out)
    assert [m.get("verdict") for m in printed] == [*(a["verdict"] for a in alone), None]


def test_each_member_needs_an_output_and_cannot_nest(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    for each in ("--snapshot x", f"--snapshot x --output {tmp_path / 'o'} --each '--snapshot y'"):
        with pytest.raises(SystemExit) as raised:
            main(["--each", each])
        assert raised.value.code == 2
    err = capsys.readouterr().err
    assert "needs --output" in err
    assert "cannot hold --each" in err


def test_an_undelivered_member_fails_the_run(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    source = tmp_path / "source.json"
    Snapshot(connector="files", kind=ConnectorKind.SOURCE).save(source)
    delivered = tmp_path / "ok.json"
    code = main(
        [
            "--each",
            f"--snapshot {source} --output {delivered}",
            "--each",
            f"--snapshot {source} --output {tmp_path / 'no-such-dir' / 'v.json'}",
        ]
    )
    assert code == 1
    assert json.loads(delivered.read_text())["connector"] == "files"
    assert "verdict not delivered" in capsys.readouterr().err
