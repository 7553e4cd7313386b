"""Does `workbench trace` agree with Holistic Trace Analysis on real GPU traces, and how much faster is it?

For each trace in ../shared/traces (a file, or the folder of ranks), per rank:
- our ``gpu_span`` shares (idle, compute, non-compute over HTA's window: first to last GPU event) beside HTA's
  temporal breakdown, as committed in ../shared/traces/hta-0.5.0.json and, when HTA is installed, run live.
  Paired by file: HTA gives a file one row over every GPU it holds, ours a rank per GPU, so a file of several
  GPUs is compared in one row more, ours and HTA's rules replayed over its GPUs as one (``paired_rows``);
- the speed and peak memory of each, side by side: ours is ``read_report`` (reading, analysis, findings: the whole
  report), HTA's is ``TraceAnalysis(trace_dir=…)`` plus ``get_temporal_breakdown()`` (a folder of ranks is one
  read of each: its speed is on its first rank's row). Each read runs in a fresh process of its own (its peak RSS
  is its own), ours and HTA's interleaved (ours, HTA, ours, HTA, …) ``--repeats`` times each, so a slow spell of
  a shared machine falls on both. Times are medians; "HTA ÷ ours" is the ratio of the medians with the project's
  interval for a ratio (``experiments.ab.ratio_interval``: Hodges–Lehmann over every pair, 90 % where five
  repeats allow it).

HTA is an optional extra (``pip install 'gpu-training-workbench[hta]'``), never a runtime dependency. It need not
be installed beside the workbench: ``--hta-python`` names another interpreter that has it (a venv of its own), and
this script runs HTA there. Without either, the committed figures alone are compared.

    python benchmarks/trace_vs_hta.py [--traces ../shared/traces] [--hta-python /tmp/hta-venv/bin/python]
                                       [--repeats 5]

Prints a Markdown table for docs/benchmarks.md and writes benchmarks/results/trace_vs_hta-cpu.json.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Optional

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
RESULTS = HERE / "results"
DEFAULT_TRACES = ROOT.parent / "shared" / "traces"
COMMITTED = "hta-0.5.0.json"
FILE_ROW = "(in the file's row)"  # a GPU's cell where HTA gives its file one row


# -- the two workers: each runs in a process of its own and prints one JSON line -----------------------------


def ours_worker(path: str) -> dict[str, Any]:
    sys.path.insert(0, str(ROOT))
    from workbench.trace_analysis.reading import read_report
    from workbench.trace_analysis.script_findings import with_findings

    began, cpu_began = time.perf_counter(), _cpu_seconds()
    report = with_findings(read_report(path))
    seconds, cpu_seconds = time.perf_counter() - began, _cpu_seconds() - cpu_began
    return {"seconds": seconds, "cpu_seconds": cpu_seconds, "peak_rss_bytes": _peak_rss_bytes(),
            # each rank with the file and GPU it is (HTA gives a file one row, whatever GPUs it holds)
            "ranks": [{"rank": rank.rank, "file": Path(rank.file or path).name, "device_index": rank.device_index,
                       "gpu_span_pct": {name: 100 * share for name, share in rank.gpu_span.items()}
                       if rank.gpu_span is not None else None} for rank in report.ranks]}


def hta_worker(path: str) -> dict[str, Any]:
    import logging

    logging.disable(logging.WARNING)  # HTA logs every file it parses
    from hta.trace_analysis import TraceAnalysis

    target = Path(path)
    with tempfile.TemporaryDirectory() as folder:
        if target.is_file():  # HTA reads a folder: one file per rank
            os.symlink(target.resolve(), Path(folder) / target.name)
            trace_dir = folder
        else:
            trace_dir = str(target)
        began, cpu_began = time.perf_counter(), _cpu_seconds()
        analysis = TraceAnalysis(trace_dir=trace_dir)
        frame = analysis.get_temporal_breakdown(visualize=False)
        seconds, cpu_seconds = time.perf_counter() - began, _cpu_seconds() - cpu_began
    ranks = {str(int(row["rank"])): {"idle_share": float(row["idle_time_pctg"]),
                                     "compute_share": float(row["compute_time_pctg"]),
                                     "non_compute_share": float(row["non_compute_time_pctg"])}
             for _, row in frame.iterrows()}
    return {"seconds": seconds, "cpu_seconds": cpu_seconds, "peak_rss_bytes": _peak_rss_bytes(), "ranks": ranks}


def _cpu_seconds() -> float:
    """CPU time of this process and the children it has waited for (HTA parses ranks in a process pool): on a
    loaded machine the wall time says more about the other processes than about the reader."""
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def _peak_rss_bytes() -> int:
    kilobytes = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # Linux: KiB
    return kilobytes * 1024


def _in_process(python: str, role: str, path: str, extra_env: Optional[dict[str, str]] = None) -> dict[str, Any]:
    env = {**os.environ, **(extra_env or {})}
    result = subprocess.run([python, str(Path(__file__).resolve()), f"--{role}-worker", path],
                            capture_output=True, text=True, env=env, timeout=1800)
    if result.returncode != 0:  # the failing line and the exception, without the caret lines under them
        said = [line.strip() for line in result.stderr.strip().splitlines() if line.strip().strip("^~")]
        raise RuntimeError(" | ".join(said[-2:]) or f"{role} exited with {result.returncode}")
    return json.loads(result.stdout.strip().splitlines()[-1])


def _interleaved(sides: dict[str, Optional[str]], path: str, repeats: int) -> dict[str, Optional[dict[str, Any]]]:
    """Each side's reads of one trace, taken in turn (one of each per round), in fresh processes; a side whose
    interpreter is None is not run; one that fails is not run again on it, and its error is under "ROLE_error"."""
    runs: dict[str, list[dict[str, Any]]] = {role: [] for role, python in sides.items() if python}
    failed: dict[str, str] = {}
    for _ in range(repeats):
        for role, python in sides.items():
            if python and role not in failed:
                try:
                    runs[role].append(_in_process(python, role, path))
                except RuntimeError as error:  # HTA stops on some real traces: said in the row, not a crash
                    failed[role] = str(error)
    result: dict[str, Optional[dict[str, Any]]] = {role: None for role in sides}
    result.update({f"{role}_error": message for role, message in failed.items()})  # type: ignore[misc]
    for role, taken in runs.items():
        if role in failed:
            continue
        result[role] = {**taken[0], "seconds": statistics.median(run["seconds"] for run in taken),
                        "seconds_each": [run["seconds"] for run in taken],
                        "cpu_seconds": statistics.median(run["cpu_seconds"] for run in taken),
                        "cpu_seconds_each": [run["cpu_seconds"] for run in taken],
                        "peak_rss_bytes": max(run["peak_rss_bytes"] for run in taken)}
    return result


def speedup(ours: list[float], hta: list[float]) -> dict[str, Optional[float]]:
    """HTA's time ÷ ours: the ratio of the medians, and the interval of the ratio (None with too few repeats)."""
    sys.path.insert(0, str(ROOT))
    from workbench.experiments.ab import ratio_interval

    interval = ratio_interval(ours, hta)
    low, high, coverage = interval if interval is not None else (None, None, None)
    return {"median": statistics.median(hta) / statistics.median(ours), "low": low, "high": high,
            "coverage": coverage}


