"""A stand-in for the GUI host in inspector tests: answers requests from numpy arrays."""
from __future__ import annotations

from typing import Any

import numpy as np

from tensorscope.ui.model.slicekey import parse_key


def make_body(array: np.ndarray, ref: str, text: str, *, original_dtype: str = "",
              stats: dict[str, Any] | None = None) -> dict[str, Any]:
    """A GetTensor response body for ``array[text]`` (the transport's layout)."""
    part = np.asarray(array[parse_key(text, array.shape)]).copy(order="C")
    return {"ref": ref, "slice": text, "dtype": part.dtype.name,
            "original_dtype": original_dtype or part.dtype.name, "shape": list(part.shape),
            "full_shape": list(array.shape), "data": part.tobytes(), "stats": stats or {},
            "truncated": False}


class ArrayHost:
    """Records each ``tensor_requested`` and answers it from ``tensors[ref]``."""

    def __init__(self, inspector, tensors: dict[str, np.ndarray], original_dtype: str = "") -> None:
        self.inspector = inspector
        self.tensors = tensors
        self.original_dtype = original_dtype
        self.requests: list[tuple[str, str, int]] = []
        inspector.tensor_requested.connect(self.answer)

    def answer(self, ref: str, text: str, max_elements: int) -> None:
        """Reply with the requested slice, as the real host would."""
        self.requests.append((ref, text, max_elements))
        body = make_body(self.tensors[ref], ref, text, original_dtype=self.original_dtype)
        self.inspector.slice_received(body)
