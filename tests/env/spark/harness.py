"""``FakeSparkOperator``: plays the kubeflow spark-operator controller for SparkApplications.

No spark-operator can run here (no kubelet, so no driver pods), so this harness watches the
SparkApplications of one namespace and drives their ``status`` the way the upstream controller
does, running the job itself as a local process (``python -m connectops_check.cli <arguments>``,
Spark in ``local[2]`` mode) in place of the driver pod.

Upstream facts it follows (kubeflow/spark-operator: ``api/v1beta2/sparkapplication_types.go``,
the SparkApplication reconciler and ``util.ShouldRetry``; the CRD is at commit d376e4d):

``ApplicationStateType`` (``status.applicationState.state``)::

    ""                   ApplicationStateNew (never written: a new app simply has no status)
    "SUBMITTED"          ApplicationStateSubmitted
    "RUNNING"            ApplicationStateRunning
    "COMPLETED"          ApplicationStateCompleted           terminal
    "FAILED"             ApplicationStateFailed              terminal
    "SUBMISSION_FAILED"  ApplicationStateFailedSubmission
    "PENDING_RERUN"      ApplicationStatePendingRerun
    "INVALIDATING"       ApplicationStateInvalidating        (spec changed while running)
    "SUCCEEDING"         ApplicationStateSucceeding          driver exited 0, not yet COMPLETED
    "FAILING"            ApplicationStateFailing             driver failed, not yet FAILED
    "UNKNOWN"            ApplicationStateUnknown

(upstream's types at commit 07f3cecdbf9afe670d991dfbdb911334eb29930b list exactly these eleven;
newer controllers, matching this CRD's ``spec.suspend``, also handle ``ApplicationStateSuspending``,
``ApplicationStateSuspended`` and ``ApplicationStateResuming``, whose string values were not
checked. This harness never writes those, nor INVALIDATING or UNKNOWN.)

``status`` fields (``SparkApplicationStatus``; CRD: ``status.required: [driverInfo]``)::

    applicationState.state         string, required when applicationState is present
    applicationState.errorMessage  string, omitempty
    sparkApplicationId             string, omitempty: Spark's app id (``spark-<32 hex>``), read
                                   from the driver pod's ``spark-app-selector`` label
    submissionID                   string, omitempty: a fresh UUID per submission attempt
    lastSubmissionAttemptTime      date-time, nullable (zero value serialises as null)
    terminationTime                date-time, nullable: set when the driver terminates
    driverInfo.podName             string: ``spec.driver.podName`` or ``<app name>-driver``
    driverInfo.webUI*              string/int32: only with the UI service enabled (not here)
    executorState                  map executor pod name -> PENDING/RUNNING/COMPLETED/FAILED/
                                   UNKNOWN, omitempty (local mode has no executor pods: absent)
    executionAttempts              int32, omitempty: +1 per successful submission
    submissionAttempts             int32, omitempty: +1 per submission attempt

Transitions (upstream controller; Status().Update with retry on conflict after each step)::

    new:       submit -> SUBMITTED (submissionAttempts+1, executionAttempts+1, submissionID,
               lastSubmissionAttemptTime, driverInfo.podName)
               or SUBMISSION_FAILED with errorMessage "failed to submit spark application: ..."
    SUBMITTED: driver pod seen -> sparkApplicationId; pod Pending stays SUBMITTED, Running ->
               RUNNING; Succeeded -> SUCCEEDING, Failed -> FAILING (both set terminationTime;
               Failed sets errorMessage "driver container failed with ExitCode: N, Reason: R")
    SUCCEEDING: restartPolicy Always -> PENDING_RERUN, else COMPLETED
    FAILING / SUBMISSION_FAILED: ShouldRetry (Always; or OnFailure with attempts <= the
               onFailureRetries / onSubmissionFailureRetries) -> after attempts x interval
               seconds, rerun / resubmit; else FAILED (SUBMISSION_FAILED -> FAILED also sets
               terminationTime and keeps the errorMessage)

What differs: the "driver" is a local process (``mainApplicationFile`` is not used: the job is
``python -m <module> <spec.arguments>``, run in its own log directory, so paths in the arguments
must be absolute); its environment gets ``spec.driver.env`` as the kubelet would fill it (plain
``value`` and ``valueFrom.secretKeyRef``, read from the namespace's Secrets; a missing one is a
harness error, where the kubelet would leave the pod in CreateContainerConfigError); its stderr
tail is appended to the FAILING/FAILED errorMessage; the retry interval defaults to 5 s when
unset (upstream's defaulting webhook value);
there is no UI service, no executor pods and no events.
"""

