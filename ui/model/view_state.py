"""The GUI's view state: selection, breakpoints, pins and the paused-at marker (no Qt).

One ``ViewState`` per window holds what the user chose and where training
stands, in plain Python. Widgets change it only through its methods and
observe it (napari-style): ``state.events.<topic>.connect(callback)`` for
the topics ``selection``, ``breakpoints``, ``pins`` and ``paused_at``. A
callback gets an ``Event`` whose ``value`` is the new value, and is called
only when the value really changed. The ``DebugController`` turns breakpoint
and pin changes into ``SetBreakpoints`` and ``PinModules`` requests.
GUI thread only; a worker thread gets a snapshot (the values are frozen).

The selection and the paused-at marker name a module of one rank,
``(rank, root, path)``. Breakpoints and pins are the job's: every rank gets
the same set (``SetBreakpoints`` and ``PinModules`` carry no rank, and the
``JobConnection`` sends them to every rank), so they are keyed by
``(root, path)``.
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from tensorscope.common.events import ModuleKey, PausedAt, SetBreakpoints
from tensorscope.ui.model.observe import EmitterGroup

#: ``(root, path)``: a module of every rank
LocalKey = tuple[int, str]
#: ``(root, path or "", expression)``: a condition breakpoint ("": any module)
ConditionKey = tuple[int, str, str]
#: the breakpoints that name no module (``SetBreakpoints.FLAG_KINDS``)
BREAK_KINDS = SetBreakpoints.FLAG_KINDS


@dataclass(frozen=True)
class Selection:
    """The module selected, in one rank; ``node`` is the graph card clicked, if any."""

    rank: int
    root: int
    path: str
    node: tuple[str, str] | None = None   # (graph kind, node id)

    @property
    def key(self) -> ModuleKey:
        """``(rank, root, path)``."""
        return (self.rank, self.root, self.path)

    @property
    def local(self) -> LocalKey:
        """``(root, path)``: the module within its rank."""
        return (self.root, self.path)


@dataclass(frozen=True)
class PausedMarker:
    """Where a rank is paused, to outline on the graph; ``non_finite``: it stopped on
    NaN/Inf there, so the module's card is drawn red whatever the colour metric."""

    rank: int
    root: int
    path: str
    non_finite: bool = False

    @classmethod
    def of(cls, pause: PausedAt | None) -> PausedMarker | None:
        """The marker of a pause (None when running, or paused at a step boundary)."""
        if pause is None or pause.path is None:
            return None
        return cls(int(pause.rank), int(pause.root or 0), str(pause.path),
                   pause.reason == "non_finite")

    @property
    def local(self) -> LocalKey:
        """``(root, path)``."""
        return (self.root, self.path)


@dataclass(frozen=True)
class Breakpoints:
    """The job's breakpoint set: module breakpoints (forward), the kinds armed
    (``BREAK_KINDS``) and condition breakpoints, in the order they were added."""

    modules: frozenset[LocalKey] = frozenset()
    kinds: frozenset[str] = frozenset()
    conditions: tuple[ConditionKey, ...] = ()

    def __bool__(self) -> bool:
        return bool(self.modules or self.kinds or self.conditions)

    @classmethod
    def from_dicts(cls, items: list[dict[str, Any]]) -> Breakpoints:
        """A set from ``SetBreakpoints`` dicts (``Hello.breakpoints``); raises
        ValueError naming the first item it cannot read."""
        modules: set[LocalKey] = set()
        kinds: set[str] = set()
        conditions: list[ConditionKey] = []
        for i, bp in enumerate(items):
            kind = bp.get("kind") if isinstance(bp, dict) else None
            if kind in BREAK_KINDS:
                kinds.add(str(kind))
            elif kind == "module" and bp.get("on", "forward") == "forward":
                modules.add((int(bp.get("root", 0) or 0), str(bp.get("path", ""))))
            elif kind == "condition" and isinstance(bp.get("expr"), str):
                item = (int(bp.get("root", 0) or 0), str(bp.get("path") or ""), bp["expr"])
                if item not in conditions:
                    conditions.append(item)
            else:
                raise ValueError(f"breakpoint {i} is not one the GUI shows: {bp!r}")
        return cls(frozenset(modules), frozenset(kinds), tuple(conditions))

    def union(self, other: Breakpoints) -> Breakpoints:
        """Both sets together (``self``'s conditions first)."""
        return Breakpoints(self.modules | other.modules, self.kinds | other.kinds,
                           (*self.conditions,
                            *(c for c in other.conditions if c not in self.conditions)))

    def dicts(self) -> list[dict[str, Any]]:
        """The set as ``SetBreakpoints`` dicts."""
        out: list[dict[str, Any]] = [{"kind": k} for k in sorted(self.kinds)]
        out += [{"kind": "module", "root": r, "path": p, "on": "forward"}
                for r, p in sorted(self.modules)]
        for root, path, expr in self.conditions:
            bp: dict[str, Any] = {"kind": "condition", "expr": expr}
            if path:
                bp.update(root=root, path=path)
            out.append(bp)
        return out


