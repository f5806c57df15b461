"""``FakeConnect``: an in-memory Kafka Connect worker group behind the interface the reconcilers
call (:class:`connectops.adapters.connect_rest.ConnectApi`, which ``ConnectClient`` implements over
REST). It answers what the real worker answers, as the client turns it into Python: the same
return values and the same typed errors (``ConnectNotFound`` for a 404, ``ConnectConflict`` for
"already exists", ``ConnectRejected`` for a 400 …). ``tests/adapters/test_connect_contract.py``
runs one set of scenarios against this double and against a real Kafka Connect 4.3 worker.

Modelled (each checked against the real worker by the contract test):

- ``POST /connectors`` validates first (400 on errors, nothing created), answers 409 when the name
  exists, honours ``initial_state`` (KIP-980, 3.7+); ``PUT .../config`` creates or replaces, and
  refuses a ``name`` that differs from the URL's;
- target states: pause/resume/stop from any state; a STOPPED connector has no tasks, a PAUSED one
  pauses its tasks; FileStreamSource makes one task whatever ``tasks.max`` says;
- validation: the worker's own keys (``name``, ``connector.class``, ``tasks.max``, the override
  policy) plus each plugin's required keys; unknown keys are not errors; an unknown class is
  refused as a request error; classes resolve by full name, simple name or alias;
- plugin versions (KIP-891): several versions of a class side by side; ``connector.plugin.version``
  (a version is exact, a Maven range picks the newest inside) chooses the one that runs, and the
  status shows its version; a pin no installed version matches is a validation error on that key
  (Connect skips the rest of the validation); the plugin list (``connectorsOnly=false``) has one
  entry per version, converters included;
- restarts (KIP-745): connector only, with tasks, only the failed ones; a task whose start fails
  for its config (FileStreamSink to a directory) fails again after every restart until the config
  changes;
- offsets (KIP-875): readable in any state; altered or reset only when STOPPED (400 otherwise);
  a running connector's tasks may hold a position they commit only as they stop
  (:meth:`FakeConnect.commit_at_stop`), as Connect's tasks commit at stop what the last periodic
  commit (every ``offset.flush.interval.ms``) left behind.
  With a :class:`~tests.doubles.kafka.FakeKafka` attached, a sink's offsets are its consumer
  group's committed offsets there (``connect-<name>`` unless ``consumer.override.group.id``), as
  the worker reads and writes them through the admin client; otherwise they are kept here.

Faults a test injects: the worker unreachable or starting (KIP-1017), one-shot errors on a named
call (a rebalance the client's retries did not outlast), an answer lost after the call took effect
(a timeout or a 5xx after the write), a failed task or connector, a stop that the status shows
late (``PUT /stop`` answers 202 before the herder has stopped the tasks), offsets writes that are
acknowledged and not applied (to exercise a caller's read-back). Every call
is recorded in :attr:`FakeConnect.calls`; :meth:`FakeConnect.writes` lists the ones that change
something.
"""

from __future__ import annotations

import copy
import json
import os
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from connectops.adapters.connect_rest import (
    ConnectApi,
    ConnectConflict,
    ConnectError,
    ConnectNotFound,
    ConnectorState,
    ConnectRejected,
    ConnectUnavailable,
    ListedConnector,
    Plugin,
    ServerInfo,
    TaskState,
    ValidationResult,
    WorkerHealth,
)
from connectops.models.connector import CONNECTOR_VERSION_KEY, CONVERTER_CLASS_KEYS, CONVERTER_VERSION_KEYS
from connectops.models.maven_version import MavenVersion, requirement
from connectops.planning.connector import capabilities_for
from connectops.planning.offset_reset import sink_group
from connectops.reconcilers.clusters import ConnectClientFactory
from tests.doubles.kafka import FakeKafka

JSONDict = dict[str, Any]

FILE_SOURCE = "org.apache.kafka.connect.file.FileStreamSourceConnector"
FILE_SINK = "org.apache.kafka.connect.file.FileStreamSinkConnector"
#: tests/env/plugins/versioned, installed in versions 1.0.0 and 2.0.0 on the test worker
VERSIONED_SOURCE = "io.connectops.testplugins.versioned.VersionedSourceConnector"
JSON_CONVERTER = "org.apache.kafka.connect.json.JsonConverter"
STRING_CONVERTER = "org.apache.kafka.connect.storage.StringConverter"