from __future__ import annotations

import base64
import contextlib
import os
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import kubernetes
from kubernetes.client.exceptions import ApiException

from tests.env.spark.crd import GROUP, PLURAL, VERSION

SUBMITTED = "SUBMITTED"
RUNNING = "RUNNING"
COMPLETED = "COMPLETED"
FAILED = "FAILED"
SUBMISSION_FAILED = "SUBMISSION_FAILED"
PENDING_RERUN = "PENDING_RERUN"
INVALIDATING = "INVALIDATING"
SUCCEEDING = "SUCCEEDING"
FAILING = "FAILING"
UNKNOWN = "UNKNOWN"
TERMINAL_STATES = frozenset({COMPLETED, FAILED})

_REPO = Path(__file__).resolve().parents[3]
#: The project venv's interpreter (it has pyspark and connectops_check), else the running one.
_VENV_PYTHON = _REPO / ".venv" / "bin" / "python"
DEFAULT_PYTHON = _VENV_PYTHON if _VENV_PYTHON.exists() else Path(sys.executable)
DEFAULT_MODULE = "connectops_check.cli"
#: Upstream's defaulting webhook sets both retry intervals to 5 s when a restartPolicy retries.
DEFAULT_RETRY_INTERVAL_S = 5.0

#: Which apps an option applies to: all (True), none (False), these names, or a predicate on the
#: SparkApplication object.
AppSelector = bool | Collection[str] | Callable[[Mapping[str, Any]], bool]


def _selected(selector: AppSelector, app: Mapping[str, Any]) -> bool:
    if isinstance(selector, bool):
        return selector
    if callable(selector):
        return bool(selector(app))
    return str(app["metadata"]["name"]) in selector


def _now() -> str:
    """metav1.Time's wire format: RFC 3339, second precision, UTC."""
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def driver_pod_name(app: Mapping[str, Any]) -> str:
    """upstream util.GetDriverPodName."""
    spec = app.get("spec") or {}
    name = (spec.get("driver") or {}).get("podName")
    if name:
        return str(name)
    conf_name = (spec.get("sparkConf") or {}).get("spark.kubernetes.driver.pod.name")
    if conf_name:
        return str(conf_name)
    return f"{app['metadata']['name']}-driver"


@dataclass(frozen=True)
class Transition:
    """One status write: the state written and the whole status as the server returned it."""

    state: str
    status: Mapping[str, Any]
    #: ``time.monotonic()`` when the write succeeded.
    at: float

    @property
    def error_message(self) -> str | None:
        message = (self.status.get("applicationState") or {}).get("errorMessage")
        return None if message is None else str(message)


@dataclass(frozen=True)
class JobRun:
    """One local run of the job (one "driver pod")."""

    argv: tuple[str, ...]
    returncode: int | None  # None: still running, or killed before it exited
    stdout_path: Path
    stderr_path: Path
    killed: bool = False

    @property
    def stdout(self) -> str:
        return self.stdout_path.read_text(encoding="utf-8", errors="replace")

    @property
    def stderr(self) -> str:
        return self.stderr_path.read_text(encoding="utf-8", errors="replace")


class _Cancelled(Exception):
    """The app was deleted (or replaced) or the harness stopped: abandon its lifecycle."""


@dataclass
class _App:
    namespace: str
    name: str
    uid: str
    cancel: threading.Event = field(default_factory=threading.Event)
    history: list[Transition] = field(default_factory=list)
    jobs: list[JobRun] = field(default_factory=list)
    process: subprocess.Popen[bytes] | None = None
    thread: threading.Thread | None = None