class ViewState:
    """Selection, breakpoints, pins and the paused-at marker of one window (GUI thread)."""

    def __init__(self) -> None:
        self.events = EmitterGroup("selection", "breakpoints", "pins", "paused_at")
        self._selection: Selection | None = None
        self._breakpoints = Breakpoints()
        self._run_breakpoints = Breakpoints()
        self._pins: frozenset[LocalKey] = frozenset()
        self._paused_at: PausedMarker | None = None

    # --------------------------------------------------------- selection ---
    @property
    def selection(self) -> Selection | None:
        """The module selected, or None."""
        return self._selection

    def select(self, rank: int, root: int, path: str,
               node: tuple[str, str] | None = None) -> bool:
        """Select module ``(rank, root, path)`` (``node``: the graph card clicked);
        returns whether the selection changed."""
        return self._set_selection(Selection(int(rank), int(root), str(path), node))

    def clear_selection(self) -> bool:
        """Select nothing; returns whether the selection changed."""
        return self._set_selection(None)

    def _set_selection(self, selection: Selection | None) -> bool:
        if selection == self._selection:
            return False
        self._selection = selection
        self.events.selection.emit(selection)
        return True

    # ------------------------------------------------------- breakpoints ---
    @property
    def breakpoints(self) -> Breakpoints:
        """The breakpoint set (frozen; change it with the methods below)."""
        return self._breakpoints

    @property
    def module_breaks(self) -> frozenset[LocalKey]:
        """Modules with a forward breakpoint."""
        return self._breakpoints.modules

    @property
    def break_kinds(self) -> frozenset[str]:
        """The kinds armed, of ``BREAK_KINDS``."""
        return self._breakpoints.kinds

    @property
    def conditions(self) -> tuple[ConditionKey, ...]:
        """The condition breakpoints, ``(root, path or "", expression)``."""
        return self._breakpoints.conditions

    def toggle_module_break(self, root: int, path: str) -> bool:
        """Toggle a forward breakpoint on a module; returns whether it is now set."""
        key = (int(root), str(path))
        modules = self.module_breaks
        self._set_breakpoints(replace(self._breakpoints, modules=modules ^ {key}))
        return key in self.module_breaks

    def set_break_kind(self, kind: str, on: bool) -> None:
        """Arm or disarm a break on ``non_finite``, ``exception`` or ``finding``."""
        if kind not in BREAK_KINDS:
            raise ValueError(f"unknown breakpoint kind {kind!r}; use one of {BREAK_KINDS}")
        kinds = self.break_kinds | {kind} if on else self.break_kinds - {kind}
        self._set_breakpoints(replace(self._breakpoints, kinds=kinds))

    def add_condition(self, path: str, expr: str, root: int = 0) -> bool:
        """Break when ``expr`` holds for module ``path``'s step statistics (``""``: any
        module), e.g. ``grad_norm > 100``; returns whether it is new. Raises
        ``ConditionError`` for a bad condition."""
        from tensorscope.common.conditions import parse_condition
        parse_condition(expr)
        item = (int(root), path.strip(), expr.strip())
        if item in self.conditions:
            return False
        self._set_breakpoints(replace(self._breakpoints, conditions=(*self.conditions, item)))
        return True

    def remove_condition(self, index: int) -> None:
        """Forget the ``index``-th condition breakpoint (out of range: nothing)."""
        if 0 <= index < len(self.conditions):
            kept = self.conditions[:index] + self.conditions[index + 1:]
            self._set_breakpoints(replace(self._breakpoints, conditions=kept))

    @property
    def run_breakpoints(self) -> Breakpoints:
        """The breakpoints the run was started with (``--break-on``), as its ranks said."""
        return self._run_breakpoints

    def add_run_breakpoints(self, items: list[dict[str, Any]]) -> None:
        """Take the breakpoints a run was started with (``Hello.breakpoints``) into the
        set, so that they are shown, and kept in the set the GUI sends (which replaces
        the run's). Raises ValueError for an item it cannot read (nothing is taken)."""
        run = Breakpoints.from_dicts(items)
        self._run_breakpoints = self._run_breakpoints.union(run)
        self._set_breakpoints(self._breakpoints.union(run))

    def _set_breakpoints(self, breakpoints: Breakpoints) -> None:
        if breakpoints != self._breakpoints:
            self._breakpoints = breakpoints
            self.events.breakpoints.emit(breakpoints)

    # -------------------------------------------------------------- pins ---
    @property
    def pins(self) -> frozenset[LocalKey]:
        """Modules whose tensors training keeps every step, for the next pause."""
        return self._pins

    def toggle_pin(self, root: int, path: str) -> bool:
        """Pin or unpin a module's tensors; returns whether it is now pinned."""
        key = (int(root), str(path))
        self._pins = self._pins ^ {key}
        self.events.pins.emit(self._pins)
        return key in self._pins

    def pin_list(self) -> list[dict[str, Any]]:
        """The pins as ``PinModules`` dicts."""
        return [{"root": r, "path": p} for r, p in sorted(self._pins)]

    # --------------------------------------------------------- paused at ---
    @property
    def paused_at(self) -> PausedMarker | None:
        """Where the rank shown is paused, to outline (None: running, or at a step)."""
        return self._paused_at

    def set_paused_at(self, marker: PausedMarker | None) -> bool:
        """Move the paused-at marker; returns whether it moved."""
        if marker == self._paused_at:
            return False
        self._paused_at = marker
        self.events.paused_at.emit(marker)
        return True
