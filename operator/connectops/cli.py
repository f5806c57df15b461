"""``connectops`` command line: run the operator, generate CRDs."""

from __future__ import annotations

import argparse
import logging
import random
import sys
from pathlib import Path

from connectops import crdgen


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


def _run(args: argparse.Namespace) -> int:
    import kopf  # heavy: only the run command needs it

    if args.metrics_port:
        from prometheus_client import start_http_server

        start_http_server(args.metrics_port)
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
    import connectops.handlers  # noqa: F401 - registers the handlers with kopf

    peering: dict[str, object] = {}
    if not args.standalone:
        # peers of equal priority all pause (kopf's rule), so each replica needs its own; naming
        # the peering makes it mandatory: no replica acts before the peering object exists
        peering = {
            "priority": args.priority if args.priority is not None else random.randint(1, 10_000),
            "peering_name": args.peering,
        }
    kopf.run(
        clusterwide=not args.namespace,
        namespaces=args.namespace or (),
        standalone=args.standalone,
        liveness_endpoint=args.liveness or None,
        **peering,  # type: ignore[arg-type]
    )
    return 0


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
    run.add_argument("--standalone", action="store_true", help="no peering (single replica)")
    run.add_argument("--priority", type=int, default=None, help="kopf peering priority (default: random)")
    run.add_argument("--peering", default="default", help="kopf peering object name (the chart creates it)")
    run.add_argument("--liveness", default="", help="e.g. http://0.0.0.0:8080/healthz")
    run.add_argument("--metrics-port", type=int, default=0, help="serve Prometheus metrics")
    run.add_argument("--log-level", default="info", choices=["debug", "info", "warning", "error"])
    run.add_argument("--log-format", default="text", choices=["text", "json"], help="json: one object per line")
    run.set_defaults(func=_run)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    return int(args.func(args))


if __name__ == "__main__":
    raise SystemExit(main())
