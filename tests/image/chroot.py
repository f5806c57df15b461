"""Run an image built by ``scripts/build-image.sh`` the way a kubelet would, without one.

No container runtime with a kubelet's wiring is available here, so the image's root filesystem
(``buildah mount``) becomes the process's root in a private mount namespace: bound read-only
(the chart's ``readOnlyRootFilesystem: true``), a tmpfs on ``/tmp`` (the chart's emptyDir), a
minimal ``/dev``, ``/proc``, and the files the pod would get from its ServiceAccount and volumes
bound read-only under ``/run/connectops``. ``chroot --userspec`` then drops to the image's own
``USER`` and the image's ``ENTRYPOINT`` runs with the image's ``ENV`` and ``WORKDIR``, all read
from the image's config (``buildah inspect``), never restated here, so a Dockerfile that ran as
root or wrote to its own filesystem fails the test instead of passing it.

The network namespace is the host's: the test servers listen on loopback, as a pod's sidecars
would. What this does not reproduce is said in tests/image/test_operator_image.py.
"""

from __future__ import annotations

import json
import os
import shlex
import signal
import subprocess
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
#: where the pod's files (kubeconfig) appear inside the image
FILES_MOUNT = "/run/connectops"


def build(tag: str) -> str:
    """Build the operator target with buildah (scripts/build-image.sh); the image ID."""
    result = subprocess.run(
        ["bash", str(ROOT / "scripts" / "build-image.sh"), tag],
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
    )
    assert result.returncode == 0, f"build-image.sh exited {result.returncode}\n{result.stderr[-6000:]}"
    return result.stdout.strip().splitlines()[-1]


@dataclass(frozen=True)
class ImageConfig:
    user: str
    env: list[str]
    entrypoint: list[str]
    workdir: str

    @classmethod
    def of(cls, image: str) -> ImageConfig:
        raw = subprocess.run(
            ["buildah", "inspect", "--type", "image", image], capture_output=True, text=True, check=True, timeout=60
        ).stdout
        config: dict[str, Any] = json.loads(raw)["OCIv1"]["config"]
        return cls(
            user=config.get("User", ""),
            env=list(config.get("Env") or []),
            entrypoint=list(config.get("Entrypoint") or []),
            workdir=config.get("WorkingDir") or "/",
        )

    @property
    def ids(self) -> tuple[int, int]:
        """The USER as (uid, gid); numeric, as the Dockerfile writes it (a name would need the
        image's /etc/passwd, and a kubelet's runAsNonRoot refuses one it cannot verify)."""
        uid, _, gid = self.user.partition(":")
        return int(uid or 0), int(gid or uid or 0)


