"""An .npz's sizes and labels, checked before a run starts: a header that lies, a decompression bomb, more than
fits in RAM, labels outside the classes are refused in one line; one class trains with a warning."""

import io
import json
import zipfile

import numpy as np
import pytest
from engine_helpers import run_to_end, tiny_config, write_npz

from workbench.cli import main
from workbench.engine.data import DataError, load_arrays
from workbench.gui import settings_model
from workbench.npz import sizes
from workbench.npz.header import npz_problems

TINY = ["run", "--batch-size", "16", "--max-steps", "2", "--device", "cpu", "--num-workers", "0"]


def npy_header(shape, dtype) -> bytes:
    stream = io.BytesIO()
    np.lib.format.write_array_header_1_0(
        stream, {"descr": np.lib.format.dtype_to_descr(np.dtype(dtype)), "fortran_order": False, "shape": shape})
    return stream.getvalue()


def write_members(path, members: dict, compression=zipfile.ZIP_STORED):
    """An .npz written member by member: (shape, dtype, data bytes) each, so a header can claim what it likes."""
    with zipfile.ZipFile(path, "w", compression) as archive:
        for name, (shape, dtype, data) in members.items():
            archive.writestr(f"{name}.npy", npy_header(shape, dtype) + data)
    return path


def honest_members(train=32, test=16, labels=None):
    rng = np.random.default_rng(0)
    train_labels = np.asarray(labels if labels is not None else rng.integers(0, 10, train), np.int64)
    return {
        "train_images": ((train, 32, 32, 3), np.uint8, rng.integers(0, 256, (train, 32, 32, 3), np.uint8).tobytes()),
        "train_labels": ((train,), np.int64, train_labels.tobytes()),
        "test_images": ((test, 32, 32, 3), np.uint8, rng.integers(0, 256, (test, 32, 32, 3), np.uint8).tobytes()),
        "test_labels": ((test,), np.int64, rng.integers(0, 10, test).astype(np.int64).tobytes()),
    }


def cli_line(capsys, *args) -> tuple[int, str]:
    code = main(list(args))
    out, err = capsys.readouterr()
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err, err
    return code, err.strip()


def recorded_runs(home) -> int:
    from workbench.history.store import HistoryStore

    with HistoryStore.open(home) as store:
        return len(store.list_runs())


# -- sizes -------------------------------------------------------------------------------------------


def test_a_header_claiming_a_trillion_images_is_refused_before_anything_loads(capsys, tmp_path,
                                                                              isolated_workbench_home):
    members = honest_members()
    members["train_images"] = ((10**12, 32, 32, 3), np.uint8, members["train_images"][2])  # 96 KiB of data
    members["train_labels"] = ((10**12,), np.int64, b"\0" * 256)
    path = write_members(tmp_path / "liar.npz", members)
    claim = (f"npz file {path}: train_images's header claims uint8 (1000000000000, 32, 32, 3), 2794.0 TiB, "
             "but the archive holds 96.0 KiB of it: the header does not match its data (a damaged or crafted file)")
    assert claim in npz_problems(path)
    # The form says it (headers only), the engine refuses it instead of a MemoryError, the CLI in one line.
    assert claim in settings_model.problems(tiny_config(dataset="npz", data_path=str(path)), None)
    with pytest.raises(DataError, match="the header does not match its data"):
        load_arrays(tiny_config(dataset="npz", data_path=str(path)))
    code, line = cli_line(capsys, *TINY, "--dataset", "npz", "--data-path", str(path))
    assert code == 2 and line.startswith(f"workbench run: {claim}")
    assert recorded_runs(isolated_workbench_home) == 0


