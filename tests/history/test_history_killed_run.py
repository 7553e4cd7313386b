"""A process killed with SIGKILL in the middle of a run: the history survives and says what happened."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

from workbench.history.store import HistoryStore

# The child records two whole runs, then a third that it keeps writing steps to until it is killed.
CHILD = textwrap.dedent(
    """
    from builders import record_complete_run, started, step
    from workbench.config import RunConfig
    from workbench.history.store import HistoryStore

    store = HistoryStore.open({home!r})
    record_complete_run(store, RunConfig(device="cpu", batch_size=32), name="first")
    record_complete_run(store, RunConfig(device="cpu", batch_size=64), name="second")
    recorder = store.start_run(RunConfig(device="cpu", batch_size=128), name="killed")
    recorder.record(started(RunConfig(device="cpu", batch_size=128), total_steps=10**9))
    for index in range(1, 6):
        recorder.record(step(index, 10**9))
    recorder.flush()
    print("ready", recorder.run_id, flush=True)
    recorder.flush_interval_s = 0  # from here every step is a commit: the kill lands mid-write
    index = 6
    while True:
        recorder.record(step(index, 10**9))
        index += 1
    """
)


def test_a_run_killed_mid_write_is_marked_interrupted_and_the_rest_survives(tmp_path):
    home = tmp_path / "home"
    code = CHILD.format(home=str(home))
    tests, project = Path(__file__).resolve().parents[1], Path(__file__).resolve().parents[2]  # builders, workbench
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, (str(tests), str(project),
                                                                     os.environ.get("PYTHONPATH")))))
    child = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                             env=env)
    try:
        line = child.stdout.readline()
        assert line.startswith("ready"), line + child.stderr.read()
        killed_id = int(line.split()[1])
        time.sleep(0.3)  # let it commit a few hundred more steps
        assert child.poll() is None, child.stderr.read()
    finally:
        child.kill()  # SIGKILL on POSIX: no cleanup, no atexit, no finally
        child.wait(timeout=30)
        child.stdout.close()
        child.stderr.close()

    with HistoryStore.open(home) as store:
        assert store._conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        runs = {record.name: record for record in store.list_runs()}
        assert set(runs) == {"first", "second", "killed"}
        for name, batch_size in (("first", 32), ("second", 64)):
            assert runs[name].status == "finished"
            assert runs[name].config.batch_size == batch_size
            assert store.step_metrics(runs[name].id)["step"].tolist() == list(range(1, 11))

        killed = runs["killed"]
        assert killed.id == killed_id
        assert killed.status == "interrupted"
        assert f"pid {killed.pid}" in killed.reason and killed.pid == child.pid
        assert killed.finished_at is not None and killed.finished_at >= killed.started_at
        steps = store.step_metrics(killed.id)["step"].tolist()
        assert len(steps) > 5  # the flushed ones, and those committed after
        assert steps == list(range(1, len(steps) + 1))  # no gaps: whole transactions or nothing
        assert killed.summary.steps == steps[-1]  # the summary so far was written with the last steps
