"""A sweep, a search or repeated runs of a model spec that gives no model is refused as `workbench run` refuses it:
one line, exit 2, nothing recorded (issue 21 §2, §3); not a sequence recorded with every member failed."""

import sqlite3

import pytest

from workbench.cli import main

TINY = ["--dataset", "synthetic", "--synthetic-size", "128", "--batch-size", "16", "--max-steps", "4",
        "--log-every", "2", "--num-workers", "0", "--device", "cpu"]


def recorded(home):
    """(runs, sequences) in the history at ``home`` (none when it was never made)."""
    if not (home / "history.sqlite3").exists():
        return 0, 0
    with sqlite3.connect(home / "history.sqlite3") as connection:
        return tuple(connection.execute(f"SELECT COUNT(*) FROM {table}").fetchone()[0] for table in ("runs", "sequences"))


@pytest.mark.parametrize("command, words", [
    (["sweep", "--param", "augment", "--values", "cpu,gpu", *TINY, "--model", "mymodels:raises"],
     "model mymodels:raises: raises(num_classes=10) raised ValueError: width must be even"),
    (["sweep", "--param", "model", "--values", "small-cnn,mymodels:wrong_logits", *TINY],
     "model mymodels:wrong_logits gives logits of shape (2, 11)"),
    (["tune", *TINY, "--model", "mymodels:missing", "--budget-seconds", "30"],
     "model mymodels:missing: mymodels has no function missing"),
    (["run", *TINY, "--model", "nosuchmodule:net", "--repeats", "2"], "model nosuchmodule:net: no module named"),
])
def test_a_sequence_of_a_model_that_cannot_be_built_is_one_line_exit_2_and_records_nothing(user_module, capsys,
                                                                                           command, words):
    home = user_module / "home"
    assert main(["--home", str(home), *command]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and words in err[0] and "Traceback" not in err[0], err
    assert recorded(home) == (0, 0)


def test_a_sequence_of_the_users_own_model_still_runs(user_module, capsys):
    home = user_module / "home"
    assert main(["--home", str(home), "sweep", "--param", "augment", "--values", "cpu,gpu", *TINY,
                 "--model", "mymodels:tiny_net", "--model-kwargs", '{"width": 4}']) == 0, capsys.readouterr().err
    assert recorded(home) == (2, 1)