def test_a_decompression_bomb_is_refused_by_its_ratio(capsys, tmp_path):
    count = 24_000  # 70 MiB of blank images, past the 64 MiB floor, deflated to about 70 KiB
    path = tmp_path / "bomb.npz"
    members = honest_members()
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as archive:
        with archive.open("train_images.npy", "w", force_zip64=True) as stream:
            stream.write(npy_header((count, 32, 32, 3), np.uint8))
            block = bytes(3072 * 1000)
            for _ in range(count // 1000):
                stream.write(block)
        archive.writestr("train_labels.npy", npy_header((count,), np.int64) + bytes(8 * count))
        for name in ("test_images", "test_labels"):
            shape, dtype, data = members[name]
            archive.writestr(f"{name}.npy", npy_header(shape, dtype) + data)
    found = npz_problems(path)
    assert len(found) == 1 and "train_images decompresses to 70.3 MiB from" in found[0], found
    assert "images never compress 100:1, so this is a decompression bomb or blank images" in found[0]
    code, line = cli_line(capsys, *TINY, "--no-history", "--dataset", "npz", "--data-path", str(path))
    assert code == 2 and "decompression bomb" in line


def damaged(path, how: str):
    """An honest compressed .npz, then damaged as a disk or a crafted file damages one."""
    np.savez_compressed(path, **{name: np.frombuffer(data, dtype).reshape(shape)
                                 for name, (shape, dtype, data) in honest_members().items()})
    data = bytearray(path.read_bytes())
    if how == "encrypted":  # each member's "encrypted" flag: zipfile raises RuntimeError
        for signature, offset in ((b"PK\x03\x04", 6), (b"PK\x01\x02", 8)):
            at = data.find(signature)
            while at >= 0:
                data[at + offset] |= 1
                at = data.find(signature, at + 4)
    elif how == "unknown-method":  # compression method 9 (deflate64): NotImplementedError
        for signature, offset in ((b"PK\x03\x04", 8), (b"PK\x01\x02", 10)):
            at = data.find(signature)
            while at >= 0:
                data[at + offset:at + offset + 2] = (9).to_bytes(2, "little")
                at = data.find(signature, at + 4)
    else:  # bytes flipped just inside a member's deflate stream: zlib.error
        info = zipfile.ZipFile(path).getinfo("train_labels.npy")
        name_length = int.from_bytes(data[info.header_offset + 26:info.header_offset + 28], "little")
        extra_length = int.from_bytes(data[info.header_offset + 28:info.header_offset + 30], "little")
        start = info.header_offset + 30 + name_length + extra_length
        data[start:start + 8] = bytes(byte ^ 0x5A for byte in data[start:start + 8])
    path.write_bytes(bytes(data))
    return path


@pytest.mark.parametrize("how", ["encrypted", "unknown-method", "flipped-bytes"])
def test_a_damaged_archive_is_refused_in_one_line_by_the_form_the_engine_and_the_cli(capsys, tmp_path, how,
                                                                                    isolated_workbench_home):
    """It gave a traceback (RuntimeError, NotImplementedError, zlib.error), and the window, reading the saved path
    when it starts, failed to open at all."""
    path = damaged(tmp_path / "damaged.npz", how)
    config = tiny_config(dataset="npz", data_path=str(path))
    (problem,) = settings_model.problems(config, None)
    assert f"{path} is not a valid npz archive" in problem
    with pytest.raises(DataError, match="is not a valid npz archive"):
        load_arrays(config)
    code, line = cli_line(capsys, *TINY, "--dataset", "npz", "--data-path", str(path))
    assert code == 2 and "is not a valid npz archive" in line
    assert recorded_runs(isolated_workbench_home) == 0


def test_a_member_named_without_npy_is_the_array_read_so_its_header_is_checked(capsys, tmp_path):
    """np.load's archive["train_images"] takes a member named just that before train_images.npy: a bomb or junk
    stored so passed every check unread (a 548 KB file trained on 100,000 blank images)."""
    members = honest_members()
    bomb, junk = tmp_path / "bomb.npz", tmp_path / "junk.npz"
    for path in (bomb, junk):
        with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as archive:
            for name, (shape, dtype, data) in members.items():
                archive.writestr(f"{name}.npy", npy_header(shape, dtype) + data)
            if path is bomb:
                archive.writestr("train_images", npy_header((30_000, 32, 32, 3), np.uint8) + bytes(3072 * 30_000))
                archive.writestr("train_labels", npy_header((30_000,), np.int64) + bytes(8 * 30_000))
            else:
                archive.writestr("train_labels", b"junk")
    (problem,) = npz_problems(bomb)
    assert "train_images decompresses to 87.9 MiB" in problem and "decompression bomb" in problem, problem
    (problem,) = npz_problems(junk)
    assert f"{junk} is not a valid npz archive" in problem
    code, line = cli_line(capsys, *TINY, "--no-history", "--dataset", "npz", "--data-path", str(junk))
    assert code == 2 and "is not a valid npz archive" in line


def test_a_compressed_dataset_of_real_images_is_not_a_bomb(tmp_path, subset_npz):
    with np.load(subset_npz) as real:
        arrays = {key: real[key] for key in real.files}
    path = tmp_path / "compressed.npz"
    np.savez_compressed(path, **arrays)
    assert npz_problems(path) == []


def test_a_file_that_would_not_fit_the_memory_share_is_refused_with_the_numbers(capsys, tmp_path, monkeypatch):
    path = write_npz(tmp_path / "data.npz", train=64, test=32)  # 288 KiB of images and labels
    assert npz_problems(path) == []
    monkeypatch.setattr(sizes, "physical_memory_bytes", lambda: 512 * 2**10)
    found = npz_problems(path)
    assert found == [f"npz file {path} decodes to 288.1 KiB; this machine has 512.0 KiB of RAM and a run holds the "
                     "images twice while loading them: at most 40% of RAM (204.8 KiB) fits. Use a smaller file "
                     "(make-npz --max-train N)"]
    code, line = cli_line(capsys, *TINY, "--no-history", "--dataset", "npz", "--data-path", str(path))
    assert code == 2 and line == f"workbench run: {found[0]}"


# -- labels ------------------------------------------------------------------------------------------


def labelled(tmp_path, train_labels, test_labels=None, class_names=None):
    train_labels = np.asarray(train_labels)
    test_labels = np.asarray(test_labels if test_labels is not None else train_labels[:8])
    rng = np.random.default_rng(0)
    arrays = dict(train_images=rng.integers(0, 256, (len(train_labels), 32, 32, 3), np.uint8),
                  train_labels=train_labels, test_labels=test_labels,
                  test_images=rng.integers(0, 256, (len(test_labels), 32, 32, 3), np.uint8))
    if class_names is not None:
        arrays["class_names"] = np.array(class_names, dtype=str)
    path = tmp_path / "labels.npz"
    np.savez(path, **arrays)
    return path


TEN = [f"class{index}" for index in range(10)]
STRAY = [*range(10)] * 3 + [200, 3]  # ten classes and one stray label


@pytest.mark.parametrize(
    "train, test, names, words",
    [
        (STRAY, None, None, "its largest label is 200, so without class_names the model would get 201 classes, "
                            "190 of them without a training image: a stray label?"),
        (STRAY, None, TEN, "train_labels has labels up to 200, but its class_names names 10 classes: "
                           "labels must be 0 to 9"),
        (list(range(10)) * 3, [0, 1, 12], TEN, "test_labels has labels up to 12, but its class_names names 10 "
                                               "classes"),
        ([*range(10)] * 3 + [10**12], None, None, "its largest label is 1,000,000,000,000; without class_names the "
                                                  "classes are 0 to the largest label, and more than 100,000 cannot"),
        ([*range(10)] * 3 + [2**63 - 1], None, None, "its largest label is 9,223,372,036,854,775,807"),
        (np.array([*range(10)] * 3 + [2**64 - 1], np.uint64), None, None, "its largest label is "
                                                                          "18,446,744,073,709,551,615"),
        ([*range(10)] * 3 + [-1, 0], None, None, "train_labels has negative labels"),
        # a model's output 5 M wide took 24 GB before the kernel killed the run
        (list(range(10)) * 3, None, [f"c{i}" for i in range(100_001)], "its class_names names 100,001 classes; "
                                                                          "more than 100,000 cannot be a model's"),
    ],
    ids=["stray-200", "past-class-names", "test-past-class-names", "1e12", "2^63-1", "uint64-max", "negative",
         "class-names-past-the-limit"],
)
def test_labels_outside_the_classes_are_refused_before_the_run_is_recorded(
        capsys, tmp_path, isolated_workbench_home, train, test, names, words):
    path = labelled(tmp_path, train, test, names)
    code, line = cli_line(capsys, *TINY, "--dataset", "npz", "--data-path", str(path))
    assert code == 2 and line.startswith(f"workbench run: npz file {path}: ") and words in line, line
    assert recorded_runs(isolated_workbench_home) == 0
    # A run the window starts loads the arrays on its own thread: the engine refuses them in the same words.
    ended = run_to_end(tiny_config(dataset="npz", data_path=str(path)))[-1]
    assert ended.status == "failed" and ended.kind == "data" and words in ended.reason


def test_class_names_set_the_classes_even_where_a_class_has_no_training_image(tmp_path):
    path = labelled(tmp_path, [0, 1, 2, 4] * 8, class_names=[*TEN, "class10", "class11"])
    assert load_arrays(tiny_config(dataset="npz", data_path=str(path))).num_classes == 12


def test_one_class_trains_and_says_accuracy_means_nothing(capsys, tmp_path):
    path = labelled(tmp_path, [3] * 32, class_names=TEN)
    code = main([*TINY, "--no-history", "--dataset", "npz", "--data-path", str(path), "--json"])
    out, err = capsys.readouterr()
    assert code == 0 and json.loads(out.strip().splitlines()[-1])["status"] == "finished"
    assert ("note: labels.npz: every training image has the same label (3): test accuracy will be near 100 % "
            "whatever the model learns; the speed figures still hold") in err.splitlines()
