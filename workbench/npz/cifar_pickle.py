"""Unpickle a CIFAR python batch without letting the file run code.

A pickle names the callables that rebuild its objects, and ``pickle.loads`` calls whatever it names
(``os.system`` included): a crafted cifar-10-python.tar.gz would run its code on `make-npz`. CIFAR's
batches hold dicts, lists, bytes/str and ints, which need no callable, and numpy arrays, which need
three: ``_reconstruct`` (from ``numpy.core.multiarray``, as numpy 1.x pickles it, or ``numpy._core``
as numpy 2 does), ``numpy.ndarray`` and ``numpy.dtype``. ``_frombuffer`` is the fourth, for arrays
pickled with protocol 5 (Python 3.14's default), and ``_codecs.encode`` as Python 3 writes bytes into a
protocol 0-2 pickle, admitted for latin1 alone (other codecs are looked up by name). Nothing else is admitted.
"""

from __future__ import annotations

import io
import pickle
from typing import Any

import numpy as np

if np.lib.NumpyVersion(np.__version__) >= "2.0.0":
    from numpy._core import multiarray as _multiarray, numeric as _numeric
else:  # pragma: no cover (numpy 1.x)
    from numpy.core import multiarray as _multiarray, numeric as _numeric



def _latin1_bytes(text: str, encoding: str = "utf-8") -> bytes:
    """``_codecs.encode`` as Python 3's protocol 0-2 pickles call it for bytes: (text, "latin1")."""
    if not isinstance(text, str) or encoding != "latin1":
        raise RefusedPickle(f"it asks to encode with {encoding!r}, not as a pickle of bytes does (refused)")
    return text.encode("latin1")


# (module, name) as a pickle names it → the object; numpy 1.x and 2 spell the module differently.
ADMITTED: dict[tuple[str, str], Any] = {
    ("numpy", "ndarray"): np.ndarray,
    ("numpy", "dtype"): np.dtype,
    ("_codecs", "encode"): _latin1_bytes,
    **{(f"{package}.multiarray", "_reconstruct"): _multiarray._reconstruct
       for package in ("numpy.core", "numpy._core")},
    **{(f"{package}.numeric", "_frombuffer"): _numeric._frombuffer for package in ("numpy.core", "numpy._core")},
}


class RefusedPickle(pickle.UnpicklingError):
    """The pickle names a callable a CIFAR batch does not need; nothing it names was called."""


class CifarUnpickler(pickle.Unpickler):
    def find_class(self, module: str, name: str) -> Any:
        try:
            return ADMITTED[(module, name)]
        except KeyError:
            raise RefusedPickle(
                f"it asks to call {module}.{name}, which a CIFAR batch never holds (refused: nothing was run)"
            ) from None


def load_cifar_batch(data: bytes) -> Any:
    """The batch's object; RefusedPickle when it names anything but numpy's array rebuilders.

    encoding="latin1": CIFAR's batches were pickled by Python 2, and latin1 turns their byte strings
    into str (as torchvision does) and their arrays' raw bytes back into bytes (numpy reads them so).
    """
    return CifarUnpickler(io.BytesIO(data), encoding="latin1").load()
