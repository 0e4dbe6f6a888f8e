"""Write a tensor slice to ``.npy`` or ``.csv`` (plain numpy; no Qt)."""
from __future__ import annotations

import csv
import os

import numpy as np


def export_npy(array: np.ndarray, path: str | os.PathLike) -> str:
    """Save ``array`` exactly (dtype and shape kept) as ``.npy``; returns the path."""
    path = os.fspath(path)
    with open(path, "wb") as f:      # np.save(str) would append ".npy" to other suffixes
        np.save(f, np.ascontiguousarray(array), allow_pickle=False)
    return path


def _cell(value: object) -> str:
    if isinstance(value, (bool, np.bool_)):
        return "1" if value else "0"
    if isinstance(value, (int, np.integer)):
        return str(int(value))
    if isinstance(value, (complex, np.complexfloating)):
        return repr(complex(value)).strip("()")
    return repr(float(value))   # shortest text that reads back to the same float


def export_csv(array: np.ndarray, path: str | os.PathLike, comment: str = "") -> str:
    """Save ``array`` as CSV: 2-d as rows×cols, 1-d as one column, n-d as (-1, last).

    Floats are written with full precision (``nan``/``inf`` as such), bools as
    1/0, complex as ``a+bj``; ``comment`` becomes ``#`` header lines, which
    ``numpy.loadtxt`` skips.
    """
    path = os.fspath(path)
    table = np.asarray(array)
    if table.ndim == 0:
        table = table.reshape(1, 1)
    elif table.ndim == 1:
        table = table.reshape(-1, 1)
    elif table.ndim > 2:
        table = table.reshape(-1, table.shape[-1])
    with open(path, "w", newline="", encoding="utf-8") as f:
        for line in comment.splitlines():
            f.write(f"# {line}\n")
        writer = csv.writer(f)
        for row in table:
            writer.writerow([_cell(v) for v in row])
    return path