# -- the comparison ----------------------------------------------------------------------------------------------


def file_views(path: Path) -> list[dict[str, Any]]:
    """Each trace file as HTA reads it (one row, numbered by its distributedInfo's rank, else 0) and as ours does
    (a rank per GPU): its GPUs, each with HTA's two rules replayed on our events (trace_analysis/hta_rules.py:
    device work whose launch is not in the trace dropped, fractional µs rounded inward), in percent; and, for a
    file of several GPUs, "as_one": our rule and HTA's replayed over all of its GPUs' events together, which is
    what HTA's row is over."""
    sys.path.insert(0, str(ROOT))
    from workbench.trace_analysis import file_ranks, hta_rules, parsed_trace, reading

    views = []
    files, _notes = reading.trace_files(path)
    for position, file in enumerate(files):
        parsed = parsed_trace.read_trace(file)
        gpus = file_ranks.rank_events(parsed, position)
        view: dict[str, Any] = {"file": file.name, "hta_rank": parsed_trace.process_rank(parsed.meta) or 0,
                                "gpus": [{"device_index": events.device_index,
                                          "with_hta_rules_pct": _percent(hta_rules.hta_gpu_span(
                                              events.device_work, events.gpu_markers, events.launches_and_steps,
                                              events.fractional_timestamps))} for events in gpus],
                                "as_one": None}
        if len(gpus) > 1:  # the host's events are the process's, shared by its GPUs: any GPU's copy of them
            device = sorted((a for events in gpus for a in events.device_work), key=lambda a: a.start_ns)
            markers = sorted((a for events in gpus for a in events.gpu_markers), key=lambda a: a.start_ns)
            view["as_one"] = {"ours_pct": _percent(hta_rules.gpu_span(device, markers)),
                              "with_hta_rules_pct": _percent(hta_rules.hta_gpu_span(
                                  device, markers, gpus[0].launches_and_steps, gpus[0].fractional_timestamps))}
        views.append(view)
    return views


