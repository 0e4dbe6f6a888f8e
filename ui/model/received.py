"""A received tensor slice and the numpy transforms the views share (no Qt)."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from tensorscope.ui.model.slicekey import Key, entry_indices

COMPLEX_PARTS = ("magnitude", "phase", "real", "imag")


@dataclass
class ReceivedSlice:
    """One decoded GetTensor answer, oriented for display.

    ``array`` is the slice exactly as received (numpy order, original values);
    ``oriented`` is the same data with its axes transposed to follow ``dims``
    (the tensor dimension shown along each display axis: ``(rows, cols)``,
    ``(x,)`` or ``(samples, channels, rows, cols)``).
    """

    ref: str
    text: str
    key: Key
    dims: tuple[int, ...]
    array: np.ndarray
    oriented: np.ndarray
    full_shape: tuple[int, ...]
    original_dtype: str = ""
    truncated: bool = False
    stats: dict[str, Any] = field(default_factory=dict)

    def axis_indices(self, axis: int) -> np.ndarray:
        """The tensor indices along display axis ``axis`` (for labels and headers)."""
        dim = self.dims[axis]
        indices = entry_indices(self.key[dim], self.full_shape[dim])
        return indices[: self.oriented.shape[axis]]


def orient(array: np.ndarray, key: Key, dims: tuple[int, ...]) -> np.ndarray:
    """Transpose a slice (axes = kept dims in order) so its axes follow ``dims``."""
    kept = [d for d, e in enumerate(key) if isinstance(e, slice)]
    if not kept and array.size == 1:
        array = array.reshape(())    # a scalar may arrive as shape [1] (np.ascontiguousarray)
    if array.ndim != len(kept) or sorted(dims) != kept:
        raise ValueError(f"slice has {array.ndim} axes but {len(kept)} kept dimension(s) "
                         f"were requested")
    return np.transpose(array, [kept.index(d) for d in dims])


def display_values(array: np.ndarray, complex_part: str = "magnitude") -> np.ndarray:
    """Real floating values to colour or plot: complex → the chosen part, bool → 0/1."""
    if np.iscomplexobj(array):
        parts = {"magnitude": np.abs, "phase": np.angle, "real": np.real, "imag": np.imag}
        return np.asarray(parts[complex_part](array), dtype=np.float64)
    if array.dtype.kind == "f" and array.dtype.itemsize >= 4:
        return array
    return array.astype(np.float64 if array.dtype.kind in "iu" else np.float32)


def nonfinite_counts(values: np.ndarray) -> dict[str, int]:
    """How many NaN, +Inf and -Inf values ``values`` holds (zeros for ints/bools)."""
    if values.dtype.kind not in "fc":
        return {"nan": 0, "posinf": 0, "neginf": 0}
    flat = values.ravel()
    if flat.dtype.kind == "c":
        bad = ~np.isfinite(flat)
        return {"nan": int(np.count_nonzero(np.isnan(flat))),
                "posinf": int(np.count_nonzero(bad & ~np.isnan(flat))), "neginf": 0}
    return {"nan": int(np.count_nonzero(np.isnan(flat))),
            "posinf": int(np.count_nonzero(np.isposinf(flat))),
            "neginf": int(np.count_nonzero(np.isneginf(flat)))}


def finite_range(values: np.ndarray) -> tuple[float, float] | None:
    """(min, max) over the finite values, None if there are none."""
    finite = values[np.isfinite(values)] if values.dtype.kind == "f" else values
    if finite.size == 0:
        return None
    return float(finite.min()), float(finite.max())


def format_value(value: Any) -> str:
    """A compact, exact-enough text for one element (table cells, CSV)."""
    if isinstance(value, (bool, np.bool_)):
        return "True" if value else "False"
    if isinstance(value, (int, np.integer)):
        return str(int(value))
    if isinstance(value, (complex, np.complexfloating)):
        return f"{value.real:.6g}{value.imag:+.6g}j"
    return f"{float(value):.6g}"