class FakeSparkOperator:
    """Drives SparkApplications in ``namespace`` through the upstream controller's states.

    Use as a context manager (or ``start()`` / ``stop()``). Each new SparkApplication (one with
    no ``status.applicationState.state``) gets its own worker thread, so a hanging job does not
    hold up others; apps that already have a state when first seen are left alone.

    ``kubeconfig_path`` is given to the job as ``KUBECONFIG`` so ``--output-configmap`` can
    write its verdict. ``extra_args`` are appended to ``spec.arguments``; ``--master local[2]``
    is added unless the arguments already choose a master. ``run_job=False`` skips the process
    (the driver "succeeds" at once). ``fail_submission`` makes submission fail, with
    ``submission_error`` as the cause; ``hang`` leaves the app RUNNING until it is deleted or
    the harness stops (the job is not started). Both take an :data:`AppSelector`.
    ``max_drivers`` plays a cluster with room for that many driver pods: an application whose
    driver finds no room stays SUBMITTED (upstream: the pod is Pending) until one ends.
    """

    def __init__(
        self,
        api_client: Any,
        namespace: str,
        *,
        kubeconfig_path: str | os.PathLike[str],
        python: str | os.PathLike[str] = DEFAULT_PYTHON,
        extra_args: Sequence[str] = (),
        run_job: bool = True,
        fail_submission: AppSelector = False,
        submission_error: str = "spark-submit exited with code 1 (FakeSparkOperator fail_submission)",
        hang: AppSelector = False,
        module: str = DEFAULT_MODULE,
        master: str = "local[2]",
        poll_interval: float = 0.5,
        pending_seconds: float = 0.2,
        job_timeout: float = 600.0,
        log_dir: str | os.PathLike[str] | None = None,
        env: Mapping[str, str] | None = None,
        max_drivers: int | None = None,
    ) -> None:
        self.namespace = namespace
        self._room = None if max_drivers is None else threading.BoundedSemaphore(max_drivers)
        #: figures for benchmarks: drivers running now and at most
        self.drivers_running = 0
        self.drivers_peak = 0
        self.kubeconfig_path = Path(kubeconfig_path)
        self.python = Path(python)
        self.extra_args = tuple(extra_args)
        self.run_job = run_job
        self.fail_submission = fail_submission
        self.submission_error = submission_error
        self.hang = hang
        self.module = module
        self.master = master
        self.poll_interval = poll_interval
        self.pending_seconds = pending_seconds
        self.job_timeout = job_timeout
        self.log_dir = Path(log_dir) if log_dir is not None else Path(tempfile.mkdtemp(prefix="fake-spark-"))
        self.extra_env = dict(env or {})
        #: Unexpected exceptions from the threads; ``stop()`` raises the first.
        self.errors: list[BaseException] = []
        # Any: custom-object calls return untyped JSON (annotated as ``object``).
        self._api: Any = kubernetes.client.CustomObjectsApi(api_client)
        self._core: Any = kubernetes.client.CoreV1Api(api_client)
        self._lock = threading.Lock()
        self._changed = threading.Condition(self._lock)
        self._stop = threading.Event()
        self._apps: dict[str, _App] = {}  # by uid
        self._latest: dict[str, str] = {}  # name -> uid of the newest app with that name
        self._thread: threading.Thread | None = None

    # --- lifecycle of the harness -------------------------------------------------------------

    def start(self) -> FakeSparkOperator:
        if self._thread is not None:
            raise RuntimeError("already started")
        self._thread = threading.Thread(target=self._watch, name=f"fake-spark-{self.namespace}", daemon=True)
        self._thread.start()
        return self

    def stop(self, *, raise_errors: bool = True, timeout: float = 30.0) -> None:
        """Stop watching, kill running jobs, join every thread."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout)  # first: no new app threads after this
        with self._lock:
            apps = list(self._apps.values())
        for app in apps:
            app.cancel.set()
            self._kill(app)
        for app in apps:
            if app.thread is not None:
                app.thread.join(timeout)
        if raise_errors and self.errors:
            raise RuntimeError(f"FakeSparkOperator thread failed: {self.errors[0]!r}") from self.errors[0]

    def __enter__(self) -> FakeSparkOperator:
        return self.start()

    def __exit__(self, exc_type: object, exc: object, tb: object) -> None:
        self.stop(raise_errors=exc_type is None)

    # --- what tests read ----------------------------------------------------------------------

    def _app(self, name: str) -> _App | None:
        uid = self._latest.get(name)
        return None if uid is None else self._apps.get(uid)

    def history(self, name: str) -> list[Transition]:
        """Every status write for the newest app called ``name``, in order."""
        with self._lock:
            app = self._app(name)
            return [] if app is None else list(app.history)

    def transitions(self, name: str) -> list[str]:
        """The states written for ``name``, consecutive repeats collapsed."""
        states: list[str] = []
        for t in self.history(name):
            if not states or states[-1] != t.state:
                states.append(t.state)
        return states

    def jobs(self, name: str) -> list[JobRun]:
        with self._lock:
            app = self._app(name)
            return [] if app is None else list(app.jobs)

    def wait_for_state(self, name: str, states: str | Collection[str], timeout: float = 60.0) -> Transition:
        """Block until the newest write for ``name`` has one of ``states``; return it."""
        wanted = {states} if isinstance(states, str) else set(states)
        deadline = time.monotonic() + timeout
        with self._changed:
            while True:
                app = self._app(name)
                if app is not None and app.history and app.history[-1].state in wanted:
                    return app.history[-1]
                if self.errors:
                    raise RuntimeError(f"FakeSparkOperator thread failed: {self.errors[0]!r}") from self.errors[0]
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    seen = [] if app is None else [t.state for t in app.history]
                    raise TimeoutError(f"{name}: no state in {sorted(wanted)} after {timeout}s; written: {seen}")
                self._changed.wait(min(remaining, 1.0))

    # --- the watch loop -----------------------------------------------------------------------

    def _watch(self) -> None:
        while not self._stop.is_set():
            try:
                self._poll_once()
            except Exception as error:  # recorded: stop() and wait_for_state() raise it
                with self._changed:
                    self.errors.append(error)
                    self._changed.notify_all()
                return
            self._stop.wait(self.poll_interval)

    def _poll_once(self) -> None:
        listing = self._api.list_namespaced_custom_object(GROUP, VERSION, self.namespace, PLURAL)
        present: set[str] = set()
        for obj in listing.get("items", []):
            meta = obj["metadata"]
            uid = str(meta["uid"])
            present.add(uid)
            with self._lock:
                known = uid in self._apps
            if known or meta.get("deletionTimestamp"):
                continue
            state = ((obj.get("status") or {}).get("applicationState") or {}).get("state")
            if state:  # not new: someone else's, or from before this harness started
                continue
            app = _App(self.namespace, str(meta["name"]), uid)
            app.thread = threading.Thread(target=self._run_app, args=(app, obj), name=f"fake-spark-{app.name}")
            with self._lock:
                self._apps[uid] = app
                self._latest[app.name] = uid
            app.thread.start()
        with self._lock:
            gone = [a for uid, a in self._apps.items() if uid not in present and not a.cancel.is_set()]
        for app in gone:  # deleted: upstream deletes the driver pod
            app.cancel.set()
            self._kill(app)

    # --- one application ----------------------------------------------------------------------

    def _run_app(self, app: _App, obj: Mapping[str, Any]) -> None:
        try:
            self._lifecycle(app, obj)
        except _Cancelled:
            pass
        except Exception as error:
            with self._changed:
                self.errors.append(error)
                self._changed.notify_all()
        finally:
            self._kill(app)

    def _lifecycle(self, app: _App, obj: Mapping[str, Any]) -> None:
        spec: Mapping[str, Any] = obj.get("spec") or {}
        status: dict[str, Any] = {"driverInfo": {}, "lastSubmissionAttemptTime": None, "terminationTime": None}
        while True:
            # -- submission (ApplicationStateNew / PENDING_RERUN -> submitSparkApplication)
            while not self._submit(app, obj, status):
                if not _should_retry(spec, status):
                    status["applicationState"]["state"] = FAILED  # keeps the errorMessage
                    status["terminationTime"] = _now()
                    self._write(app, status)
                    return
                self._wait_retry(app, spec, status, "onSubmissionFailureRetryInterval")
            # -- the driver pod: Pending (app id known), then Running
            status["sparkApplicationId"] = f"spark-{uuid.uuid4().hex}"
            self._write(app, status)  # still SUBMITTED
            self._sleep(app, self.pending_seconds)
            returncode, message = self._run_driver(app, obj, status)
            status["terminationTime"] = _now()
            if returncode == 0:
                status["applicationState"] = {"state": SUCCEEDING}
                self._write(app, status)
                if _should_retry(spec, status):  # restartPolicy Always
                    self._rerun(app, status)
                    continue
                status["applicationState"] = {"state": COMPLETED}
                self._write(app, status)
                return
            status["applicationState"] = {"state": FAILING, "errorMessage": message}
            self._write(app, status)
            if _should_retry(spec, status):
                self._wait_retry(app, spec, status, "onFailureRetryInterval")
                self._rerun(app, status)
                continue
            status["applicationState"] = {"state": FAILED, "errorMessage": message}
            self._write(app, status)
            return

    def _run_driver(self, app: _App, obj: Mapping[str, Any], status: dict[str, Any]) -> tuple[int, str]:
        """RUNNING once the driver has room, then the job; the room is given back when it ends."""
        if self._room is not None:
            while not self._room.acquire(timeout=0.2):  # the pod is Pending: still SUBMITTED
                self._sleep(app, 0)
        try:
            with self._lock:
                self.drivers_running += 1
                self.drivers_peak = max(self.drivers_peak, self.drivers_running)
            status["applicationState"] = {"state": RUNNING}
            self._write(app, status)
            return self._drive(app, obj)
        finally:
            with self._lock:
                self.drivers_running -= 1
            if self._room is not None:
                self._room.release()

    def _submit(self, app: _App, obj: Mapping[str, Any], status: dict[str, Any]) -> bool:
        status["submissionID"] = str(uuid.uuid4())
        status["driverInfo"] = {"podName": driver_pod_name(obj)}
        status["lastSubmissionAttemptTime"] = _now()
        status["submissionAttempts"] = int(status.get("submissionAttempts") or 0) + 1
        if _selected(self.fail_submission, obj):
            status["applicationState"] = {
                "state": SUBMISSION_FAILED,
                "errorMessage": f"failed to submit spark application: {self.submission_error}",
            }
            self._write(app, status)
            return False
        status["applicationState"] = {"state": SUBMITTED}
        status["executionAttempts"] = int(status.get("executionAttempts") or 0) + 1
        self._write(app, status)
        return True

    def _rerun(self, app: _App, status: dict[str, Any]) -> None:
        """upstream resetSparkApplicationStatus for a rerun, then PENDING_RERUN."""
        for key in ("sparkApplicationId", "submissionID", "executorState"):
            status.pop(key, None)
        status["submissionAttempts"] = 0
        status["lastSubmissionAttemptTime"] = None
        status["terminationTime"] = None
        status["driverInfo"] = {}
        status["applicationState"] = {"state": PENDING_RERUN}
        self._write(app, status)

    def _wait_retry(self, app: _App, spec: Mapping[str, Any], status: Mapping[str, Any], interval_key: str) -> None:
        """upstream TimeUntilNextRetryDue: attempts x interval after the last submission attempt."""
        interval = (spec.get("restartPolicy") or {}).get(interval_key)
        seconds = DEFAULT_RETRY_INTERVAL_S if interval is None else float(interval)
        attempts = max(int(status.get("submissionAttempts") or 0), 1)
        self._sleep(app, seconds * attempts)

    def _sleep(self, app: _App, seconds: float) -> None:
        if app.cancel.wait(seconds) or self._stop.is_set():
            raise _Cancelled

    def _job_argv(self, obj: Mapping[str, Any]) -> list[str]:
        args = [str(a) for a in ((obj.get("spec") or {}).get("arguments") or [])] + list(self.extra_args)
        if self.master and not any(a == "--master" or a.startswith("--master=") for a in args):
            args += ["--master", self.master]
        return [str(self.python), "-m", self.module, *args]

    def _drive(self, app: _App, obj: Mapping[str, Any]) -> tuple[int, str]:
        """Run the "driver"; return its exit code and, on failure, the upstream-style message."""
        if _selected(self.hang, obj):
            while True:
                self._sleep(app, 3600.0)
        if not self.run_job:
            return 0, ""
        argv = self._job_argv(obj)
        run_dir = self.log_dir / f"{app.name}-{app.uid[:8]}-{len(app.jobs) + 1}"
        run_dir.mkdir(parents=True, exist_ok=True)
        env = {**os.environ, **self.extra_env, **self._driver_env(obj), "KUBECONFIG": str(self.kubeconfig_path)}
        env.pop("KUBERNETES_SERVICE_HOST", None)  # the job must use KUBECONFIG, not in-cluster config
        env.setdefault("PYSPARK_PYTHON", str(self.python))
        stdout_path, stderr_path = run_dir / "stdout", run_dir / "stderr"
        with stdout_path.open("wb") as out, stderr_path.open("wb") as err:
            with self._lock:
                if app.cancel.is_set() or self._stop.is_set():
                    raise _Cancelled
                app.process = subprocess.Popen(argv, stdout=out, stderr=err, env=env, cwd=run_dir)
                app.jobs.append(JobRun(tuple(argv), None, stdout_path, stderr_path))
            process = app.process
            deadline = time.monotonic() + self.job_timeout
            timed_out = False
            while process.poll() is None:
                if app.cancel.is_set() or self._stop.is_set():
                    self._kill(app)
                    self._finish_job(app, process, killed=True)
                    raise _Cancelled
                if time.monotonic() > deadline:
                    timed_out = True
                    self._kill(app)
                    break
                time.sleep(0.1)
        returncode = process.wait()
        self._finish_job(app, process, killed=timed_out)
        if returncode == 0:
            return 0, ""
        reason = "DeadlineExceeded" if timed_out else "Error"
        message = f"driver container failed with ExitCode: {returncode}, Reason: {reason}"
        tail = _tail(stderr_path.read_text(encoding="utf-8", errors="replace"))
        return returncode, f"{message}\n{tail}" if tail else message

    def _driver_env(self, obj: Mapping[str, Any]) -> dict[str, str]:
        """``spec.driver.env`` as the kubelet resolves it into the driver container."""
        namespace = obj["metadata"]["namespace"]
        env: dict[str, str] = {}
        for entry in ((obj.get("spec") or {}).get("driver") or {}).get("env") or []:
            ref = (entry.get("valueFrom") or {}).get("secretKeyRef")
            if ref is None:
                env[entry["name"]] = str(entry.get("value", ""))
                continue
            secret = self._core.read_namespaced_secret(ref["name"], namespace)
            data = secret.data or {}
            if ref["key"] not in data:
                raise RuntimeError(
                    f"driver env {entry['name']}: Secret {namespace}/{ref['name']} has no key {ref['key']}"
                )
            env[entry["name"]] = base64.b64decode(data[ref["key"]]).decode()
        return env

    def _finish_job(self, app: _App, process: subprocess.Popen[bytes], *, killed: bool) -> None:
        with self._lock:
            last = app.jobs[-1]
            app.jobs[-1] = JobRun(last.argv, process.returncode, last.stdout_path, last.stderr_path, killed)
            app.process = None

    def _kill(self, app: _App) -> None:
        process = app.process
        if process is not None and process.poll() is None:
            process.kill()
            with contextlib.suppress(subprocess.TimeoutExpired):
                process.wait(10)

    # --- writing status -----------------------------------------------------------------------

    def _write(self, app: _App, status: Mapping[str, Any]) -> None:
        """Status().Update with retry on conflict; empty strings are omitted like Go's omitempty."""
        body_status = _omit_empty(status)
        for _ in range(20):
            if app.cancel.is_set() or self._stop.is_set():
                raise _Cancelled
            try:
                obj = self._api.get_namespaced_custom_object(GROUP, VERSION, app.namespace, PLURAL, app.name)
            except ApiException as error:
                if error.status == 404:
                    raise _Cancelled from error
                raise
            if obj["metadata"]["uid"] != app.uid or obj["metadata"].get("deletionTimestamp"):
                raise _Cancelled
            obj["status"] = body_status
            try:
                written = self._api.replace_namespaced_custom_object_status(
                    GROUP, VERSION, app.namespace, PLURAL, app.name, obj
                )
            except ApiException as error:
                if error.status == 409:
                    continue
                if error.status == 404:
                    raise _Cancelled from error
                raise
            stored = dict(written.get("status") or {})
            state = str((stored.get("applicationState") or {}).get("state", ""))
            with self._changed:
                app.history.append(Transition(state, stored, time.monotonic()))
                self._changed.notify_all()
            return
        raise RuntimeError(f"{app.name}: status update kept conflicting")


