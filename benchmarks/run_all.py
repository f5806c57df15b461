"""Run every benchmark, one after the other (never two at once: they would measure each other),
then write the summary table into benchmarks/README.md and benchmarks/results/summary.json.

    .venv/bin/python benchmarks/run_all.py                 # full sizes (about an hour on 2 CPUs)
    .venv/bin/python benchmarks/run_all.py --smoke         # every script at its CI size
    .venv/bin/python benchmarks/run_all.py --only reset_bench crash_bench
    .venv/bin/python benchmarks/run_all.py --report-only   # rebuild the table from results/*.json

Each script also runs on its own (``--help``); each writes benchmarks/results/<name>.json with
the machine it ran on. With ``--smoke`` results go to a temporary directory and README.md is
left alone: smoke sizes say the scripts work, not how fast anything is.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from harness import RESULTS, ROOT, log, machine, table

SCRIPTS = [
    # (script, result file)
    ("reset_bench", "reset"),
    ("reset_floor_bench", "reset_floor"),
    ("apply_bench", "apply"),
    ("tombstone_scan_bench", "tombstone_scan"),
    ("spark_check_bench", "spark_check"),
    ("crash_bench", "crash"),
    ("fault_bench", "faults"),
    ("bad_input_bench", "bad_input"),
    ("producer_pressure_bench", "producer_pressure"),
    ("rotation_bench", "rotation"),
    ("check_batch_bench", "check_batch"),
    ("burst_memory_bench", "burst_memory"),
    ("scrape_bench", "scrape"),
    ("mm2_soak_bench", "mm2_soak"),
    ("start_memory_bench", "start_memory"),
    ("sink_partitions_bench", "sink_partitions"),
]
START, END = "<!-- results:start -->", "<!-- results:end -->"


def load(results: Path, name: str) -> dict[str, Any] | None:
    path = results / f"{name}.json"
    return json.loads(path.read_text()) if path.exists() else None


def rss(run: dict[str, Any]) -> str:
    """A run's RSS where it ended / its peak."""
    return f"{run['rss_mib']:.0f} / {run['peak_rss_mib']:.0f} MiB"


def met(ok: bool | None) -> str:
    return "n/a" if ok is None else ("yes" if ok else "**no**")


def apply_row(s: dict[str, Any], present: str) -> list[str]:
    """An apply-latency row: both sides' times and the per-pair overhead and, where the run
    split them at the proxy, the operator's time until its config write reached Connect (on
    which the target is judged: the direct side's is nil), the two sides' times to the write's
    answer, and each side's wait after that answer, which is Connect's whoever wrote
    (apply_bench.Pair)."""
    o, d, x = s["operator_seconds"], s["direct_seconds"], s["overhead_seconds"]
    measured = f"operator {o['p50']:.2f} / {o['p99']:.2f} s; direct PUT {d['p50']:.2f} / {d['p99']:.2f} s"
    per_pair = f"{x['p50']:.3f} / {x['p99']:.3f} s"
    ratio = f"overhead {per_pair}"
    if to_answer := s.get("write_overhead_seconds"):
        oc, dc = s["operator_catch_up_seconds"], s["direct_catch_up_seconds"]
        measured += (
            f"; after Connect answered the write, until live: {oc['p50']:.2f} / {oc['p99']:.2f} s vs "
            f"{dc['p50']:.2f} / {dc['p99']:.2f} s (Connect's); {o['n']} pairs"
        )
        at = s["operator_write_at_seconds"]
        ratio = (
            f"until its write reached Connect {at['p50']:.3f} / {at['p99']:.3f} s; to the write's answer "
            f"{to_answer['p50']:.3f} / {to_answer['p99']:.3f} s; per pair {per_pair}"
        )
    return [
        f"Apply latency, {present} Connectors present (p50 / p99)",
        "overhead p50 < 0.1 s, p99 < 1 s",
        measured,
        ratio,
        # the script's own verdict (apply_bench.py judges the target); a run without one, on the
        # per-pair difference
        met(s.get("target_met", x["p50"] < 0.1 and x["p99"] < 1.0)),
    ]


