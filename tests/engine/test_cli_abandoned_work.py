"""A stop during DataLoader worker start-up that never ends (a worker stuck in the dataset): the command still ends.

The stop abandons the start-up (engine/interruptible.py) and the command waits for it a while. Before, Python's
exit then joined the workers, which ignore the stop signals: the command never ended. (An exit with the start-up
still in torch's code is also the likely cause of the abort CI once saw after a run was recorded: "terminate
called without an active exception", exit -6.) Now its workers are killed, which ends the start-up, and the
command ends with the run's code, saying so, leaving no process behind.
"""

import json
import os
import signal
import subprocess

import pytest
from cli_processes import STUCK_LINE, cli, wait_for
from process_tree import kill_session, left_after

from workbench.history.store import HistoryStore

STUCK_WORKERS = ("import stuck_batches\n"
                 "import workbench.cli.run_command as run_command\nrun_command.ABANDONED_WORK_WAIT_S = 1.0\n")
ENDS_S = 120.0  # the command ends within seconds; this margin is for a loaded machine (before: never)


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_a_stop_while_workers_never_start_ends_the_command_and_leaves_nothing(tmp_path):
    process = cli(tmp_path / "home", preamble=STUCK_WORKERS)
    session, err = process.pid, []
    try:
        reader = wait_for(process, err, STUCK_LINE)  # the workers are up, and one waits forever
        os.killpg(session, signal.SIGINT)
        try:
            code = process.wait(timeout=ENDS_S)
        except subprocess.TimeoutExpired:
            pytest.fail(f"the command did not end {ENDS_S:.0f} s after Ctrl-C:\n" + "".join(err))
        left = left_after(session)
        out = process.stdout.read()
        reader.join(10)
    finally:
        kill_session(session)
        process.wait()
        process.stdout.close()
        process.stderr.close()
    err_text = "".join(err)
    assert left == {}, left
    assert (code, json.loads(out.strip().splitlines()[-1])["status"]) == (1, "stopped"), err_text
    assert "workbench: worker start-up still running when the command ended: ending it" in err_text
    for noise in ("Traceback", "leaked", "terminate called"):
        assert noise not in err_text, err_text
    with HistoryStore.open(tmp_path / "home") as store:
        assert [run.status for run in store.list_runs()] == ["stopped"]