def _omit_empty(value: Any) -> Any:
    """Drop "" strings and 0 counters (Go omitempty); keep None (nullable metav1.Time)."""
    if isinstance(value, Mapping):
        out: dict[str, Any] = {}
        for key, item in value.items():
            if item == "" or (key in ("submissionAttempts", "executionAttempts") and item == 0):
                continue
            out[key] = _omit_empty(item)
        return out
    return value


def _should_retry(spec: Mapping[str, Any], status: Mapping[str, Any]) -> bool:
    """upstream util.ShouldRetry."""
    policy = spec.get("restartPolicy") or {}
    kind = policy.get("type")
    state = (status.get("applicationState") or {}).get("state")
    if state == SUCCEEDING:
        return bool(kind == "Always")
    if state == FAILING:
        limit, attempts = policy.get("onFailureRetries"), status.get("executionAttempts") or 0
    elif state == SUBMISSION_FAILED:
        limit, attempts = policy.get("onSubmissionFailureRetries"), status.get("submissionAttempts") or 0
    else:
        return False
    if kind == "Always":
        return True
    return bool(kind == "OnFailure" and limit is not None and int(attempts) <= int(limit))


def _tail(text: str, lines: int = 8, chars: int = 2000) -> str:
    return "\n".join(text.strip().splitlines()[-lines:])[-chars:]