#: the calls that change the worker's state (everything else only reads)
WRITE_METHODS = frozenset(
    {
        "create",
        "put_config",
        "pause",
        "resume",
        "stop",
        "restart",
        "restart_task",
        "delete",
        "patch_offsets",
        "delete_offsets",
    }
)

#: the sentences the real worker answers (Kafka 4.3: ConnectorsResource, AbstractHerder)
MSG_ALTERED = "The offsets for this connector have been altered successfully"
MSG_RESET = "The offsets for this connector have been reset successfully"
MSG_NOT_STOPPED = (
    "Connectors must be in the STOPPED state before their offsets can be modified. This can be done "
    "for the specified connector by issuing a 'PUT' request to the '/connectors/{name}/stop' endpoint"
)
MSG_HEALTHY = "Worker has completed startup and is ready to handle requests."
MSG_STARTING = "Worker is still starting up."


def _missing(key: str) -> str:
    return f'Missing required configuration "{key}" which has no default value.'


@dataclass(frozen=True)
class FakePlugin:
    """One connector class: what it validates and how many tasks it makes."""

    class_name: str
    type: str
    version: str = "4.3.0"
    #: keys with no default (ConfigDef's "Missing required configuration")
    required: tuple[str, ...] = ()
    #: the connector's own rule over its config: key -> errors (besides ``required``)
    check: Callable[[dict[str, str]], dict[str, list[str]]] = lambda config: {}
    #: tasks generated for ``tasks.max``
    task_count: Callable[[int], int] = lambda tasks_max: tasks_max
    #: why a task fails when it starts with this config (sticky: every restart fails again)
    start_failure: Callable[[dict[str, str]], str | None] = lambda config: None

    def aliases(self) -> set[str]:
        simple = self.class_name.rsplit(".", 1)[-1]
        return {self.class_name, simple, simple.removesuffix("Connector")}


def _sink_topics(config: dict[str, str]) -> dict[str, list[str]]:
    # SinkConnectorConfig.validate: exactly one of topics / topics.regex
    topics, regex = config.get("topics", "").strip(), config.get("topics.regex", "").strip()
    if not topics and not regex:
        message = "Must configure one of topics or topics.regex"
        return {"topics": [message], "topics.regex": [message]}
    if topics and regex:
        message = "topics and topics.regex are mutually exclusive options, but both are set."
        return {"topics": [message], "topics.regex": [message]}
    return {}


def _file_sink_start(config: dict[str, str]) -> str | None:
    path = config.get("file")
    if path and os.path.isdir(path):
        return (
            "org.apache.kafka.connect.errors.ConnectException: "
            f"Couldn't find or create file '{path}' for FileStreamSinkTask"
        )
    return None


FILE_SOURCE_PLUGIN = FakePlugin(FILE_SOURCE, "source", required=("topic",), task_count=lambda tasks_max: 1)
FILE_SINK_PLUGIN = FakePlugin(FILE_SINK, "sink", check=_sink_topics, start_failure=_file_sink_start)
VERSIONED_PLUGINS = tuple(
    FakePlugin(VERSIONED_SOURCE, "source", version=v, required=("topic",), task_count=lambda tasks_max: 1)
    for v in ("1.0.0", "2.0.0")
)
DEFAULT_PLUGINS = (FILE_SINK_PLUGIN, FILE_SOURCE_PLUGIN, *VERSIONED_PLUGINS)
#: converters as the worker lists them: a class that is both kinds is listed once per kind
DEFAULT_CONVERTERS = tuple(
    Plugin(cls, kind, "4.3.0")
    for cls in (JSON_CONVERTER, STRING_CONVERTER)
    for kind in ("converter", "header_converter")
)


class _VersionNotFound(Exception):
    """No installed version of the class matches the pin: Connect's words as the message."""


def _not_found(plugin: str, version: str | None, available: list[str]) -> str:
    # Connect prints the range Maven parsed: a bare version (exact for Connect) as [v,v]
    text = (version or "").strip()
    shown = text if text.startswith(("[", "(")) else f"[{text},{text}]"
    return (
        f"Plugin {plugin} not found that matches the version range {shown}, available versions: "
        f"[{', '.join(available)}]"
    )


