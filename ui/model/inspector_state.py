"""The tensor inspector's viewer state: plain Python, no Qt (glue-style).

``InspectorState`` holds what the inspector shows: the selected tensor, which
dimensions map to rows and columns (or to a line plot's x axis, or to the tiles
of an image grid), an index for every other dimension, the slice text kept in
step with both, the view, colormap and complex part, and the last slice
received. Widgets observe ``state.events.<name>``; tests drive it directly.
Bad input (slice text, names, bodies) never raises: it sets ``error`` or a
failing ``status`` with a message the user can act on.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from tensorscope.common.slicing import decode_slice
from tensorscope.ui.model.observe import EmitterGroup
from tensorscope.ui.model.received import COMPLEX_PARTS, ReceivedSlice, orient
from tensorscope.ui.model.slicekey import (FULL, Key, SliceError, fit_stride, format_key,
                                               kept_dims, parse_key)

VIEWS = ("heatmap", "table", "line", "grid")
COLORMAPS = {"viridis": "viridis", "magma": "magma", "inferno": "inferno", "plasma": "plasma",
             "cividis": "cividis", "turbo": "turbo", "diverging": "CET-D1", "grey": "CET-L1"}
HINT_NOT_PAUSED = "Pause (F6) or pin this module to fetch values"
DEFAULT_MAX_ELEMENTS = 250_000
GRID_TILES_PER_DIM = {1: 32, 2: 8}   # tiles fetched along each tile dimension


@dataclass(frozen=True)
class _Pending:
    text: str
    key: Key
    dims: tuple[int, ...]


class InspectorState:
    """What the tensor inspector shows; observe changes through ``events``.

    Events (each passes an ``Event`` whose ``value`` is given here):
    ``selection`` (ref), ``slice`` (slice text: dims, indices or text changed;
    the host should re-fetch), ``view``, ``colormap``, ``complex_part``,
    ``data`` (the new ``ReceivedSlice``), ``error`` (slice text error or ""),
    ``status`` ((message, is_error)).
    """

    def __init__(self, max_elements: int = DEFAULT_MAX_ELEMENTS) -> None:
        self.events = EmitterGroup("selection", "slice", "view", "colormap", "complex_part",
                                   "data", "error", "status")
        self.max_elements = max_elements
        self.ref: str | None = None
        self.meta: dict[str, Any] = {}
        self.stats: dict[str, Any] | None = None
        self.unavailable = ""   # why no values can be fetched (shown as the hint)
        self.shape: tuple[int, ...] = ()
        self.view = "heatmap"
        self.colormap = "viridis"
        self.complex_part = "magnitude"
        self.rows: int | None = None
        self.cols: int | None = None
        self.tiles: tuple[int, ...] = ()
        self.indices: list[int] = []
        self.ranges: dict[int, slice] = {}
        self.error = ""
        self.status = ""
        self.status_is_error = False
        self.received: ReceivedSlice | None = None
        self._typed: str | None = None
        self._pending: _Pending | None = None

    # ------------------------------------------------------------ selection --
    @property
    def ndim(self) -> int:
        """Number of dimensions of the selected tensor."""
        return len(self.shape)

    @property
    def is_tensor(self) -> bool:
        """Whether the selection is a tensor (not None, not a Python object)."""
        return self.meta.get("kind", "tensor") == "tensor" and self.meta.get("shape") is not None

    @property
    def is_empty(self) -> bool:
        """Whether the selected tensor has no elements (a zero-size dim)."""
        return any(n == 0 for n in self.shape)

    @property
    def can_fetch(self) -> bool:
        """Whether values can be requested (a ref is known, a tensor with elements)."""
        return self.ref is not None and self.is_tensor and not self.is_empty

    @property
    def hint(self) -> str:
        """Why no values are shown, or "" when they can be fetched."""
        if not self.meta:
            return "Select a module's input, output or gradient to inspect it"
        if not self.is_tensor:   # a module with no output says why (``unavailable``)
            return self.unavailable or f"Not a tensor: {self.meta.get('dtype') or self.meta.get('kind', 'object')}"
        if self.is_empty:
            return f"Empty tensor: shape {list(self.shape)} holds no values"
        return "" if self.ref is not None else (self.unavailable or HINT_NOT_PAUSED)

    def select(self, ref: str | None, meta: dict[str, Any], stats: dict[str, Any] | None,
               unavailable: str = "") -> None:
        """Show a tensor: ``ref`` None when only metadata and stats are known
        (``unavailable`` says why, replacing the generic hint)."""
        self.unavailable = unavailable
        shape = tuple(int(n) for n in (meta.get("shape") or ()))
        same_tensor = shape == self.shape and ref is not None and ref == self.ref
        first = not self.meta
        self.ref, self.meta, self.stats = ref, dict(meta), stats
        if shape != self.shape or first:
            self.shape = shape
            self._reset_dims()
        if not same_tensor:
            self.received = None
        self._pending = None
        self._typed, self.error = None, ""
        self._set_status("" if self.can_fetch else self.hint, False)
        self.events.selection.emit(ref)
        self.events.slice.emit(self.slice_text)

    def _reset_dims(self) -> None:
        nd = self.ndim
        self.indices = [0] * nd
        self.ranges = {}
        self.rows = nd - 2 if nd >= 2 else None
        self.cols = nd - 1 if nd >= 1 else None
        self.tiles = ()
        self.view = {0: "table", 1: "line", 4: "grid"}.get(nd, "heatmap")
        if self.view == "grid":
            self.tiles = (0, 1)

    # ----------------------------------------------------------------- dims --
    @property
    def display_dims(self) -> tuple[int, ...]:
        """Tensor dims shown along the view's axes (tiles first, then rows, cols)."""
        if self.view == "line":
            return () if self.cols is None else (self.cols,)
        own = tuple(d for d in (self.rows, self.cols) if d is not None)
        return self.tiles + own if self.view == "grid" else own

    @property
    def slider_dims(self) -> tuple[int, ...]:
        """Dims with a slider: every dim not shown, plus grid tile dims too big to show whole."""
        per_tile = GRID_TILES_PER_DIM.get(len(self.tiles), 1)
        whole = {d for d in self.tiles if self.shape[d] <= per_tile and d not in self.ranges}
        shown = (set(self.display_dims) - set(self.tiles)) | whole
        return tuple(d for d in range(self.ndim) if d not in shown)

    def set_dims(self, rows: int | None, cols: int | None) -> bool:
        """Map tensor dims to rows and columns; False (and ``error``) if invalid."""
        for name, dim in (("rows", rows), ("columns", cols)):
            if dim is not None and not 0 <= dim < self.ndim:
                return self._fail(f"{name}: dim {dim} does not exist (tensor has {self.ndim})")
        if rows is not None and rows == cols:
            return self._fail(f"rows and columns must be different dims (both are {rows})")
        if self.view == "line" and rows is not None:
            self.view = "heatmap"
            self.events.view.emit(self.view)
        self.rows, self.cols = rows, cols
        if self.view == "grid":
            self._pick_tiles()
        self._drop_hidden_ranges()
        return self._changed()

    def _pick_tiles(self) -> None:
        free = [d for d in range(self.ndim) if d not in (self.rows, self.cols)]
        self.tiles = tuple(free[:2])

    def _drop_hidden_ranges(self) -> None:
        shown = set(self.display_dims)
        self.ranges = {d: s for d, s in self.ranges.items() if d in shown}

    def set_index(self, dim: int, value: int) -> bool:
        """Set a slider dim's index (clamped to the dim); for tile dims the first tile."""
        if not 0 <= dim < self.ndim:
            return self._fail(f"dim {dim} does not exist (tensor has {self.ndim})")
        self.indices[dim] = max(min(int(value), self.shape[dim] - 1), 0)
        if dim in self.tiles:
            self.ranges.pop(dim, None)
        return self._changed()

    # ----------------------------------------------------------------- view --
    def set_view(self, view: str) -> bool:
        """Switch to "heatmap", "table", "line" or "grid", adapting the dims."""
        if view not in VIEWS:
            return self._fail(f"unknown view {view!r}; choose one of {', '.join(VIEWS)}")
        if view == "grid" and self.ndim < 3:
            return self._fail("the image grid needs a tensor with at least 3 dims")
        if view == "line" and self.ndim < 1:
            return self._fail("a line plot needs at least one dimension")
        self.view = view
        self._fit_dims_to_view()
        self.events.view.emit(view)
        return self._changed()

    def _fit_dims_to_view(self) -> None:
        nd = self.ndim
        if self.cols is None and nd >= 1:
            self.cols = nd - 1 if self.rows != nd - 1 else nd - 2
        if self.view == "line":
            self.rows, self.tiles = None, ()
        elif nd >= 2 and self.rows is None:
            self.rows = max(d for d in range(nd) if d != self.cols)
        if self.view == "grid":
            self._pick_tiles()
        else:
            self.tiles = ()
        self._drop_hidden_ranges()

    def set_colormap(self, name: str) -> bool:
        """Choose a colormap by name (a key of ``COLORMAPS``)."""
        if name not in COLORMAPS:
            return self._fail(f"unknown colormap {name!r}; choose one of {', '.join(COLORMAPS)}")
        self.colormap = name
        self.events.colormap.emit(name)
        return True

    def set_complex_part(self, part: str) -> bool:
        """Choose what complex values show as: magnitude, phase, real or imag."""
        if part not in COMPLEX_PARTS:
            return self._fail(f"unknown complex part {part!r}; choose one of "
                              f"{', '.join(COMPLEX_PARTS)}")
        self.complex_part = part
        self.events.complex_part.emit(part)
        return True

    # ------------------------------------------------------------ slice text --
    @property
    def key(self) -> Key:
        """The slice to fetch, computed from dims, indices, ranges and the budget."""
        key: list[Any] = [int(i) for i in self.indices]
        tile_count = 1
        per_tile = GRID_TILES_PER_DIM.get(len(self.tiles), 1)
        for d in self.tiles:
            start, stop = self.indices[d], min(self.indices[d] + per_tile, self.shape[d])
            window = FULL if (start, stop) == (0, self.shape[d]) else slice(start, stop)
            key[d] = self.ranges.get(d, window)
            tile_count *= len(range(*key[d].indices(self.shape[d])))
        own = [d for d in self.display_dims if d not in self.tiles]
        fixed = math.prod(len(range(*self.ranges[d].indices(self.shape[d])))
                          for d in own if d in self.ranges)
        auto = [d for d in own if d not in self.ranges]
        budget = max(1, self.max_elements // max(tile_count * fixed, 1))
        stride = fit_stride([self.shape[d] for d in auto], budget)
        for d in own:
            key[d] = self.ranges.get(d, FULL if stride == 1 else slice(None, None, stride))
        return tuple(key)

    @property
    def slice_text(self) -> str:
        """The slice box's text: canonical for the state, or the user's bad text."""
        return self._typed if self._typed is not None else format_key(self.key)

    def set_slice_text(self, text: str) -> bool:
        """Apply numpy slice text (``"0, :, 3:10"``); False with ``error`` if bad."""
        try:
            key = parse_key(text, self.shape)
            self._apply_key(key)
        except SliceError as exc:
            self._typed = text
            return self._fail(str(exc))
        self._typed = None
        return self._changed()

    def _apply_key(self, key: Key) -> None:
        kept = kept_dims(key)
        if len(kept) > 4:
            raise SliceError(f"{len(kept)} dims are kept but at most 4 can be shown "
                             f"(rows, cols and two grid dims); index the others with integers")
        for d, entry in enumerate(key):
            if not isinstance(entry, slice):
                self.indices[d] = entry
            elif entry == FULL:
                self.indices[d] = 0
        view = self._view_for(len(kept))
        if view != self.view:
            self.view = view
            self.events.view.emit(view)
        keep_order = self.rows in kept and self.cols in kept
        own = (self.rows, self.cols) if keep_order else (None, None, *kept)[-2:]
        self.rows, self.cols = own if len(kept) >= 2 else (None, kept[0] if kept else None)
        self.tiles = tuple(d for d in kept if d not in own) if view == "grid" else ()
        self.ranges = {d: key[d] for d in kept if key[d] != FULL}

    def _view_for(self, kept: int) -> str:
        if kept >= 3:
            return "grid"
        if kept == 0:
            return "table" if self.view in ("line", "grid") else self.view
        if kept == 1:
            return "line" if self.view == "grid" else self.view
        return "heatmap" if self.view in ("line", "grid") else self.view

    # ----------------------------------------------------------------- data --
    def request(self) -> tuple[str, str, int] | None:
        """(ref, slice text, max_elements) for the host to fetch, or None if none is due."""
        if not self.can_fetch or self._typed is not None:
            return None
        key = self.key
        self._pending = _Pending(format_key(key), key, self.display_dims)
        self._set_status("Fetching slice…", False)
        return self.ref, self._pending.text, self.max_elements  # type: ignore[return-value]

    def receive(self, body: dict[str, Any]) -> bool:
        """Take a GetTensor response body; False if stale or bad (``status`` says why)."""
        pending = self._pending
        if not isinstance(body, dict):
            self._set_status(f"Could not show the slice: the body is a {type(body).__name__}, "
                             f"not a dict", True)
            return False
        if pending is None or body.get("ref", self.ref) != self.ref:
            return False
        if not self._same_slice(body.get("slice"), pending):
            return False
        try:
            array = decode_slice(body)
            oriented = orient(array, pending.key, pending.dims)
        except (SliceError, ValueError, TypeError, KeyError) as exc:
            self._set_status(f"Could not show the slice: {exc}", True)
            return False
        self._pending = None
        full_shape = tuple(body.get("full_shape") or self.shape)
        if body.get("stats"):
            self.stats = body["stats"]
        self.received = ReceivedSlice(
            self.ref or "", pending.text, pending.key, pending.dims, array, oriented, full_shape,
            str(body.get("original_dtype") or ""), bool(body.get("truncated")),
            dict(body.get("stats") or {}))
        self._set_status("Slice truncated by the host (max elements)" if
                         self.received.truncated else "", False)
        self.events.data.emit(self.received)
        return True

    def _same_slice(self, text: Any, pending: _Pending) -> bool:
        if text is None or text == pending.text:
            return True
        try:
            return parse_key(str(text), self.shape) == pending.key
        except SliceError:
            return False

    def fail(self, message: str) -> None:
        """The host could not fetch the slice: show ``message``."""
        self._pending = None
        self._set_status(f"Could not fetch the slice: {message}", True)

    # -------------------------------------------------------------- helpers --
    def _set_status(self, message: str, is_error: bool) -> None:
        self.status, self.status_is_error = message, is_error
        self.events.status.emit((message, is_error))

    def _fail(self, message: str) -> bool:
        self.error = message
        self.events.error.emit(message)
        return False

    def _changed(self) -> bool:
        if self.error:
            self.error = ""
            self.events.error.emit("")
        self._typed = None
        self.events.slice.emit(self.slice_text)
        return True

    def as_array(self) -> np.ndarray | None:
        """The current slice as received (numpy order), or None."""
        return None if self.received is None else self.received.array