def _percent(span: Optional[dict[str, float]]) -> Optional[dict[str, float]]:
    return None if span is None else {name: 100 * share for name, share in span.items()}


def paired_rows(name: str, views: list[dict[str, Any]], ours: dict[str, Any], live: Optional[dict[str, Any]],
                committed: dict[str, Any]) -> list[dict[str, Any]]:
    """The table's rows of one trace: each of our ranks, and HTA's row of the file it was read from. HTA gives a
    file one row, over every GPU it holds, so a file of one GPU pairs its rank with that row; a file of several
    gives a row per GPU without HTA's figures ("hta_row": "as_one"), and a row more that sets HTA's beside ours and
    HTA's rules replayed over the file's GPUs as one ("gpus_as_one": their indices)."""
    ours_of = {(rank["file"], rank["device_index"]): rank for rank in ours["ranks"]}
    rows: list[dict[str, Any]] = []
    for view in views:
        live_row = live["ranks"].get(str(view["hta_rank"])) if live else None
        hta = {"hta_committed_pct": committed_for(committed, name, view["file"]), "hta_live_pct": live_row}
        several = view["as_one"] is not None
        for gpu in view["gpus"]:
            rank = ours_of.get((view["file"], gpu["device_index"]))
            if rank is None or rank["gpu_span_pct"] is None:  # no GPU figures (a CPU-only file): nothing to compare
                continue
            rows.append({"trace": name, "rank": rank["rank"], "ours_pct": rank["gpu_span_pct"],
                         "ours_with_hta_rules_pct": gpu["with_hta_rules_pct"],
                         **({"hta_committed_pct": None, "hta_live_pct": None, "hta_row": "as_one",
                             "device_index": gpu["device_index"], "gpus_in_file": len(view["gpus"])}
                            if several else hta)})
        if several:
            rows.append({"trace": name, "rank": view["hta_rank"], "file": view["file"],
                         "gpus_as_one": [gpu["device_index"] for gpu in view["gpus"]],
                         "ours_pct": view["as_one"]["ours_pct"],
                         "ours_with_hta_rules_pct": view["as_one"]["with_hta_rules_pct"], **hta})
    return rows


def traces_in(folder: Path, committed: dict[str, Any]) -> list[tuple[str, Path]]:
    """(name as hta-0.5.0.json keys it, path to read): single files, and each folder of ranks as one job (a folder
    whose files the committed figures do not name, such as traces without a GPU timeline, is not one)."""
    found = [(p.name, p) for p in sorted(folder.glob("*.json.gz"))]
    found += [(p.name + "/", p) for p in sorted(folder.iterdir())
              if p.is_dir() and any(key.startswith(p.name + "/") for key in committed)]
    return found


