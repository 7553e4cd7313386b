"""Holistic Trace Analysis's own figures on a folder of single-rank traces, written as hta-0.5.0.json is.

Run it with an interpreter that has HTA (an optional extra; a venv of its own is fine):

    /tmp/hta-venv/bin/python benchmarks/hta_figures.py FOLDER [--out FOLDER/hta-0.5.0.json]

Per ``*.json.gz`` file, one key (its name) holding, as ../shared/traces/hta-0.5.0.json does:
- ``gpu``, ``rank``, ``device_index``, ``profiler_steps_in_file``: read from the trace itself;
- ``hta_temporal_pct``: ``TraceAnalysis(trace_dir=…).get_temporal_breakdown()``, in percent;
- ``hta_temporal_pct_without_us_rounding``: the same with ``HTA_DISABLE_NS_ROUNDING=1`` (a process of its own:
  HTA reads the variable as it parses);
- ``hta_idle_split_of_idle``: ``get_idle_time_breakdown()`` summed over the streams, as shares of idle time;
- ``hta_error`` instead of the three, where HTA fails on the trace: the last lines of what it raised.
Each file is analysed in a folder of its own (HTA reads a folder, one file per rank). Nothing of the workbench
is imported: these are HTA's figures, to hold ours against.
"""

from __future__ import annotations

import argparse
import gzip
import json
import logging
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any


def trace_facts(path: Path) -> dict[str, Any]:
    with gzip.open(path, "rt", encoding="utf-8") as file:
        trace = json.load(file)
    events = trace.get("traceEvents", [])
    devices = {event["args"]["device"] for event in events
               if event.get("cat") in ("kernel", "Kernel") and isinstance(event.get("args", {}).get("device"), int)}
    steps = {event["name"] for event in events if str(event.get("name", "")).startswith("ProfilerStep#")}
    info = trace.get("distributedInfo") or {}
    return {"gpu": sorted({p["name"] for p in trace.get("deviceProperties", []) if "name" in p}),
            "rank": int(info.get("rank", 0)), "device_index": min(devices) if devices else None,
            "profiler_steps_in_file": len(steps)}


def hta_temporal(path: Path) -> dict[str, Any]:
    """In this process (HTA_DISABLE_NS_ROUNDING as the caller set it): the temporal breakdown and idle split."""
    logging.disable(logging.WARNING)  # HTA logs every file it parses
    from hta.trace_analysis import TraceAnalysis

    with tempfile.TemporaryDirectory() as folder:
        os.symlink(path.resolve(), Path(folder) / path.name)
        analysis = TraceAnalysis(trace_dir=folder)
        frame = analysis.get_temporal_breakdown(visualize=False)
        row = frame.iloc[0]
        rank = int(row["rank"])
        idle, _ = analysis.get_idle_time_breakdown(ranks=[rank], visualize=False)
    by_category = idle.groupby("idle_category")["idle_time"].sum()
    total = float(by_category.sum())
    return {"temporal": {"idle": round(float(row["idle_time_pctg"]), 2),
                         "compute": round(float(row["compute_time_pctg"]), 2),
                         "non_compute": round(float(row["non_compute_time_pctg"]), 2)},
            "idle_split": {category: round(float(by_category.get(category, 0.0)) / total, 4) if total else 0.0
                           for category in ("host_wait", "kernel_wait", "other")}}


def in_process(path: Path, rounding: bool) -> dict[str, Any]:
    """HTA's figures from a process of its own; {"error": …} where HTA fails on the trace (its last line)."""
    env = dict(os.environ, HTA_DISABLE_NS_ROUNDING="0" if rounding else "1")
    done = subprocess.run([sys.executable, __file__, "--worker", str(path)], env=env, capture_output=True, text=True,
                          timeout=1800)
    if done.returncode != 0:
        lines = [re.sub(r'File ".*[/\\]site-packages[/\\]', 'File "', line.strip())  # no local paths
                 for line in done.stderr.strip().splitlines() if line.strip().strip("^~")]
        return {"error": " | ".join(lines[-3:]) if lines else f"exit status {done.returncode}"}
    return json.loads(done.stdout.strip().splitlines()[-1])


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folder", type=Path, nargs="?")
    parser.add_argument("--out", type=Path)
    parser.add_argument("--worker", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker:
        print(json.dumps(hta_temporal(args.worker)))
        return 0
    figures = {}
    for path in sorted(args.folder.glob("*.json.gz")):
        rounded, exact = in_process(path, rounding=True), in_process(path, rounding=False)
        entry = figures[path.name] = trace_facts(path)
        if "error" in rounded or "error" in exact:  # kept, with HTA's words: the trace still counts
            entry["hta_error"] = rounded.get("error") or exact.get("error")
        else:
            entry.update({"hta_temporal_pct": rounded["temporal"],
                          "hta_temporal_pct_without_us_rounding": exact["temporal"],
                          "hta_idle_split_of_idle": rounded["idle_split"]})
        print(path.name, entry.get("hta_temporal_pct"), entry.get("hta_idle_split_of_idle"), entry.get("hta_error"),
              flush=True)
    out = args.out or args.folder / "hta-0.5.0.json"
    out.write_text(json.dumps(figures, indent=1) + "\n")
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
