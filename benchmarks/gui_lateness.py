"""Does a long history slow the GUI down during a run? The Runs tab's refresh, old way against new.

The app as `python -m workbench` builds it (main window + Runs tab over a history store), the history
filled with 2,000 finished runs, trains a short real CPU run (small-cnn, synthetic data) while a 10 ms
PreciseTimer pings the GUI thread; lateness = gap between pings − 10 ms, percentiles over the run. The
run's recorder writes its row about once a second, so the Runs tab's 2 s poll refreshes all through it:

- before: the view forgets what it read before each refresh — every refresh re-reads and re-parses every run and
  redraws every row (what the tab did before issue 9);
- after: the default — every refresh reads the runs written since the last one (here: the running row).

Each measurement is a fresh process; before and after alternate. Also reported: each refresh's own time
on the GUI thread (since the reads left it, runs_refresh: applying what was read to the table). The training
thread, and the reads, share the GIL with the GUI thread in both modes.

    python benchmarks/gui_lateness.py              # prints a table, writes benchmarks/results/gui_lateness-cpu.json
    python benchmarks/gui_lateness.py --repeats 1 --runs 500
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

from _common import RESULTS, write_results
from gui_latency import child_env, finished_child_run, machine, percentile

PING_INTERVAL_MS = 10
STALL_MS = 50  # a gap the user feels: a click or a repaint waits this long
MODES = ("before", "after")
REPO = Path(__file__).resolve().parents[1]


def run_config() -> dict:
    # About 15-25 s on a 2-core VM: some ten polls of the Runs tab while it trains.
    return {"dataset": "synthetic", "synthetic_size": 4096, "model": "small-cnn", "batch_size": 64,
            "epochs": 1, "num_workers": 0, "device": "cpu", "log_every": 10}


def child(mode: str, runs: int, out_path: str) -> int:
    from PySide6.QtCore import Qt, QTimer

    sys.path.insert(0, str(REPO / "tests"))  # the tests' builders: a large history made in a second
    from builders import fill_history

    from workbench.config import RunConfig
    from workbench.engine.events import RunEnded, RunStarted
    from workbench.gui.app import build_window, create_application, run_window
    from workbench.gui.runs_view import RunsView
    from workbench.gui.settings_file import SettingsFile
    from workbench.history.store import HistoryStore

    app = create_application()
    store = HistoryStore.open()
    began = time.perf_counter()
    fill_history(store, runs)
    fill_seconds = time.perf_counter() - began
    window = build_window(store, settings=SettingsFile(Path(out_path).with_suffix(".settings.json")))
    view = window.findChild(RunsView)
    window.form.set_config(RunConfig.from_dict(run_config()))
    gaps: list[tuple[float, float]] = []  # (end, length) of each gap between pings, perf_counter seconds
    refreshes: list[tuple[float, float]] = []  # (start, end) of each Runs-tab refresh during the run
    state = {"training": False, "last": 0.0, "started": 0.0}

    refresher = view.refresher
    real_start, real_apply = refresher._start, refresher._apply

    def start_read() -> None:
        if mode == "before":  # as before issue 9: the view forgets what it read, so every refresh reads every run
            refresher.revision = None
        real_start()

    def timed_apply(changes, everything: bool) -> None:  # a refresh's time on the GUI thread: the reads are not
        start = time.perf_counter()
        real_apply(changes, everything)
        if state["training"]:
            refreshes.append((start, time.perf_counter()))

    refresher._start, refresher._apply = start_read, timed_apply  # looked up on the instance at each read

    def ping() -> None:
        now = time.perf_counter()
        if state["training"]:
            gaps.append((now, now - state["last"]))
        state["last"] = now

    def on_started(_event) -> None:
        state["training"] = True
        state["last"] = state["started"] = time.perf_counter()

    def during_refresh(end: float, length: float) -> bool:
        return any(start < end and end - length < stop for start, stop in refreshes)

    def on_ended(event) -> None:
        state["training"] = False
        Path(out_path).write_text(json.dumps({
            "mode": mode, "status": event.status, "reason": event.reason, "steps": event.summary.steps,
            "runs_in_history": view.model.rowCount(), "fill_seconds": fill_seconds,
            "lateness_ms": [max(0.0, gap * 1000 - PING_INTERVAL_MS) for _, gap in gaps],
            # Missed ticks are not queued: a 1 s stall is one late ping, so percentiles of pings understate
            # stalls; the share of the run's time spent inside gaps longer than STALL_MS does not.
            "stalled_fraction": sum(gap for _, gap in gaps if gap * 1000 > STALL_MS)
                                / max(sum(g for _, g in gaps), 1e-9),
            "refresh_ms": [(stop - start) * 1000 for start, stop in refreshes],
            # The five longest gaps: when (seconds into the run), how long, and whether a refresh ran in them.
            "longest_gaps": [
                {"at_s": end - state["started"], "ms": gap * 1000, "during_refresh": during_refresh(end, gap)}
                for end, gap in sorted(gaps, key=lambda item: -item[1])[:5]
            ],
        }))
        QTimer.singleShot(0, window.close)

    timer = QTimer(timerType=Qt.TimerType.PreciseTimer, interval=PING_INTERVAL_MS, timeout=ping)
    timer.start()
    window.training_thread.event.connect(lambda event: on_started(event) if isinstance(event, RunStarted)
                                 else on_ended(event) if isinstance(event, RunEnded) else None)
    QTimer.singleShot(3000, window.start_button.click)  # after the device probe has imported torch
    try:
        return run_window(app, window)
    finally:
        store.close()


def measure(mode: str, runs: int, index: int, tmp: Path) -> dict:
    home = tmp / f"{mode}-{index}"
    out = home / "result.json"
    home.mkdir()
    return finished_child_run([sys.executable, __file__, "--child", mode, str(runs), str(out)], out,
                              child_env(home), f"{mode} run")


def figures(values: list[float]) -> dict:
    if not values:
        return {"samples": 0}
    return {"samples": len(values), "p50": percentile(values, 0.50), "p95": percentile(values, 0.95),
            "p99": percentile(values, 0.99), "max": max(values)}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=2000, help="finished runs in the history")
    parser.add_argument("--repeats", type=int, default=2, help="measurements per mode (alternating)")
    parser.add_argument("--out", type=Path, default=RESULTS / "gui_lateness-cpu.json")
    parser.add_argument("--child", nargs=3, metavar=("MODE", "RUNS", "OUT"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        mode, runs, out = args.child
        return child(mode, int(runs), out)

    measured: dict[str, list[dict]] = {mode: [] for mode in MODES}
    with tempfile.TemporaryDirectory(prefix="gui-lateness-") as tmp:
        for index in range(args.repeats):
            for mode in MODES:
                measured[mode].append(measure(mode, args.runs, index, Path(tmp)))
                last = measured[mode][-1]
                print(f"{mode} {index + 1}: lateness p99 {percentile(last['lateness_ms'], 0.99):.1f} ms, "
                      f"{len(last['refresh_ms'])} refreshes, "
                      f"median {statistics.median(last['refresh_ms'] or [0]):.1f} ms",
                      flush=True)

    result = {
        "machine": machine(),
        "history_runs": args.runs,
        "config": run_config(),
        "ping_interval_ms": PING_INTERVAL_MS,
        "stall_ms": STALL_MS,
        "modes": {
            mode: {
                "event_loop_lateness_ms": figures([v for run in runs for v in run["lateness_ms"]]),
                "runs_tab_refresh_ms": figures([v for run in runs for v in run["refresh_ms"]]),
                "stalled_fraction": [run["stalled_fraction"] for run in runs],
                "longest_gaps": [run["longest_gaps"] for run in runs],
                "refreshes_per_run": [len(run["refresh_ms"]) for run in runs],
                "steps_per_run": [run["steps"] for run in runs],
            }
            for mode, runs in measured.items()
        },
        "notes": "before = every run re-read on every refresh (the view's read revision forgotten, as before issue 9); "
                 "after = only the runs written since the last refresh. Runs tab not the visible tab.",
    }
    print(f"\n{args.runs} runs in the history; {result['machine']}")
    print(f"{'':>8}  {'lateness p50':>12} {'p95':>8} {'p99':>8} {'max':>8}   {'refresh p50':>11} {'max':>8}  (ms)"
          f"   time in gaps > {STALL_MS} ms")
    for mode in MODES:
        figures_of = result["modes"][mode]
        late, refresh = figures_of["event_loop_lateness_ms"], figures_of["runs_tab_refresh_ms"]
        stalled = ", ".join(f"{share:.1%}" for share in figures_of["stalled_fraction"])
        print(f"{mode:>8}  {late['p50']:>12.1f} {late['p95']:>8.1f} {late['p99']:>8.1f} {late['max']:>8.1f}   "
              f"{refresh.get('p50', float('nan')):>11.1f} {refresh.get('max', float('nan')):>8.1f}        {stalled}")
    print(f"\nwrote {write_results(args.out, result)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
