"""``connectops`` command line: run the operator, generate CRDs, plan a change."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import faulthandler
import logging
import os
import signal
import socket
import sys
import threading
import uuid
from pathlib import Path
from typing import TYPE_CHECKING, Any

from connectops import crdgen, fence

if TYPE_CHECKING:
    from connectops.adapters.leadership import LeaseSettings

log = logging.getLogger("connectops")
SA_NAMESPACE = Path("/var/run/secrets/kubernetes.io/serviceaccount/namespace")


def _crds(args: argparse.Namespace) -> int:
    out = Path(args.output)
    if args.check:
        stale = [
            name
            for name, text in crdgen.render_all().items()
            if not (out / name).is_file() or (out / name).read_text() != text
        ]
        if stale:
            print(f"out of date: {', '.join(stale)} (run: connectops crds)", file=sys.stderr)
            return 1
        return 0
    for path in crdgen.write_all(out):
        print(path)
    return 0


class _Stop:
    """Set by SIGTERM or SIGINT in every phase of ``run``: starting, standing by in leader
    election (``event``), leading (kopf takes the signals over while it runs, and also watches
    ``future``, for a signal that came before it installed its handlers). Without a handler,
    Python as a container's PID 1 ignores SIGTERM, so a standby was only ever stopped by the
    kubelet's SIGKILL after the grace period.

    ``future`` belongs to ``loop``, the loop kopf then runs in: kopf awaits an asyncio future
    directly, where a threading.Event would be waited for in an executor thread that nothing
    wakes when kopf stops by its own signal handler, and the process would hang at its exit.
    """

    def __init__(self) -> None:
        self.event = threading.Event()
        self.loop = asyncio.new_event_loop()
        self.future: asyncio.Future[int] = self.loop.create_future()

    def install(self) -> None:
        if threading.current_thread() is threading.main_thread():
            for sig in (signal.SIGTERM, signal.SIGINT):
                signal.signal(sig, self._handler)

    def _handler(self, signum: int, _frame: object) -> None:
        # from a thread: the handler runs in the main thread, which may hold the Event's (or the
        # log's) lock at that moment, inside its own wait, and taking it here would deadlock
        threading.Thread(target=self._set, args=(signum,), name="stop-signal", daemon=True).start()

    def _set(self, signum: int) -> None:
        log.info("%s received: stopping", signal.Signals(signum).name)
        self.event.set()
        with contextlib.suppress(RuntimeError):  # the loop is closed: kopf has already stopped
            self.loop.call_soon_threadsafe(self._resolve, signum)

    def _resolve(self, signum: int) -> None:
        if not self.future.done():
            self.future.set_result(signum)


def _run(args: argparse.Namespace) -> int:
    stopping = _Stop()
    stopping.install()  # first: a rollout may stop the process while it imports
    import kopf  # heavy: only the run command needs it

    # a fatal signal (a C extension's abort, a segfault) prints every thread's stack (names and
    # lines, no values) before the process dies: one standby in CI48 exited by SIGABRT after a
    # clean release of its Lease with nothing in its log to say where
    faulthandler.enable()

    settings = None if args.standalone else _lease_settings(args)  # bad settings: refused first
    if args.metrics_port:
        from connectops.metrics_server import serve

        serve(args.metrics_port)
    kopf.configure(
        debug=args.log_level.lower() == "debug",
        quiet=args.log_level.lower() in ("warning", "error"),
        log_format=kopf.LogFormat.JSON if args.log_format == "json" else kopf.LogFormat.FULL,
        log_refkey="object",
        # text lines name their object ("[ns/name] ..."); JSON lines carry it under "object"
        log_prefix=args.log_format != "json",
    )
    # one line per HTTP request to Connect is noise at INFO; failures are logged by kopf
    logging.getLogger("httpx").setLevel(logging.WARNING)
    # the log's lines and kopf's Events (its "kopf.objects" handler) never hold a URL's password
    from connectops.redact import mask_logged_userinfo

    mask_logged_userinfo(logging.getLogger(), logging.getLogger("kopf.objects"))
    # the startup LIST of Connectors' claims covers exactly what kopf will watch
    # (connectops.handlers._seed_claims); a pattern may hold commas, so one per line
    os.environ["CONNECTOPS_WATCH_NAMESPACES"] = "\n".join(args.namespace or ())
    import connectops.handlers  # noqa: F401 - registers the handlers with kopf

    if not os.environ.get("CONNECTOPS_LOCK_NAMESPACE"):
        log.warning(
            "CONNECTOPS_LOCK_NAMESPACE is not set: reset locks live in each reset's namespace, so "
            "resets of one connector from two namespaces are not excluded (the chart sets it)"
        )

    if settings is None:
        log.warning("--standalone: no leader election; run exactly one operator process")
        _run_kopf(args, stopping)
        return 0
    from connectops.adapters.kube import load_kube_config
    from connectops.adapters.leadership import Leadership, standby_health

    load_kube_config()
    leadership = Leadership(settings)
    with standby_health(args.liveness, ready=leadership.can_take_over):
        leading = leadership.acquire(stop=stopping.event)
    if not leading:
        return 0  # stopped while standing by: nothing was held, nothing to hand over
    leadership.keep()
    fence.install(leadership.ensure)

    @kopf.on.cleanup()
    async def hand_over(**_: Any) -> None:
        # after the operator's own cleanup (registered first, by connectops.handlers), before
        # kopf's fixed 5 s for the tasks still running: the successor starts that much sooner,
        # and the fence ends this process at its next write, so the two never both act
        await asyncio.to_thread(leadership.release)

    try:
        if not stopping.event.is_set():  # a signal between the win and here: hand the Lease on
            _run_kopf(args, stopping)
    finally:
        leadership.release()
    return 0


def _run_kopf(args: argparse.Namespace, stopping: _Stop) -> None:
    import kopf

    # standalone in kopf's terms: kopf's own peering is off, the Lease (or --standalone) decides.
    # stop_flag: a signal that came before kopf installed its own handlers still stops it.
    try:
        kopf.run(
            loop=stopping.loop,
            clusterwide=not args.namespace,
            namespaces=args.namespace or (),
            standalone=True,
            liveness_endpoint=args.liveness or None,
            stop_flag=stopping.future,
        )
    finally:
        stopping.loop.close()


def _lease_settings(args: argparse.Namespace) -> LeaseSettings:
    from connectops.adapters.leadership import LeaseSettings

    namespace = args.lease_namespace or os.environ.get("CONNECTOPS_NAMESPACE", "")
    if not namespace and SA_NAMESPACE.is_file():
        namespace = SA_NAMESPACE.read_text().strip()
    if not namespace:
        raise SystemExit(
            "leader election needs the operator's namespace: pass --lease-namespace, set "
            "CONNECTOPS_NAMESPACE, or run a single process with --standalone"
        )
    who = os.environ.get("POD_NAME") or socket.gethostname()
    settings = LeaseSettings(
        namespace=namespace,
        name=args.lease_name,
        identity=f"{who}-{uuid.uuid4().hex[:8]}",
        duration_s=args.lease_duration,
        renew_deadline_s=args.renew_deadline,
        retry_period_s=args.retry_period,
        request_timeout_s=min(5.0, args.renew_deadline / 2),
    )
    problems = settings.problems()
    if problems:
        raise SystemExit("leader election: " + "; ".join(problems))
    return settings
    return 0


def _plan(args: argparse.Namespace) -> int:
    """What applying the manifests would do: exit 0 nothing, 2 changes, 1 invalid (or unreachable)."""
    import asyncio

    import yaml

    from connectops.planning import preview

    loaded: list[Any] = []
    for given in args.filename:
        path = Path(given)
        files = sorted(p for p in path.rglob("*") if p.suffix in (".yaml", ".yml")) if path.is_dir() else [path]
        for file in files:
            try:
                loaded.extend(yaml.safe_load_all(file.read_text()))
            except (OSError, yaml.YAMLError) as exc:
                print(f"connectops plan: cannot read {file}: {exc}", file=sys.stderr)
                return int(preview.Exit.INVALID)
    docs, plans = preview.documents(loaded, args.namespace)
    if args.offline:
        plans.extend(preview.offline(doc, *preview.validate(doc)) for doc in docs)
    else:
        plans.extend(asyncio.run(_plan_online(docs)))
    online = not args.offline
    print(preview.as_json(plans, online=online) if args.output == "json" else preview.markdown(plans, online=online))
    return int(preview.exit_status(plans))


async def _plan_online(docs: list[Any]) -> list[Any]:
    from connectops.adapters.kube import KubeClient, load_kube_config
    from connectops.reconcilers.preview import Previewer
    from connectops.settings import load

    load_kube_config()
    previewer = Previewer(KubeClient(), load())
    try:
        return await previewer.plan(docs)
    finally:
        await previewer.aclose()


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("connectops")
    except PackageNotFoundError:  # run from a source tree without installing
        return "unknown (not installed)"


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="connectops", description=__doc__)
    parser.add_argument("--version", action="version", version=f"connectops {_version()}")
    sub = parser.add_subparsers(dest="command", required=True)

    crds = sub.add_parser("crds", help="write the CRDs generated from the models")
    crds.add_argument("--output", default="crds", help="directory (default: crds)")
    crds.add_argument("--check", action="store_true", help="fail if the directory is stale")
    crds.set_defaults(func=_crds)

    run = sub.add_parser("run", help="run the operator")
    scope = run.add_mutually_exclusive_group()
    scope.add_argument("--namespace", "-n", action="append", help="watch only this namespace (repeatable, globs)")
    scope.add_argument("--all-namespaces", "-A", action="store_true", help="watch every namespace (the default)")
    run.add_argument(
        "--standalone", action="store_true", help="no leader election: only when exactly one process runs (tests, demo)"
    )
    run.add_argument("--lease-name", default="connectops-leader", help="leader election Lease (default: %(default)s)")
    run.add_argument(
        "--lease-namespace", default="", help="namespace of the Lease (default: $CONNECTOPS_NAMESPACE, else the pod's)"
    )
    run.add_argument("--lease-duration", type=int, default=15, help="seconds (default: %(default)s)")
    run.add_argument("--renew-deadline", type=int, default=10, help="seconds (default: %(default)s)")
    run.add_argument("--retry-period", type=int, default=2, help="seconds (default: %(default)s)")
    run.add_argument("--liveness", default="", help="e.g. http://0.0.0.0:8080/healthz")
    run.add_argument("--metrics-port", type=int, default=0, help="serve Prometheus metrics")
    run.add_argument("--log-level", default="info", choices=["debug", "info", "warning", "error"])
    run.add_argument("--log-format", default="text", choices=["text", "json"], help="json: one object per line")
    run.set_defaults(func=_run)

    plan = sub.add_parser("plan", help="what applying manifests would do (exit 0: nothing, 2: changes, 1: invalid)")
    plan.add_argument("-f", "--filename", action="append", required=True, help="a file or directory (repeatable)")
    plan.add_argument("--namespace", "-n", default="default", help="for objects that name none (default: %(default)s)")
    plan.add_argument("--offline", action="store_true", help="schema only: ask no API server and no Connect worker")
    plan.add_argument("--output", "-o", default="markdown", choices=["markdown", "json"])
    plan.set_defaults(func=_plan)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    return int(args.func(args))


if __name__ == "__main__":
    raise SystemExit(main())