class ImageProcess:
    """The image's entrypoint, with ``args``, as a process on this machine (see the module doc)."""

    def __init__(self, image: str, files: dict[str, bytes], run_dir: Path) -> None:
        self.image = image
        self.config = ImageConfig.of(image)
        self.run_dir = run_dir
        self.files_dir = run_dir / "files"
        self.files_dir.mkdir(parents=True)
        uid, gid = self.config.ids
        for name, data in files.items():
            path = self.files_dir / name
            path.write_bytes(data)
            # readable by the image's user only, as a projected Secret with defaultMode 0400 + fsGroup
            os.chown(path, uid, gid)
            path.chmod(0o400)
        os.chown(self.files_dir, uid, gid)
        self.files_dir.chmod(0o500)
        self.container = ""
        self.rootfs = ""
        self.proc: subprocess.Popen[bytes] | None = None
        self.log_path = run_dir / "operator.log"
        self.pid_path = run_dir / "pid"

    def start(self, args: list[str], env: dict[str, str]) -> None:
        name = f"connectops-test-{uuid.uuid4().hex[:8]}"
        self.container = subprocess.run(
            ["buildah", "from", "--pull-never", "--name", name, self.image],
            capture_output=True,
            text=True,
            check=True,
            timeout=120,
        ).stdout.strip()
        self.rootfs = subprocess.run(
            ["buildah", "mount", self.container], capture_output=True, text=True, check=True, timeout=60
        ).stdout.strip()
        uid, gid = self.config.ids
        environment = [*self.config.env, *(f"{k}={v}" for k, v in env.items())]
        command = [*self.config.entrypoint, *args]
        q = shlex.quote
        root = q(self.rootfs)
        script = "\n".join(
            [
                "set -eu",
                "mount --make-rprivate /",
                f"mount --bind {root} {root}",
                f"mount -o remount,bind,ro {root}",
                f"mount -t proc proc {root}/proc",
                f"mount -t tmpfs -o size=64m,mode=1777,nosuid,nodev tmpfs {root}/tmp",
                f"mount -t tmpfs -o size=1m,mode=0755,nosuid tmpfs {root}/dev",
                *(
                    f"touch {root}/dev/{dev} && mount --bind /dev/{dev} {root}/dev/{dev}"
                    for dev in ("null", "zero", "random", "urandom")
                ),
                f"mount -o remount,bind,ro {root}/dev",
                f"mount -t tmpfs -o size=1m,mode=0755 tmpfs {root}/run",
                f"mkdir {root}{FILES_MOUNT}",
                f"mount --bind {q(str(self.files_dir))} {root}{FILES_MOUNT}",
                f"mount -o remount,bind,ro {root}{FILES_MOUNT}",
                f"mount -o remount,ro {root}/run",
                f"echo $$ > {q(str(self.pid_path))}",
                "exec chroot --userspec="
                + q(f"{uid}:{gid}")
                + f" --groups={gid} {root} /usr/bin/env -i -C {q(self.config.workdir)} "
                + " ".join(q(e) for e in environment)
                + " "
                + " ".join(q(c) for c in command),
            ]
        )
        log = self.log_path.open("wb")
        self.proc = subprocess.Popen(
            ["unshare", "--mount", "--fork", "--kill-child=SIGTERM", "sh", "-c", script],
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        log.close()

    @property
    def pid(self) -> int:
        """The entrypoint's process: the pid of the shell, once its exec chain (sh -> chroot ->
        env) has reached the entrypoint. Before that the pid is still the shell's or chroot's,
        root's by design; read then (CI did, on a busy machine) it says uid 0 of a process the
        image never ran."""
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            if self.pid_path.exists() and (text := self.pid_path.read_text().strip()):
                pid = int(text)
                if _past_launcher(pid):
                    return pid
            assert self.proc is not None
            assert self.proc.poll() is None, self.log()
            time.sleep(0.1)
        raise AssertionError(f"the image's entrypoint never started\n{self.log()}")

    def status(self) -> dict[str, str]:
        """/proc/PID/status as the kernel reports it."""
        lines = Path(f"/proc/{self.pid}/status").read_text().splitlines()
        return {k: v.strip() for k, _, v in (line.partition(":") for line in lines)}

    def mounts(self) -> dict[str, tuple[str, set[str]]]:
        """The process's own view of its mounts (/proc/PID/mountinfo: paths relative to its root):
        mount point -> (filesystem type, mount options)."""
        found: dict[str, tuple[str, set[str]]] = {}
        for line in Path(f"/proc/{self.pid}/mountinfo").read_text().splitlines():
            fields = line.split()
            sep = fields.index("-")
            found[fields[4]] = (fields[sep + 1], set(fields[5].split(",")))
        return found

    def log(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(20)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(10)
        if self.container:
            subprocess.run(["buildah", "umount", self.container], capture_output=True, check=False, timeout=60)
            subprocess.run(["buildah", "rm", self.container], capture_output=True, check=False, timeout=60)
            self.container = ""


#: what runs between the shell's ``echo $$`` and the image's entrypoint, under the same pid
_LAUNCHERS = frozenset({"sh", "dash", "bash", "chroot", "env"})


def _past_launcher(pid: int) -> bool:
    """Whether the process ``pid`` has exec'd past the launch chain (its executable is no longer
    the shell, chroot or env)."""
    try:
        return os.path.basename(os.readlink(f"/proc/{pid}/exe")) not in _LAUNCHERS
    except OSError:  # exiting, or between two execs
        return False