_OVERRIDE_PREFIXES = ("producer.override.", "consumer.override.", "admin.override.")


@dataclass
class _Failure:
    trace: str
    #: survives restarts (cleared only by a config write)
    sticky: bool


@dataclass
class FakeConnector:
    """One connector as the worker holds it."""

    name: str
    config: dict[str, str]
    plugin: FakePlugin
    #: Connect's target state: STARTED, PAUSED or STOPPED
    target: str = "STARTED"
    #: task configs the connector generated the last time it ran (none before its first start,
    #: none after a stop: KIP-875 writes an empty set); a paused connector keeps the ones it had
    task_configs: int = 0
    connector_failure: _Failure | None = None
    task_failures: dict[int, _Failure] = field(default_factory=dict)
    #: source partition (as canonical JSON) -> {"partition": ..., "offset": ...}
    offsets: dict[str, JSONDict] = field(default_factory=dict)
    #: (connector restarts, task id -> restarts), for assertions
    connector_restarts: int = 0
    task_restarts: dict[int, int] = field(default_factory=dict)
    #: what the tasks commit as they stop (see FakeConnect.commit_at_stop)
    final_commit: list[JSONDict] = field(default_factory=list)
    #: status reads that still show the state from before a stop (see FakeConnect.lag_stop)
    stop_lag: int = 0
    #: the next GET /offsets leaves out the source partitions first written since the last one
    #: (see FakeConnect.lag_listing)
    listing_lags: bool = False
    unlisted: set[str] = field(default_factory=set)
    lagging_status: ConnectorState | None = None
    lagging_reads: int = 0
    #: restarts seen in the status late (see FakeConnect.slow_restarts): how many reads show the
    #: restarted tasks down, and as what
    restart_lag: int = 0
    down_tasks: frozenset[int] = frozenset()
    down_state: str = "UNASSIGNED"
    down_reads: int = 0

    def restarting(self, tasks: Iterable[int], state: str) -> None:
        """Tasks (re)started just now, shown ``state`` for the next ``restart_lag`` status reads."""
        if self.restart_lag:
            # a second restart while the first still shows adds its tasks (restart-tasks "0,2")
            still = self.down_tasks if self.down_reads else frozenset()
            self.down_tasks, self.down_state, self.down_reads = still | frozenset(tasks), state, self.restart_lag

    def task_ids(self) -> list[int]:
        return [] if self.target == "STOPPED" else list(range(self.task_configs))

    def start_tasks(self) -> None:
        """A running connector generates its task configs from its config and (re)starts every
        task: a config that makes a task fail fails it again. Paused or stopped: nothing runs."""
        if self.target != "STARTED":
            return
        self.task_configs = self.plugin.task_count(int(self.config.get("tasks.max", "1")))
        for task in self.task_ids():
            self.start_task(task)

    def start_task(self, task: int) -> None:
        failure = self.task_failures.get(task)
        if failure is not None and not failure.sticky:
            del self.task_failures[task]
        why = self.plugin.start_failure(self.config)
        if why is not None:
            self.task_failures[task] = _Failure(why, sticky=True)

    def state(self, worker_id: str) -> ConnectorState:
        if self.connector_failure is not None:
            state, trace = "FAILED", self.connector_failure.trace
        else:
            state, trace = {"STARTED": "RUNNING", "PAUSED": "PAUSED", "STOPPED": "STOPPED"}[self.target], None
        tasks = []
        for task in self.task_ids():
            failure = self.task_failures.get(task)
            if self.down_reads and task in self.down_tasks:
                # as the worker shows it: RESTARTING until the restart is done, even one that
                # fails again (4.3 under load: FAILED, RESTARTING for seconds, FAILED)
                tasks.append(TaskState(task, self.down_state, worker_id, None, self.plugin.version))
            elif failure is not None:
                tasks.append(
                    TaskState(task, "FAILED", worker_id, failure.trace.splitlines()[0][:500], self.plugin.version)
                )
            else:
                state_of_task = "PAUSED" if self.target == "PAUSED" else "RUNNING"
                tasks.append(TaskState(task, state_of_task, worker_id, None, self.plugin.version))
        return ConnectorState(self.name, self.plugin.type, state, worker_id, trace, tuple(tasks), self.plugin.version)


