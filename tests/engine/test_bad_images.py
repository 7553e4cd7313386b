"""Every unreadable image of a folder found before a run, all at once (issue 30 §2): the CLI lists them (exit 2,
nothing recorded), --skip-bad-images trains without them and records how many; a JPEG whose header passes but whose
data is damaged still fails the run naming it."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest
from own_images import damaged_inside, make_folder

from workbench.cli import main
from workbench.config import RunConfig
from workbench.controller.jobs import images_checked
from workbench.engine.data import DataError
from workbench.engine.events import StatusChanged
from workbench.engine.folder_data import decode
from workbench.history.store import HistoryStore
from workbench.image_check import check_images, image_problem


def messy_folder(root: Path) -> tuple[Path, list[Path]]:
    """make_folder's images with two truncated JPEGs, a zero-byte .jpg and a text file named .png."""
    make_folder(root)
    jpegs = sorted((root / "cat").glob("*.jpg"))
    whole = jpegs[0].read_bytes()
    jpegs[0].write_bytes(whole[: len(whole) // 2])
    jpegs[1].write_bytes(jpegs[1].read_bytes()[:-46])
    empty, text = root / "dog" / "empty.jpg", root / "fox" / "notes.png"
    empty.write_bytes(b"")
    text.write_text("not an image\n")
    return root, [jpegs[0], jpegs[1], empty, text]


def test_each_kind_of_bad_file_is_found_by_the_header_check_and_good_ones_pass(tmp_path):
    root, bad = messy_folder(tmp_path / "pets")
    problems = {path: image_problem(str(path)) for path in bad}
    assert all(problems.values()), problems
    assert "truncated" in problems[bad[1]] and problems[bad[2]] == "empty (0 bytes)"
    assert "not an image" in problems[bad[3]]
    good = [path for path in root.rglob("*.*") if path not in bad]
    assert good and all(image_problem(str(path)) is None for path in good)


def test_truncated_bmp_gif_tiff_and_webp_are_found_before_the_run_and_whole_ones_pass(tmp_path):
    """Pillow's verify() reads little of these formats: a truncated BMP passed the check, and the run failed
    mid-epoch on it."""
    import io

    import numpy as np
    from PIL import Image

    pixels = np.random.default_rng(1).integers(0, 256, (64, 64, 3), dtype=np.uint8)
    for image_format in ("BMP", "GIF", "TIFF", "WEBP"):
        encoded = io.BytesIO()
        Image.fromarray(pixels).save(encoded, image_format)
        whole = tmp_path / f"whole.{image_format.lower()}"
        whole.write_bytes(encoded.getvalue())
        cut = tmp_path / f"cut.{image_format.lower()}"
        cut.write_bytes(encoded.getvalue()[: len(encoded.getvalue()) // 2])
        assert image_problem(str(whole)) is None, image_format
        assert image_problem(str(cut)), image_format


def test_a_jpeg_padded_past_its_end_marker_is_not_refused(tmp_path):
    root = make_folder(tmp_path / "pets")
    jpeg = next(root.rglob("*.jpg"))
    jpeg.write_bytes(jpeg.read_bytes() + b"\0" * 4096)  # some cameras pad; Pillow decodes it
    assert image_problem(str(jpeg)) is None


def test_the_check_can_be_cancelled_and_says_how_far_it_got(tmp_path):
    root, _ = messy_folder(tmp_path / "pets")
    paths = sorted(str(path) for path in root.rglob("*.*"))
    seen = []
    check = check_images(paths, progress=lambda done, total: seen.append(done), cancelled=lambda: len(seen) >= 5)
    assert check.cancelled and check.checked == 5 and check.total == len(paths) and seen == [1, 2, 3, 4, 5]


def test_the_cli_lists_every_unreadable_image_at_once_exits_2_and_records_nothing(tmp_path, capsys):
    root, bad = messy_folder(tmp_path / "pets")
    home = tmp_path / "home"
    code = main(["--home", str(home), "run", "--dataset", "folder", "--data-path", str(root), "--device", "cpu",
                 "--max-steps", "2", "--batch-size", "4", "--num-workers", "0"])
    err = capsys.readouterr().err.splitlines()
    assert code == 2
    assert err[0].startswith("workbench run: 4 of ") and "--skip-bad-images" in err[0]
    assert sorted(line.strip().split(": ")[0] for line in err[1:]) == sorted(str(path) for path in bad)
    if (home / "history.db").exists() or any(home.glob("*.db")):
        with HistoryStore.open(home) as store:
            assert store.list_runs() == []


def test_run_repeats_refuses_them_too_before_its_sequence_is_recorded(tmp_path, capsys):
    root, bad = messy_folder(tmp_path / "pets")
    code = main(["--home", str(tmp_path / "home"), "run", "--repeats", "2", "--dataset", "folder", "--data-path",
                 str(root), "--device", "cpu", "--max-steps", "2", "--batch-size", "4", "--num-workers", "0"])
    err = capsys.readouterr().err
    assert code == 2 and err.startswith("workbench run: 4 of ")
    assert all(str(path) in err for path in bad)


@pytest.mark.parametrize("command", [["sweep", "--param", "lr", "--values", "0.1,0.01"], ["tune"], ["ceiling"]])
def test_each_sequence_command_refuses_them_too_before_anything_runs(tmp_path, capsys, command):
    """sweep, tune and ceiling never checked: a sweep recorded one failed run per member, each failure saying
    "cannot identify image file <_io.BufferedReader name=6>"."""
    root, bad = messy_folder(tmp_path / "pets")
    home = tmp_path / "home"
    code = main(["--home", str(home), *command, "--dataset", "folder", "--data-path", str(root), "--device", "cpu",
                 "--max-steps", "8", "--batch-size", "4", "--num-workers", "0"])
    err = capsys.readouterr().err
    assert code == 2 and err.startswith(f"workbench {command[0]}: 4 of "), err
    assert all(str(path) in err for path in bad)
    if any(home.glob("*.sqlite3")):
        with HistoryStore.open(home) as store:
            assert store.list_runs() == []


def test_a_file_that_is_no_image_is_named_in_the_runs_words_not_as_a_stream(tmp_path):
    path = tmp_path / "notes.jpg"
    path.write_text("not an image\n")
    with pytest.raises(DataError) as refused:
        decode(str(path))
    assert str(refused.value) == (f"cannot decode {path} as an image (not an image Pillow can read (neither JPEG, "
                                  "PNG, BMP, GIF, WebP nor TIFF)): remove or replace the file")


def test_skip_bad_images_trains_without_them_and_records_how_many(tmp_path, capsys):
    root, bad = messy_folder(tmp_path / "pets")
    home = tmp_path / "home"
    code = main(["--home", str(home), "run", "--dataset", "folder", "--data-path", str(root), "--device", "cpu",
                 "--max-steps", "2", "--log-every", "1", "--batch-size", "4", "--num-workers", "0",
                 "--image-size", "32", "--skip-bad-images", "--json"])
    out = capsys.readouterr().out
    assert code == 0
    assert json.loads(out.splitlines()[-1])["skipped_bad_images"] == len(bad)
    with HistoryStore.open(home) as store:
        (record,) = store.list_runs()
    assert record.config.skip_bad_images and record.summary.skipped_bad_images == len(bad)
    exported = tmp_path / "runs.csv"
    assert main(["--home", str(home), "export", "--out", str(exported)]) == 0
    with exported.open() as stream:
        (row,) = csv.DictReader(stream)
    assert row["skipped_bad_images"] == str(len(bad))


def test_a_jpeg_damaged_behind_an_intact_header_still_fails_the_run_naming_it(tmp_path, capsys):
    root = make_folder(tmp_path / "pets")
    jpeg = sorted((root / "dog").glob("*.jpg"))[0]
    damaged_inside(jpeg)
    assert image_problem(str(jpeg)) is None  # the header check cannot see it (its cost: docs/own-data.md)
    code = main(["--home", str(tmp_path / "home"), "run", "--dataset", "folder", "--data-path", str(root),
                 "--device", "cpu", "--epochs", "1", "--batch-size", "4", "--num-workers", "0", "--image-size", "32"])
    err = capsys.readouterr().err
    assert code == 2 and f"cannot decode {jpeg} as an image (" in err and "remove or replace the file" in err


def test_the_windows_run_job_checks_first_with_progress_and_refuses_listing_them_all(tmp_path):
    root, bad = messy_folder(tmp_path / "pets")
    config = RunConfig(dataset="folder", data_path=str(root))
    ticks = iter(range(1000))
    steps = images_checked(config, lambda: False, clock=lambda: next(ticks))  # every file a progress tick
    shown = []
    while True:
        try:
            shown.append(next(steps))
        except StopIteration as end:
            refusal = end.value
            break
    assert all(isinstance(event, StatusChanged) for event in shown) and "Checking images: 2 of" in shown[2].message
    assert refusal.status == "failed" and refusal.kind == "data"
    assert all(str(path) in refusal.reason for path in bad)
    steps = images_checked(config.replace(skip_bad_images=True), lambda: False)
    assert _end_of(steps) is None
    cancelled = _end_of(images_checked(config, lambda: True))
    assert cancelled.status == "stopped" and "while checking the images (0 of" in cancelled.reason


def _end_of(generator):
    while True:
        try:
            next(generator)
        except StopIteration as end:
            return end.value


def test_a_bad_images_name_reaches_the_terminal_escaped_one_line_each(tmp_path, capsys):
    """A name holding an escape sequence or a newline: listed as one escaped line (a newline split one entry into
    two that read as two files), and the skipped-images note of a run escapes it too."""
    root = make_folder(tmp_path / "pets")
    (root / "cat" / "evil\x1b[2J\nname.png").write_text("not an image\n")
    code = main(["--home", str(tmp_path / "home"), "run", "--dataset", "folder", "--data-path", str(root),
                 "--device", "cpu", "--max-steps", "2", "--batch-size", "4", "--num-workers", "0"])
    err = capsys.readouterr().err
    assert code == 2 and "\x1b" not in err
    listed = err.splitlines()[1:]
    assert len(listed) == 1 and "evil\\x1b[2J\\nname.png" in listed[0]
    code = main(["--home", str(tmp_path / "home"), "run", "--dataset", "folder", "--data-path", str(root),
                 "--device", "cpu", "--max-steps", "2", "--batch-size", "4", "--num-workers", "0", "--image-size", "32",
                 "--skip-bad-images"])
    captured = capsys.readouterr()
    assert code == 0 and "evil\\x1b[2J\\nname.png" in captured.err + captured.out
    assert "\x1b[2J" not in captured.err + captured.out