def report(results: Path) -> tuple[str, dict[str, Any]]:
    """The summary table (markdown) and its data, from whatever result files exist."""
    rows: list[list[Any]] = []
    summary: dict[str, Any] = {}
    hygiene_places = hygiene_hits = 0

    def hygiene(data: dict[str, Any]) -> None:
        nonlocal hygiene_places, hygiene_hits
        h = data.get("hygiene")
        if h:
            hygiene_places += int(h.get("operator_logs", 0)) + int(h.get("events", 0)) + int(h.get("objects", 0))
            hygiene_hits += len(h.get("hits", []))

    if r := load(results, "reset"):
        hygiene(r)
        op, d = r["operator_seconds"], r["direct_seconds"]
        rows.append(
            [
                "Reset end to end (REST strategy), operator"
                + (" (Succeeded as a watching client sees it)" if "operator_seconds_polled" in r else "")
                + " vs Connect's own transitions polled at 50 ms (and vs a direct httpx reset of a second connector)",
                "<= 1.15x, + < 0.15 s" if "overhead_seconds_median" in r else "<= 1.15x",
                f"{op['p50']:.2f} s vs {d['p50']:.2f} s (median of {op['n']})"
                + (
                    f", +{r['overhead_seconds_median']:.2f} s over Connect's own"
                    if "overhead_seconds_median" in r
                    else ""
                )
                + (
                    f" (+{r['overhead_seconds_polled_median']:.2f} s as a client polling every 50 ms sees it)"
                    if "overhead_seconds_polled_median" in r
                    else ""
                )
                + (
                    f", +{r['overhead_vs_direct_seconds_median']:.2f} s over the direct connector"
                    if "overhead_vs_direct_seconds_median" in r
                    else ""
                )
                + (
                    f"; +{r['overhead_less_readback_seconds_median']:.2f} s over Connect's own"
                    " less Connect answering the read-back while stopped"
                    if "overhead_less_readback_seconds_median" in r
                    else ""
                )
                + (
                    # the test broker answers a waiting fetch on its own schedule (reset_bench.py)
                    f"; worker fetch.max.wait.ms {r['worker_fetch_max_wait_ms']}"
                    if "worker_fetch_max_wait_ms" in r
                    else ""
                ),
                f"{r['ratio_median']:.2f}x",
                met(r["target_met"]),
            ]
        )
        summary["reset_ratio"] = r["ratio_median"]
    if fl := load(results, "reset_floor"):
        calls = sum(fl["calls_per_reset"].values())
        rows.append(
            [
                f"Reset: the {calls} Kubernetes API calls its guarantees need, in sequence, against an idle "
                "API server (the floor under the reset's overhead)",
                "(the overhead's target: < 0.15 s)",
                f"{fl['floor_seconds']['p50'] * 1000:.0f} ms (median of {fl['rounds']}), "
                f"status PATCH {fl['call_seconds_median']['status PATCH'] * 1000:.1f} ms each",
                f"{fl['floor_over_target']:.2f}x the target",
                "n/a",
            ]
        )
        summary["reset_floor_seconds"] = fl["floor_seconds"]["p50"]
    if a := load(results, "apply"):
        hygiene(a)
        for s in a["sizes"]:
            rows.append(apply_row(s, f"{s['connectors_present']}"))
        f = a["full_resync"]
        rows.append(
            [
                f"Full resync, {f['connectors']} Connectors (operator restart to every one reconciled)",
                f"< {f['target_seconds']:g} s",
                f"{f['seconds']:.1f} s, {f['connect_requests']} Connect calls"
                + (
                    f" ({f['listing_requests']} expanded listings, {f['single_connector_reads']} single reads)"
                    if "listing_requests" in f
                    else ""
                ),
                "",
                met(f["seconds"] < f["target_seconds"]),
            ]
        )
        last = a["sizes"][-1]
        rows.append(
            [
                f"Operator RSS with {f['connectors']} Connectors (after resync / peak; after the apply run / peak)",
                "< 150 MiB (peaks)",
                f"{rss(f)}; {rss(last)}",
                "",
                # the issue's target is the peak of both runs, not where the apply run ended
                met(f["peak_rss_mib"] < 150 and last["peak_rss_mib"] < 150),
            ]
        )
        rows.append(
            [
                "Concurrent Connect calls during the resync (bounded, configurable)",
                f"<= {f['concurrency_setting']} (CONNECTOPS_CONNECT_CONCURRENCY)",
                str(f["max_concurrent_connect_requests"]),
                "",
                met(f["max_concurrent_connect_requests"] <= f["concurrency_setting"]),
            ]
        )
    if big := load(results, "apply_10k"):
        # apply_bench.py --sizes 1000 10000 --samples 30 --connect-heap 2g (its own command: ~45 min)
        hygiene(big)
        top = big["sizes"][-1]
        rows.append(apply_row(top, f"{top['connectors_present']:,}"))
        f = big["full_resync"]
        rows.append(
            [
                f"Full resync, {f['connectors']:,} Connectors",
                "< 60 s",
                f"{f['seconds']:.1f} s, {f['connect_requests']} Connect calls",
                "",
                met(f["seconds"] < 60),
            ]
        )
        rows.append(
            [
                f"Operator RSS with {f['connectors']:,} Connectors (after resync / peak; after the apply run / peak)",
                "< 300 MiB (peaks)",
                f"{rss(f)}; {rss(top)}",
                "",
                met(f["peak_rss_mib"] < 300 and top["peak_rss_mib"] < 300),
            ]
        )
    if rs := load(results, "restart_10k"):
        # restart_bench.py --connectors 10000 --connect-heap 2g --baseline REV (its own command)
        hygiene(rs)
        cur, base = rs["current"], rs["baseline"]
        rows.append(
            [
                f"Operator restart with {rs['connectors']:,} Connectors, this code vs {rs['baseline_revision']} "
                "side by side (seconds to every one reconciled; RSS then)",
                "report",
                f"{cur['seconds']:.1f} vs {base['seconds']:.1f} s"
                + (
                    f" (of which Connect's answer to the listing {cur['listing_seconds']:.1f} vs "
                    f"{base['listing_seconds']:.1f} s)"
                    if "listing_seconds" in cur
                    else ""
                )
                + f"; RSS {cur['rss_mib']:.0f} vs {base['rss_mib']:.0f} MiB "
                f"(peak {cur['peak_rss_mib']:.0f} vs {base['peak_rss_mib']:.0f})",
                f"{rs['ratio_seconds']:.2f}x time, {rs['ratio_rss']:.2f}x RSS",
                "n/a",
            ]
        )
    if bm := load(results, "burst_memory"):
        hygiene(bm)
        after, peak = bm["rss_after_settle_mib"], bm["peak_rss_mib"]
        rows.append(
            [
                f"Operator RSS after a burst of {bm['connectors']:,} creations, {bm['settle_seconds']:.0f} s "
                "after Ready, heap trim on vs off (peak during the burst)",
                f"< {bm['target_rss_mib']} MiB",
                f"{after['on']:.0f} vs {after['off']:.0f} MiB (peak {peak['on']:.0f} vs {peak['off']:.0f})",
                f"{bm['ratio_on_vs_off']:.2f}x",
                met(bm["target_met"]),
            ]
        )
    if bc := load(results, "burst_memory_compare"):
        # burst_memory_bench.py --at-start --compare KEY=VALUE (its own command, no CI smoke)
        hygiene(bc)
        after, peak = bc["rss_after_settle_mib"], bc["peak_rss_mib"]
        when = "as the operator starts" if bc["at_start"] else "to an idle operator"
        rows.append(
            [
                f"Operator peak RSS, a burst of {bc['connectors']:,} creations {when}: this tree vs "
                f"{bc['compare']} (RSS {bc['settle_seconds']:.0f} s after Ready)",
                f"peak < {bc['target_rss_mib']} MiB",
                f"peak {peak['this']:.0f} vs {peak['baseline']:.0f} MiB (then {after['this']:.0f} vs "
                f"{after['baseline']:.0f})",
                f"{bc['peak_ratio']:.2f}x peak",
                met(peak["this"] < bc["target_rss_mib"]),
            ]
        )
    if bb := load(results, "burst_memory_baseline"):
        # burst_memory_bench.py --baseline REV (its own command, no CI smoke): the burst's height
        # between the issue's 1,000 and 10,000, so no target of its own
        hygiene(bb)
        after, peak = bb["rss_after_settle_mib"], bb["peak_rss_mib"]
        rows.append(
            [
                f"Operator peak RSS, a burst of {bb['connectors']:,} creations to an idle operator: this code vs "
                f"{bb['baseline_revision']} side by side (RSS {bb['settle_seconds']:.0f} s after Ready)",
                "report",
                f"peak {peak['this']:.0f} vs {peak['baseline']:.0f} MiB (then {after['this']:.0f} vs "
                f"{after['baseline']:.0f})",
                f"{bb['peak_ratio']:.2f}x peak",
                "n/a",
            ]
        )
    if sc := load(results, "scrape"):
        for e in sc["sizes"]:
            rss_added, heap, seconds = e["rss_added_mib"], e["heap_peak_mib"], e["seconds"]
            rows.append(
                [
                    f"One metrics scrape with {e['connectors']:,} Connectors: per-object gauges streamed vs "
                    "rendered whole by prometheus_client (RSS the scrape added; Python heap peak; seconds)",
                    "report",
                    f"{rss_added['this']:.1f} vs {rss_added['baseline']:.1f} MiB; heap {heap['this']:.1f} vs "
                    f"{heap['baseline']:.1f} MiB; {seconds['this']:.2f} vs {seconds['baseline']:.2f} s",
                    f"{e['ratio_rss_added']:.2f}x RSS, {e['ratio_seconds']:.2f}x time",
                    "n/a",
                ]
            )
    if t := load(results, "tombstone_scan"):
        c, k = t["results"]["connectops"], t["results"]["kcat"]
        rows.append(
            [
                f"Offsets-topic scan, {t['data']['records']:,} records, vs kcat",
                f">= {t['target_ratio']:g}x kcat",
                f"{c['records_per_second']:,.0f} vs {k['records_per_second']:,.0f} records/s",
                f"{t['ratio']:.2f}x",
                met(t["target_met"]),
            ]
        )
    if sp := load(results, "spark_check"):
        # issue 14's targets: at most 2x pandas at 100k partitions, faster than pandas at 1M
        targets: dict[int, tuple[str, Callable[[float], bool]]] = {
            100_000: ("<= 2x", lambda r: r <= 2.0),
            1_000_000: ("< 1x (faster)", lambda r: r < 1.0),
        }
        for s in sp["results"]:
            target, ok = targets.get(s["partitions"], ("report", None))
            ratio = s["spark_over_pandas"]
            rows.append(
                [
                    f"Spark check, {s['partitions']:,} partitions x {sp['samples']} samples, vs pandas",
                    target,
                    f"{s['spark_s']:.2f} s vs {s['pandas_s']:.2f} s",
                    f"{ratio:.2f}x",
                    met(None if ok is None else ok(ratio)),
                ]
            )
    if cr := load(results, "crash"):
        hygiene(cr)
        for kind, label in (("boundary", "step boundaries"), ("random", f"random points, seed {cr['seed']}")):
            cases = [c for c in cr["cases"] if c["kind"] == kind]
            good = sum(c["outcome"] == "planned final state" for c in cases)
            rows.append(
                [f"Crash matrix: SIGKILL at {label}", "all in planned final state", f"{good} / {len(cases)}", "",
                 met(good == len(cases))]
            )  # fmt: skip
    if fa := load(results, "faults"):
        hygiene(fa)
        for r in fa["results"]:
            rows.append(
                [
                    f"Connect faults at {r['rate']:.0%} of calls ({r['faults_injected']} of {r['calls']} calls)",
                    "stuck = 0",
                    f"{r['succeeded']} succeeded, {r['failed_with_reason']} failed with reason, {r['stuck']} stuck",
                    "",
                    met(r["stuck"] == 0),
                ]
            )
    if b := load(results, "bad_input"):
        hygiene(b)
        fails = b.get("failures", {})
        for kind, tot in sorted(b.get("totals", {}).items()):
            rows.append(
                [
                    f"Bad input (hypothesis, from the CRD schema): {tot['generated']} {kind} specs, "
                    f"{tot['schema_invalid_variants']} mutated",
                    "0 unhandled, 0 unexplained",
                    f"{tot['rejected_by_api_server']} rejected by the API server, "
                    f"{tot['explained_by_condition']} explained by a condition; "
                    f"{tot['unexplained']} unexplained, {tot['unhandled_exceptions']} unhandled",
                    "",
                    met(
                        tot["unexplained"] == 0 and tot["unhandled_exceptions"] == 0 and not fails.get("operator_died")
                    ),
                ]
            )
    if pp := load(results, "producer_pressure"):
        d, o = pp["defaults"], pp["override"]
        rows.append(
            [
                "Producer pressure (the seed), batch.size 16384 -> 327680: records per request "
                "(seed ~25 -> ~500), outstanding queue peak (seed ~60,000 -> 2,000-3,000)",
                "per request up, queue peak down",
                f"{d['last']['records_per_request_avg']:.0f} -> "
                f"{o['last']['records_per_request_avg']:.0f} per request; "
                f"queue peak {d['queue_peak']:,.0f} -> {o['queue_peak']:,.0f}; commit lag "
                f"{d['commit_lag']:,} -> {o['commit_lag']:,}",
                f"{pp['records_per_request_factor']:.1f}x",
                # both factors are "how many times better" (queue: defaults' peak / override's)
                met(pp["records_per_request_factor"] > 1 and pp["queue_peak_factor"] > 1),
            ]
        )
    if ro := load(results, "rotation"):
        hygiene(ro)
        off, on = ro["off"], ro["on"]
        rows.append(
            [
                f"Secret rotation, {ro['connectors']} Connectors ({ro['connectors']} referenced + "
                f"{ro['unreferenced_secrets']} other Secrets): watch on vs off, idle API req/s, RSS, "
                f"{on['rotated']} rotations in Connect",
                "report; on: in Connect within seconds, no PUT for another key",
                f"on {on['idle_api_requests_per_second']:.2f} vs off {off['idle_api_requests_per_second']:.2f} "
                f"req/s; RSS {on['idle_rss_mib']:.0f} vs {off['idle_rss_mib']:.0f} MiB; in Connect after "
                f"{on['rotation_seconds_until_all_in_connect']:.1f} vs "
                f"{off['rotation_seconds_until_all_in_connect']:.1f} s",
                "",
                met(on["rotation_seconds_until_all_in_connect"] < 10 and on["config_puts_to_untouched"] == 0),
            ]
        )
    if cb := load(results, "check_batch"):
        hygiene(cb)
        b, base = cb["results"]
        rows.append(
            [
                f"Checks after {b['connectors']} simultaneous Connector changes (one Connect cluster): "
                "SparkApplications, at most in flight, time until every verdict (batched vs one each)",
                "<= 1 per cluster per window (50 connectors each), <= 4 in flight",
                f"{b['applications']} vs {base['applications']} applications; at most "
                f"{b['peak_applications_in_flight']} vs {base['peak_applications_in_flight']} in flight; every "
                f"verdict after {b['seconds_until_every_verdict']:.0f} vs {base['seconds_until_every_verdict']:.0f} s",
                f"{cb['ratio_time_baseline_over_batched']:.1f}x",
                met(
                    b["applications"] <= -(-b["connectors"] // 50) + 1
                    and b["peak_applications_in_flight"] <= 4
                    and not b["verdicts_not_matching_their_configmap"]
                ),
            ]
        )
    if ms := load(results, "mm2_soak"):
        rows.append(
            [
                f"MirrorMaker 2 healthy soak, {ms['seconds'] / 60:.0f} min at the production resync: "
                f"{ms['restarts']} restarts of MM2's task, {ms['looks']} looks for loss",
                "0 false alarms, 0 records lost",
                f"{ms['false_alarms']} false alarms; {ms['records_produced']:,} produced, "
                f"{ms['records_replicated']:,} on the target ({ms['duplicates_on_target']:,} duplicates), "
                f"{ms['records_lost']} lost",
                "",
                met(ms["false_alarms"] == 0 and ms["records_lost"] == 0),
            ]
        )
    if sm := load(results, "start_memory"):
        hygiene(sm)
        peak = sm["peak_rss_mib"]
        rows.append(
            [
                f"Operator peak RSS from its start through {sm['resyncs']} resyncs: a {sm['listed']:,}-connector "
                f"listing and {sm['failed']} statuses of {sm['tasks']:,} failed tasks vs the same without them",
                f"< {sm['target_peak_mib']:.0f} MiB",
                f"{peak['adversarial']:.0f} vs {peak['baseline']:.0f} MiB",
                f"{sm['peak_ratio']:.2f}x",
                met(sm["target_met"]),
            ]
        )
    rows.append(
        [
            "Secret hygiene: canary in every Secret read, searched in logs, Events, objects",
            "0 hits",
            f"{hygiene_hits} hits in {hygiene_places} logs/events/objects",
            "",
            met(hygiene_hits == 0),
        ]
    )
    summary["secret_hits"] = hygiene_hits
    return table(["measure", "target", "measured", "ratio", "met"], rows), summary


def write_readme(markdown: str, when: dict[str, Any], *, keep_header: bool = False) -> None:
    """The table into README.md between its markers. A full run heads it with its own time and
    machine; a report-only rebuild keeps the header there is (it ran nothing, so "latest full run,
    now" would be false: the rows' provenance is what that header says, kept by hand)."""
    readme = ROOT / "benchmarks" / "README.md"
    text = readme.read_text()
    header = (
        f"_Latest full run: {when['time']}, {when['cpus']} CPUs ({when['cpu_model']}), "
        f"{when['memory_gib']} GiB, Python {when['python']}, {when['java']}._"
    )
    if keep_header and START in text:
        kept = text[text.index(START) + len(START) :].lstrip("\n").split("\n", 1)[0]
        header = kept if kept.startswith("_") else header
    block = f"{START}\n{header}\n\n{markdown}\n{END}"
    if START in text:
        text = text[: text.index(START)] + block + text[text.index(END) + len(END) :]
    else:
        text += "\n" + block + "\n"
    readme.write_text(text)
    log("README.md table updated")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--smoke", action="store_true")
    parser.add_argument("--only", nargs="+", choices=[s for s, _ in SCRIPTS])
    parser.add_argument("--report-only", action="store_true")
    args = parser.parse_args(argv)
    results = Path(tempfile.mkdtemp(prefix="bench-smoke-")) if args.smoke else RESULTS
    failed: list[str] = []
    timings: dict[str, float] = {}
    if not args.report_only:
        for script, name in SCRIPTS:
            if args.only and script not in args.only:
                continue
            cmd = [sys.executable, str(ROOT / "benchmarks" / f"{script}.py"), "--output", str(results / f"{name}.json")]
            cmd += ["--smoke"] if args.smoke else []
            log("running " + " ".join(cmd[1:]))
            started = time.monotonic()
            code = subprocess.run(cmd, cwd=ROOT, check=False).returncode
            timings[script] = time.monotonic() - started
            log(f"{script}: exit {code} in {timings[script]:.0f} s")
            if code != 0:
                failed.append(script)
    markdown, summary = report(results)
    print(markdown)
    (results / "summary.json").write_text(
        json.dumps({"machine": machine(), "summary": summary, "seconds": timings, "failed": failed}, indent=2) + "\n"
    )
    if not args.smoke:
        write_readme(markdown, machine(), keep_header=args.report_only)
    if failed:
        log("failed: " + ", ".join(failed))
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