@dataclass(frozen=True)
class Call:
    method: str
    args: tuple[Any, ...] = ()


class FakeConnect:
    """An in-memory worker group; see the module docstring for what it models."""

    def __init__(
        self,
        *,
        version: str = "4.3.0",
        kafka_cluster_id: str = "fake-kafka-cluster",
        plugins: tuple[FakePlugin, ...] = DEFAULT_PLUGINS,
        converters: tuple[Plugin, ...] = DEFAULT_CONVERTERS,
        override_policy: str = "All",
        worker_id: str = "127.0.0.1:8083",
        kafka: FakeKafka | None = None,
    ) -> None:
        self.version = version
        #: the Kafka cluster behind the workers, where sinks' consumer groups live (optional)
        self.kafka = kafka
        self.kafka_cluster_id = kafka_cluster_id
        self.plugins = list(plugins)
        self.converters = list(converters)
        self.override_policy = override_policy
        self.worker_id = worker_id
        self.connectors: dict[str, FakeConnector] = {}
        self.calls: list[Call] = []
        #: "up", "down" (nothing answers) or "starting" (KIP-1017: 503 until ready)
        self.mode = "up"
        self._faults: dict[str, list[ConnectError]] = {}
        self._lost_answers: dict[str, list[ConnectError]] = {}
        #: offsets PATCH/DELETE answer success and change nothing (a worker not applying them)
        self.ignore_offset_writes = False
        self.closed = False

    # -- test controls --------------------------------------------------------------------------

    def writes(self) -> list[Call]:
        """The calls that change something, in order."""
        return [c for c in self.calls if c.method in WRITE_METHODS]

    def fail_next(self, method: str, error: ConnectError, times: int = 1) -> None:
        """The next ``times`` calls of ``method`` raise ``error`` (and change nothing)."""
        self._faults.setdefault(method, []).extend([error] * times)

    def lose_answer(self, method: str, error: ConnectError, times: int = 1) -> None:
        """The next ``times`` calls of ``method`` take effect, then raise ``error`` (the answer lost)."""
        self._lost_answers.setdefault(method, []).extend([error] * times)

    def commit_at_stop(self, name: str, offsets: Iterable[JSONDict]) -> None:
        """The connector's tasks have moved on since their last periodic commit: at the next
        stop they commit ``offsets`` (KIP-875 entries), as Connect's tasks do as they stop. A
        sink's go to its consumer group when a FakeKafka holds it."""
        self.connectors[name].final_commit = [copy.deepcopy(dict(o)) for o in offsets]

    def lag_listing(self, name: str) -> None:
        """Connect lists a source's partitions from what its offsets-topic reader has consumed,
        without reading to the end, and reads to the end before it answers (for the values): the
        first GET /offsets after a write that adds partitions leaves them out, the next lists
        them (shown on the real worker by tests/e2e/test_reset_at_stop.py)."""
        self.connectors[name].listing_lags = True

    def lag_stop(self, name: str, reads: int) -> None:
        """After the next stops of ``name``, ``reads`` status reads still show the state from
        before the stop (running tasks); a huge number is a stop that never completes."""
        self.connectors[name].stop_lag = reads

    def slow_restarts(self, name: str, reads: int) -> None:
        """Restarts that the status shows as the worker does, through its status topic: after a
        config change or a restart of ``name``, ``reads`` status reads show the restarted tasks
        UNASSIGNED (a config change: stopped for the rebalance) or RESTARTING (KIP-745) before
        RUNNING. Without it a restart is instant: the next read already shows RUNNING."""
        self.connectors[name].restart_lag = reads

    def fail_task(
        self, name: str, task: int, trace: str = "java.lang.RuntimeException: boom", *, sticky: bool = False
    ) -> None:
        """Task ``task`` FAILED; a restart cures it unless ``sticky``."""
        self.connectors[name].task_failures[task] = _Failure(trace, sticky)

    def fail_connector(
        self, name: str, trace: str = "java.lang.RuntimeException: boom", *, sticky: bool = False
    ) -> None:
        self.connectors[name].connector_failure = _Failure(trace, sticky)

    def seed(self, name: str, config: dict[str, str], *, target: str = "STARTED") -> FakeConnector:
        """A connector that exists before the test starts (made by someone else), without a call."""
        connector = FakeConnector(name, {**config, "name": name}, self._plugin_for(config), target)
        self.connectors[name] = connector
        connector.start_tasks()
        return connector

    # -- plumbing -------------------------------------------------------------------------------

    def _enter(self, method: str, *args: Any) -> None:
        self.calls.append(Call(method, args))
        if self.mode == "down":
            raise ConnectUnavailable(
                f"{method}: cannot reach Connect (ConnectError: All connection attempts failed)", operation=method
            )
        if self.mode == "starting":
            raise ConnectUnavailable(f"{method}: HTTP 503: {MSG_STARTING}", status=503, operation=method)
        queued = self._faults.get(method)
        if queued:
            raise queued.pop(0)

    def _answer(self, method: str) -> None:
        """After a call took effect: raise if the test lost its answer."""
        lost = self._lost_answers.get(method)
        if lost:
            raise lost.pop(0)

    def _get(self, name: str, operation: str) -> FakeConnector:
        connector = self.connectors.get(name)
        if connector is None:
            raise ConnectNotFound(f"{operation}: HTTP 404: Connector {name} not found", status=404, operation=operation)
        return connector

    def _plugin(self, connector_class: str, version: str | None = None) -> FakePlugin:
        """The version of the class that runs: the newest installed one inside the pin."""
        found = [plugin for plugin in self.plugins if connector_class in plugin.aliases()]
        if not found:
            raise ConnectRejected(
                f"validate config: HTTP 500: org.apache.kafka.connect.errors.BadRequestException: Failed to find any "
                f"class that implements Connector and which name matches {connector_class}",
                status=500,
                operation="validate config",
            )
        found.sort(key=lambda p: MavenVersion(p.version), reverse=True)
        required = requirement(version)
        inside = [p for p in found if required is None or required.contains(p.version)]
        if not inside:
            raise _VersionNotFound(
                _not_found(connector_class, version, sorted((p.version for p in found), key=MavenVersion))
            )
        return inside[0]

    def _plugin_for(self, config: Mapping[str, str]) -> FakePlugin:
        return self._plugin(config["connector.class"], config.get(CONNECTOR_VERSION_KEY))

    def _caps(self) -> Any:
        return capabilities_for(self.version)

    def _errors(self, config: dict[str, str]) -> dict[str, list[str]]:
        """What the worker's validation says about ``config`` (keys with errors only)."""
        errors: dict[str, list[str]] = {}

        def add(key: str, message: str) -> None:
            errors.setdefault(key, []).append(message)

        try:
            plugin = self._plugin(config.get("connector.class", ""), config.get(CONNECTOR_VERSION_KEY))
        except _VersionNotFound as exc:
            # Connect reports it on the class and on the version key, and skips the connector's,
            # converters' and overrides' validation
            add("connector.class", str(exc))
            add(CONNECTOR_VERSION_KEY, str(exc))
            return errors
        for which, key in CONVERTER_VERSION_KEYS.items():
            converter = config.get(CONVERTER_CLASS_KEYS[which])
            required = requirement(config.get(key))
            kind = "header_converter" if which == "header" else "converter"
            versions = [
                c.version or "undefined" for c in self.converters if c.type == kind and c.class_name == converter
            ]
            if converter and required is not None and not any(required.contains(v) for v in versions):
                # the available versions count every listing of the class (both converter kinds)
                listed = [c.version or "undefined" for c in self.converters if c.class_name == converter]
                message = _not_found(converter, config[key], sorted(listed, key=MavenVersion))
                add(CONVERTER_CLASS_KEYS[which], message)
                add(key, message)

        if not config.get("name", "").strip():
            add("name", _missing("name"))
        raw = config.get("tasks.max", "1")
        try:
            tasks_max = int(raw)
        except ValueError:
            add("tasks.max", f"Invalid value {raw} for configuration tasks.max: Not a number of type INT")
        else:
            if tasks_max < 1:
                add("tasks.max", f"Invalid value {tasks_max} for configuration tasks.max: Value must be at least 1")
        for key in plugin.required:
            if key not in config:
                add(key, _missing(key))
        for key, messages in plugin.check(config).items():
            for message in messages:
                add(key, message)
        if self.override_policy == "None":
            for key in config:
                if key.startswith(_OVERRIDE_PREFIXES):
                    add(
                        key,
                        f"The 'None' policy does not allow '{key.split('.', 2)[2]}' to be overridden in the "
                        "connector configuration.",
                    )
        return errors

    def _write(self, name: str, config: dict[str, str], operation: str) -> dict[str, str]:
        """The config as the worker stores it, or ConnectRejected as a 400 (nothing written)."""
        if "name" in config and config["name"] != name:
            raise ConnectRejected(
                f"{operation}: HTTP 400: Connector name configuration ({config['name']}) doesn't match connector "
                f"name in the URL ({name})",
                status=400,
                operation=operation,
            )
        stored = {**config, "name": name}
        try:
            errors = self._errors(stored)
        except ConnectRejected as exc:
            raise ConnectRejected(
                str(exc).replace("validate config", operation), status=400, operation=operation
            ) from None
        if errors:
            count = sum(len(m) for m in errors.values())
            detail = "\n".join(m for ms in errors.values() for m in ms)
            raise ConnectRejected(
                f"{operation}: HTTP 400: Connector configuration is invalid and contains the following {count} "
                f"error(s):\n{detail}\nYou can also find the above list of errors at the endpoint "
                "`/connector-plugins/{connectorType}/config/validate`",
                status=400,
                operation=operation,
            )
        return stored

    # -- worker ---------------------------------------------------------------------------------

    async def aclose(self) -> None:
        self.closed = True

    async def server_info(self) -> ServerInfo:
        self._enter("server_info")
        return ServerInfo(version=self.version, commit="fakecommit", kafka_cluster_id=self.kafka_cluster_id)

    async def health(self) -> WorkerHealth:
        self.calls.append(Call("health"))
        if self.mode == "down":
            raise ConnectUnavailable("get worker health: cannot reach Connect (ConnectError)", operation="health")
        if self.mode == "starting":
            return WorkerHealth("starting", MSG_STARTING)
        return WorkerHealth("healthy", MSG_HEALTHY)

    async def list_plugins(self) -> list[Plugin]:
        self._enter("list_plugins")
        listed = [Plugin(p.class_name, p.type, p.version) for p in self.plugins] + self.converters
        return sorted(listed, key=lambda p: (p.class_name, p.type, p.version or ""))

    async def validate(self, connector_class: str, config: dict[str, str]) -> ValidationResult:
        self._enter("validate", connector_class, dict(config))
        self._plugin(connector_class)
        errors = self._errors({**config, "connector.class": config.get("connector.class", connector_class)})
        return ValidationResult(error_count=sum(len(m) for m in errors.values()), errors=errors)

    # -- connectors -----------------------------------------------------------------------------

    async def list_connectors(self) -> list[str]:
        self._enter("list_connectors")
        return sorted(self.connectors)

    async def get_connector(self, name: str) -> JSONDict | None:
        self._enter("get_connector", name)
        connector = self.connectors.get(name)
        if connector is None:
            return None
        return {
            "name": name,
            "config": dict(connector.config),
            "tasks": [{"connector": name, "task": t} for t in connector.task_ids()],
            "type": connector.plugin.type,
        }

    async def get_config(self, name: str) -> dict[str, str] | None:
        self._enter("get_config", name)
        connector = self.connectors.get(name)
        return None if connector is None else dict(connector.config)

    async def get_status(self, name: str) -> ConnectorState | None:
        self._enter("get_status", name)
        connector = self.connectors.get(name)
        if connector is None:
            return None
        return self._status_read(connector)

    async def list_expanded(
        self, keep: Callable[[str], bool] = lambda _: True, *, settled: Callable[[], Awaitable[object]] | None = None
    ) -> dict[str, ListedConnector]:
        """Every connector ``keep`` names, as get_config and get_status would answer at this
        moment (a read of each status, as a worker's listing is: a lagging status shows here too),
        filtered once ``settled`` returns (the real client parses only then)."""
        self._enter("list_expanded")
        if settled is not None:
            # the worker answered every connector as it was then; kept are those ``keep`` names
            # once the caller settled
            answered = {
                name: ListedConnector(config=dict(connector.config), state=self._status_read(connector))
                for name, connector in sorted(self.connectors.items())
            }
            await settled()
            return {name: entry for name, entry in answered.items() if keep(name)}
        return {
            name: ListedConnector(config=dict(connector.config), state=self._status_read(connector))
            for name, connector in sorted(self.connectors.items())
            if keep(name)
        }

    def _status_read(self, connector: FakeConnector) -> ConnectorState:
        if connector.lagging_reads > 0 and connector.lagging_status is not None:
            connector.lagging_reads -= 1
            return connector.lagging_status
        state = connector.state(self.worker_id)
        connector.down_reads = max(0, connector.down_reads - 1)
        return state

    async def create(self, name: str, config: dict[str, str], initial_state: str | None = None) -> None:
        self._enter("create", name, dict(config), initial_state)
        if initial_state and not self._caps().initial_state:
            raise ConnectRejected(
                'create connector: HTTP 400: Unrecognized field "initial_state"',
                status=400,
                operation="create connector",
            )
        stored = self._write(name, config, "create connector")
        if name in self.connectors:
            raise ConnectConflict(
                f"create connector: HTTP 409: Connector {name} already exists", status=409, operation="create connector"
            )
        target = {None: "STARTED", "RUNNING": "STARTED", "PAUSED": "PAUSED", "STOPPED": "STOPPED"}[initial_state]
        connector = FakeConnector(name, stored, self._plugin_for(stored), target)
        self.connectors[name] = connector
        connector.start_tasks()
        self._answer("create")

    async def put_config(self, name: str, config: dict[str, str]) -> None:
        self._enter("put_config", name, dict(config))
        stored = self._write(name, config, "update config")
        connector = self.connectors.get(name)
        if connector is None:
            connector = FakeConnector(name, stored, self._plugin_for(stored))
            self.connectors[name] = connector
        else:
            connector.config = stored
            connector.plugin = self._plugin_for(stored)
            # a new config restarts the connector and hands its tasks new configs
            connector.connector_failure = None
            connector.task_failures.clear()
        connector.start_tasks()
        connector.restarting(connector.task_ids(), "UNASSIGNED")

    async def pause(self, name: str) -> None:
        self._enter("pause", name)
        connector = self._get(name, "pause")
        connector.target = "PAUSED"
        connector.lagging_reads = 0

    async def resume(self, name: str) -> None:
        self._enter("resume", name)
        connector = self._get(name, "resume")
        was = connector.target
        connector.target = "STARTED"
        connector.lagging_reads = 0
        if was == "STOPPED" or not connector.task_configs:
            connector.start_tasks()  # tasks are made anew from the config
        self._answer("resume")

    async def stop(self, name: str) -> None:
        self._enter("stop", name)
        if not self._caps().stop:
            raise ConnectNotFound("stop: HTTP 404: HTTP 404 Not Found", status=404, operation="stop")
        connector = self._get(name, "stop")
        if connector.stop_lag and connector.target != "STOPPED":
            connector.lagging_status = connector.state(self.worker_id)
            connector.lagging_reads = connector.stop_lag
        if connector.task_ids() and connector.final_commit:
            self._commit(connector, connector.final_commit)
            connector.final_commit = []
        connector.target = "STOPPED"
        connector.task_configs = 0
        connector.task_failures.clear()
        self._answer("stop")

    def _commit(self, connector: FakeConnector, offsets: list[JSONDict]) -> None:
        group = self.sink_group(connector)
        for entry in offsets:
            if group is not None:
                assert self.kafka is not None
                tp = (entry["partition"]["kafka_topic"], int(entry["partition"]["kafka_partition"]))
                self.kafka.groups.setdefault(group, {})[tp] = int(entry["offset"]["kafka_offset"])
            else:
                key = json.dumps(entry["partition"], sort_keys=True)
                if connector.listing_lags and key not in connector.offsets:
                    connector.unlisted.add(key)
                connector.offsets[key] = {"partition": dict(entry["partition"]), "offset": dict(entry["offset"])}

    async def restart(self, name: str, *, include_tasks: bool, only_failed: bool) -> None:
        self._enter("restart", name, include_tasks, only_failed)
        connector = self._get(name, "restart")
        if not self._caps().restart_only_failed:
            include_tasks = only_failed = False  # before 3.0 the parameters are ignored
        if not only_failed or connector.connector_failure is not None:
            connector.connector_restarts += 1
            if connector.connector_failure is not None and not connector.connector_failure.sticky:
                connector.connector_failure = None
        if include_tasks:
            restarted = []
            for task in connector.task_ids():
                if not only_failed or task in connector.task_failures:
                    connector.task_restarts[task] = connector.task_restarts.get(task, 0) + 1
                    connector.start_task(task)
                    restarted.append(task)
            connector.restarting(restarted, "RESTARTING")

    async def restart_task(self, name: str, task_id: int) -> None:
        self._enter("restart_task", name, task_id)
        connector = self._get(name, "restart task")
        if task_id not in connector.task_ids():
            raise ConnectNotFound(
                f"restart task: HTTP 404: Task {name}-{task_id} not found", status=404, operation="restart task"
            )
        connector.task_restarts[task_id] = connector.task_restarts.get(task_id, 0) + 1
        connector.start_task(task_id)
        connector.restarting([task_id], "RESTARTING")

    async def delete(self, name: str) -> bool:
        self._enter("delete", name)
        return self.connectors.pop(name, None) is not None

    # -- offsets (KIP-875) ----------------------------------------------------------------------

    def _stopped(self, name: str, operation: str) -> FakeConnector:
        connector = self._get(name, operation)
        if connector.target != "STOPPED":
            raise ConnectRejected(f"{operation}: HTTP 400: {MSG_NOT_STOPPED}", status=400, operation=operation)
        return connector

    def sink_group(self, connector: FakeConnector) -> str | None:
        """The consumer group holding a sink's offsets, when a FakeKafka holds them."""
        if self.kafka is None or connector.plugin.type != "sink":
            return None
        return sink_group(connector.name, connector.config)

    async def get_offsets(self, name: str) -> list[JSONDict]:
        self._enter("get_offsets", name)
        connector = self._get(name, "get offsets")
        group = self.sink_group(connector)
        if group is not None:
            assert self.kafka is not None
            return [
                {"partition": {"kafka_topic": t, "kafka_partition": p}, "offset": {"kafka_offset": o}}
                for (t, p), o in sorted(self.kafka.groups.get(group, {}).items())
            ]
        unlisted, connector.unlisted = connector.unlisted, set()
        return [dict(entry) for key, entry in connector.offsets.items() if key not in unlisted]

    async def patch_offsets(self, name: str, offsets: list[JSONDict]) -> str:
        self._enter("patch_offsets", name, [dict(o) for o in offsets])
        connector = self._stopped(name, "alter offsets")
        if self.ignore_offset_writes:
            return MSG_ALTERED
        group = self.sink_group(connector)
        if group is not None:
            assert self.kafka is not None
            committed = self.kafka.groups.setdefault(group, {})
            for entry in offsets:
                tp = (entry["partition"]["kafka_topic"], int(entry["partition"]["kafka_partition"]))
                if entry.get("offset") is None:
                    committed.pop(tp, None)
                else:
                    committed[tp] = int(entry["offset"]["kafka_offset"])
            self._answer("patch_offsets")
            return MSG_ALTERED
        for entry in offsets:
            key = json.dumps(entry["partition"], sort_keys=True)
            if entry.get("offset") is None:
                connector.offsets.pop(key, None)
            else:
                connector.offsets[key] = {"partition": dict(entry["partition"]), "offset": dict(entry["offset"])}
        self._answer("patch_offsets")
        return MSG_ALTERED

    async def delete_offsets(self, name: str) -> str:
        self._enter("delete_offsets", name)
        connector = self._stopped(name, "reset offsets")
        group = self.sink_group(connector)
        if self.ignore_offset_writes:
            pass
        elif group is not None:
            assert self.kafka is not None
            self.kafka.groups.pop(group, None)
        else:
            connector.offsets.clear()
        self._answer("delete_offsets")
        return MSG_RESET


#: checked by mypy: the double implements the whole interface the reconcilers call
_FAKE_IMPLEMENTS_API: type[ConnectApi] = FakeConnect


def client_factory(workers: Mapping[str, FakeConnect]) -> ConnectClientFactory:
    """The ClusterRegistry's client factory over in-memory workers, by their REST URL (a URL with
    no worker is a test's mistake: KeyError)."""

    def make(base_url: str, **_: Any) -> ConnectApi:
        return workers[base_url]

    return make