def committed_for(committed: dict[str, Any], name: str, file: str) -> Optional[dict[str, float]]:
    """HTA's committed figures of one file of the trace ``name`` (a file, or a folder "folder/" whose files are keyed
    "folder/rank-N.json.gz"): by the file, as HTA's rows are, not by our rank number."""
    entry = committed.get(name) if not name.endswith("/") else committed.get(name + file)
    if entry is None or "hta_temporal_pct" not in entry:
        return None
    pct = entry["hta_temporal_pct"]
    return {"idle_share": pct["idle"], "compute_share": pct["compute"], "non_compute_share": pct["non_compute"]}


def main(argv: Optional[list[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--traces", type=Path, default=DEFAULT_TRACES)
    parser.add_argument("--hta-python", help="an interpreter that has HolisticTraceAnalysis installed")
    parser.add_argument("--repeats", type=int, default=5, help="reads of each trace by each, interleaved")
    parser.add_argument("--ours-worker", help=argparse.SUPPRESS)
    parser.add_argument("--hta-worker", help=argparse.SUPPRESS)
    parser.add_argument("--render", type=Path, metavar="RESULTS.json", help="print the table of a results file")
    parser.add_argument("--out", type=Path, default=RESULTS / "trace_vs_hta-cpu.json", help="the results file")
    args = parser.parse_args(argv)
    if args.render:
        print("\n".join(table(json.loads(args.render.read_text())["rows"])))
        return 0
    if args.ours_worker:
        print(json.dumps(ours_worker(args.ours_worker)))
        return 0
    if args.hta_worker:
        print(json.dumps(hta_worker(args.hta_worker)))
        return 0

    committed = json.loads((args.traces / COMMITTED).read_text())
    hta_python = args.hta_python or (sys.executable if _has_hta() else None)
    rows: list[dict[str, Any]] = []
    for name, path in traces_in(args.traces, committed):
        reads = _interleaved({"ours": sys.executable, "hta": hta_python}, str(path), args.repeats)
        ours, live = reads["ours"], reads["hta"]
        assert ours is not None
        first = len(rows)
        rows += paired_rows(name, file_views(path), ours, live, committed)
        if len(rows) == first:  # no GPU figures in it (CPU-only files): nothing to set beside HTA's
            continue
        if reads.get("hta_error"):
            rows[first]["hta_error"] = reads["hta_error"]
        rows[first]["speed"] = {
            "ours_seconds": ours["seconds"], "ours_seconds_each": ours["seconds_each"],
            "ours_cpu_seconds": ours["cpu_seconds"], "ours_cpu_seconds_each": ours["cpu_seconds_each"],
            "ours_peak_rss_bytes": ours["peak_rss_bytes"],
            "hta_seconds": live["seconds"] if live else None,
            "hta_seconds_each": live["seconds_each"] if live else None,
            "hta_cpu_seconds": live["cpu_seconds"] if live else None,
            "hta_cpu_seconds_each": live["cpu_seconds_each"] if live else None,
            "hta_peak_rss_bytes": live["peak_rss_bytes"] if live else None,
            "hta_over_ours_wall": speedup(ours["seconds_each"], live["seconds_each"]) if live else None,
            "hta_over_ours_cpu": speedup(ours["cpu_seconds_each"], live["cpu_seconds_each"]) if live else None,
            "bytes_on_disk": _size(path)}
    payload = {"machine": {"cpu_count": os.cpu_count(), "python": platform.python_version(),
                           "platform": platform.platform(), "load_average": os.getloadavg(),
                           "hta_live": hta_python is not None, "repeats": args.repeats},
               "rows": rows}
    out = args.out.resolve()
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(payload, indent=2))
    print("\n".join(table(rows)))
    print(f"\nwrote {out}")
    return 0


def table(rows: list[dict[str, Any]]) -> list[str]:
    lines = ["| trace | rank | idle ours / HTA | compute ours / HTA | non-compute ours / HTA | largest gap | "
             "gap with HTA's rules replayed | ours: wall s, CPU s (peak RSS) | HTA: wall s, CPU s (peak RSS) | "
             "HTA ÷ ours, wall | HTA ÷ ours, CPU |",
             "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    keys = ("idle_share", "compute_share", "non_compute_share")

    def gap(a: Optional[dict[str, float]], b: Optional[dict[str, float]]) -> str:
        return f"{max(abs(a[k] - b[k]) for k in keys):.2f} pt" if a and b else "n/a"

    speeds = {row["trace"]: row["speed"] for row in rows if row.get("speed")}
    shown = set()
    for row in rows:
        ours, hta = row["ours_pct"], row["hta_live_pct"] or row["hta_committed_pct"]
        as_one = row.get("hta_row") == "as_one"  # one GPU of a file HTA reads as one row: no figure of HTA's for it
        cells = [f"{ours[k]:.2f} / {FILE_ROW if as_one else f'{hta[k]:.2f}' if hta else 'n/a'}" for k in keys]
        gaps = (f"{FILE_ROW} | {FILE_ROW}" if as_one
                else f"{gap(ours, hta)} | {gap(row['ours_with_hta_rules_pct'], hta)}")
        speed = speeds.get(row["trace"]) if row["trace"] not in shown else None  # one read per trace
        shown.add(row["trace"])
        if speed:
            ours_s = (f"{speed['ours_seconds']:.2f}, {speed['ours_cpu_seconds']:.2f} "
                      f"({speed['ours_peak_rss_bytes'] / 2**20:.0f} MiB)")
            hta_s = (f"{speed['hta_seconds']:.2f}, {speed['hta_cpu_seconds']:.2f} "
                     f"({speed['hta_peak_rss_bytes'] / 2**20:.0f} MiB)" if speed["hta_seconds"] is not None
                     else f"stopped: {row['hta_error'].split(' | ')[0]}" if row.get("hta_error") else "n/a")
            ratio = (f"{_ratio(speed['hta_over_ours_wall'])} | {_ratio(speed['hta_over_ours_cpu'])}"
                     if speed.get("hta_over_ours_wall") else "n/a | n/a")
        else:
            ours_s = hta_s = "(with the row above)"
            ratio = "(with the row above) | (with the row above)"
        lines.append(f"| {row['trace']} | {_rank_cell(row)} | {' | '.join(cells)} | {gaps} | {ours_s} | {hta_s} | "
                     f"{ratio} |")
    return lines


def _rank_cell(row: dict[str, Any]) -> str:
    """Our rank; for a file of several GPUs, which GPU, and the row of them all as one (HTA's)."""
    if row.get("hta_row") == "as_one":
        return f"{row['rank']} (cuda:{row['device_index']}, one of the file's {row['gpus_in_file']} GPUs)"
    if row.get("gpus_as_one"):
        return f"{' + '.join(f'cuda:{index}' for index in row['gpus_as_one'])} as one (HTA's rank {row['rank']})"
    return str(row["rank"])


def _ratio(speed: dict[str, Optional[float]]) -> str:
    if speed["low"] is None:
        return f"{speed['median']:.1f}× (too few repeats for an interval)"
    return f"{speed['median']:.1f}× ({speed['low']:.1f}–{speed['high']:.1f}×, {speed['coverage']:.0%})"


def _has_hta() -> bool:
    try:
        import hta  # noqa: F401
    except ImportError:
        return False
    return True


def _size(path: Path) -> int:
    return path.stat().st_size if path.is_file() else sum(p.stat().st_size for p in path.iterdir() if p.is_file())


if __name__ == "__main__":
    sys.exit(main())
