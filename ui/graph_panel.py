"""The centre of the window: module and autograd graph views with a toggle.

``GraphPanel`` owns one ``GraphModel``, ``GraphView`` and ``LayoutRunner``
per graph kind. It re-lays out only when a graph's structure or collapse
state changes (off the GUI thread), and recolours on the repaint timer. It
observes the window's ``ViewState`` and draws its selection, breakpoints and
paused-at marker; a click selects through it.
"""
from __future__ import annotations

import logging
import math
import time
from dataclasses import dataclass, field

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import QLabel, QStackedWidget, QVBoxLayout, QWidget

from tensorscope.ui.bridge import Bridge
from tensorscope.ui.model.changes import ChangeCursor
from tensorscope.ui.model.graph_model import GraphModel
from tensorscope.ui.graph_items import ORIGIN_TAG, text_widths
from tensorscope.ui.graph_view import GraphView
from tensorscope.ui.layout_runner import LayoutRunner, Prepared, checkpoint, prepare
from tensorscope.ui.model.session_model import NON_FINITE, ModuleKey, SessionModel
from tensorscope.ui.model.view_state import PausedMarker, ViewState
from tensorscope.ui.theme import Theme

log = logging.getLogger("tensorscope.ui")
KINDS = ("module", "autograd")
RECOLOUR_S = 0.1   # live colours change at most 10 times a second (repaints cost)


@dataclass(frozen=True)
class ModuleLabels:
    """What layout workers may know of the session: a snapshot of module classes,
    configs and root names taken on the GUI thread (workers never read the live
    ``SessionModel``, which the GUI thread keeps changing)."""

    types: dict[tuple[int, str], str] = field(default_factory=dict)
    configs: dict[tuple[int, str], str] = field(default_factory=dict)
    root_names: dict[int, str] = field(default_factory=dict)

    @classmethod
    def of(cls, model: SessionModel) -> "ModuleLabels":
        """Snapshot ``model`` (GUI thread)."""
        mods = list(model.rank_modules().items())  # the rank shown, by (root, path)
        return cls({k: m.type for k, m in mods}, {k: m.config for k, m in mods if m.config},
                   dict(model.root_names))

    def type_of(self, root: int, path: str) -> str:
        """A module's class name ("" when unknown); any thread."""
        return self.types.get((root, path), "")

    def describe(self, attrs: dict) -> tuple[str, str]:
        """A card's ``(title, path)``; any thread."""
        root, path = int(attrs.get("root", 0) or 0), str(attrs.get("path") or "")
        if attrs.get("kind") == "op":  # an op created by a root module itself
            label = str(attrs.get("label", ""))
            return label, self.root_names.get(root, "") if attrs.get("module") == "" else ""
        key = (root, path)
        title = str(attrs.get("label") or self.types.get(key, "") or path)
        config = self.configs.get(key, "")
        if config and key in self.types and attrs.get("kind") == "call":
            inner = config.partition("(")[2].rstrip(")")
            if inner and len(inner) <= 16:
                title = f"{title}({inner})"
        if not path:   # a root module: its name, unless the title says it already
            name = self.root_names.get(root, "")
            return title, "" if title.startswith(name) else name
        return title, path


#: the finding that names where a NaN/Inf came from (not the modules it flowed through)
ORIGIN_FINDING = "non_finite"


class GraphPanel(QWidget):
    """Two graph views in a stack, drawing the session and the ``ViewState``."""

    layout_applied = Signal(str)          # kind

    def __init__(self, bridge: Bridge, model: SessionModel, view_state: ViewState,
                 theme: Theme, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.model, self.view_state, self.theme = model, view_state, theme
        self.graphs = {k: GraphModel(k, type_of=self._type_of, check=checkpoint) for k in KINDS}
        self.views = {k: GraphView(self, theme) for k in KINDS}
        self.runners = {k: LayoutRunner(bridge) for k in KINDS}
        runners = list(self.runners.values())
        self.destroyed.connect(lambda *_: [r.close() for r in runners])
        self.widths = text_widths()   # what workers measure card texts with
        self._pending: dict[int, tuple[str, bool]] = {}
        self._laid_out = {k: False for k in KINDS}
        self._hash = {k: None for k in KINDS}
        self._seen = ChangeCursor()   # the module values last coloured
        self._recoloured_at = 0.0
        self.colour_metric = "grad_norm"
        self.compare: dict[ModuleKey, float] | None = None
        self.snapshot: dict[ModuleKey, dict[str, float]] | None = None
        self._reveal_pending = False   # centre the selection once laid out
        #: the recorded step shown (a replay), None live: an exception is tagged from
        #: its step on
        self.shown_step: int | None = None
        self.banner = QLabel(self)
        self.banner.setObjectName("pause_banner")
        self.banner.setWordWrap(True)
        self.banner.setTextFormat(Qt.TextFormat.PlainText)
        self.banner.hide()
        # what is wrong with the session shown (a recording cut off or damaged): it stays
        # until the session changes, apart from the pause banner
        self.notice = QLabel(self)
        self.notice.setObjectName("session_notice")
        self.notice.setWordWrap(True)
        self.notice.setTextFormat(Qt.TextFormat.PlainText)
        self.notice.hide()
        self.stack = QStackedWidget(self)
        for kind in KINDS:
            view = self.views[kind]
            self.stack.addWidget(view)
            view.node_clicked.connect(lambda nid, k=kind: self._clicked(k, nid))
            view.selectable = lambda nid, k=kind: self.graphs[k].module_of(nid) is not None
            view.node_double_clicked.connect(lambda nid, k=kind: self._double_clicked(k, nid))
        self.views["autograd"].set_empty_text(
            "No autograd graph yet: it appears after the first backward pass.")
        bridge.layout_finished.connect(self._layout_finished)
        view_state.events.selection.connect(lambda _e: self.show_selection())
        view_state.events.breakpoints.connect(lambda _e: self._show_breakpoints())
        view_state.events.paused_at.connect(lambda _e: self._show_paused_at())
        box = QVBoxLayout(self)
        box.setContentsMargins(0, 0, 0, 0)
        box.setSpacing(0)
        box.addWidget(self.notice)
        box.addWidget(self.banner)
        box.addWidget(self.stack)

    def _type_of(self, root: int, path: str) -> str:
        """Class of a module, read live (GUI thread only; workers use a ``labels()``)."""
        state = self.model.module(root, path)
        return state.type if state is not None else ""

    @property
    def kind(self) -> str:
        """The graph kind on screen."""
        return KINDS[self.stack.currentIndex()]

    @property
    def view(self) -> GraphView:
        """The graph view on screen."""
        return self.views[self.kind]

    def show_kind(self, kind: str) -> None:
        """Switch between the module and the autograd graph."""
        self.stack.setCurrentIndex(KINDS.index(kind))
        self._seen.reset()
        self.recolour()

    def clear(self) -> None:
        """Forget both graphs (a new session starts)."""
        import networkx as nx
        from tensorscope.ui.model.layout import Layout
        empty = Layout(positions={}, edge_points={}, layers={}, width=0.0, height=0.0)
        for kind in KINDS:
            self.graphs[kind] = GraphModel(kind, type_of=self._type_of, check=checkpoint)
            self.views[kind].apply_layout(nx.DiGraph(), {}, {}, empty, fit=False)
            self.runners[kind].previous = None
            self.runners[kind].latest = 0
            self._hash[kind] = None
            self._laid_out[kind] = False
        self._pending.clear()
        self._seen.reset()

    # ------------------------------------------------------------ layout ---
    def refresh(self) -> None:
        """Pick up new structures and new numbers (repaint timer)."""
        for kind in KINDS:
            gs = self.model.graphs.get(kind)
            if gs is not None and (gs.hash or id(gs)) != self._hash[kind]:
                self._hash[kind] = gs.hash or id(gs)
                self._new_structure(kind, gs)
        now = time.monotonic()
        changes = self.model.changes
        # "findings": a NaN origin or an exception named after the last calls coloured
        if changes.changed(self._seen, "calls", "findings") and \
                now - self._recoloured_at >= RECOLOUR_S:
            changes.take(self._seen, "calls", "findings")
            self._recoloured_at = now
            self.recolour()

    def _new_structure(self, kind: str, gs) -> None:
        """Build the new graph model off the GUI thread; keep the user's folding
        when the containers are the same (e.g. train and eval passes alternate)."""
        old = self.graphs[kind]
        old_groups, old_collapsed = set(old.groups), set(old.collapsed)
        had_nodes = old.full.number_of_nodes() > 0
        labels, widths = self.labels(), self.widths
        fresh = GraphModel(kind, type_of=labels.type_of, check=checkpoint)
        fresh.fold_runs = old.fold_runs

        def work() -> Prepared:
            fresh.set_structure(gs, budget=None)
            checkpoint()
            if old_groups == fresh.groups.keys() and had_nodes:
                fresh.collapsed = old_collapsed
            else:
                fresh.collapse_to_budget()
            return prepare(fresh, labels.describe, widths)
        self._submit(kind, work, fit=True)

    def relayout(self, kind: str, incremental: bool = True,
                 model: GraphModel | None = None, fit: bool | None = None) -> int:
        """Lay out ``model`` (default: the current one) off the GUI thread; ``fit``
        (default: unless ``incremental``) fits the view to the new picture."""
        model = (model or self.graphs[kind]).copy()
        labels = self.labels()
        model.set_type_of(labels.type_of)
        previous = self.runners[kind].previous if incremental else None
        widths = self.widths
        return self._submit(kind, lambda: prepare(model, labels.describe, widths, previous),
                            fit=not incremental if fit is None else fit)

    def _submit(self, kind: str, work, fit: bool) -> int:
        token = self.runners[kind].submit(work)
        self._pending[token] = (kind, fit)
        return token

    def labels(self) -> ModuleLabels:
        """A snapshot of module names for a worker (GUI thread)."""
        return ModuleLabels.of(self.model)

    def _layout_finished(self, token: int, result: object) -> None:
        entry = self._pending.pop(token, None)
        if entry is None:
            return
        kind, fit = entry
        if not self.runners[kind].is_current(token):
            return
        view = self.views[kind]
        if isinstance(result, Exception):
            log.error("preparing the %s graph failed: %s", kind, result)
            view.set_empty_text(f"Could not draw the {kind} graph: {result}")
            return
        self.graphs[kind] = result.model
        self.runners[kind].previous = result.layout
        first = not self._laid_out[kind]
        view.apply_layout(result.visible, result.texts, result.sizes, result.layout,
                          fit=fit or first)
        self._laid_out[kind] = True
        self._seen.reset()
        self.recolour()
        # a module selected before its graph was first drawn (from the tree, or the
        # finding a recording opens on) is scrolled to, not left below the first fit
        self.show_selection(centre=first and kind == self.kind)
        self._show_breakpoints()
        self._show_paused_at()
        if self._reveal_pending and kind == self.kind:
            self._reveal_pending = False
            self.show_selection(centre=True)
        self.layout_applied.emit(kind)

    def pending_layouts(self) -> int:
        """Layouts still running."""
        return len(self._pending)

    def close_layouts(self) -> None:
        """Stop the layout workers and wait for them (the window closes; GUI thread)."""
        for runner in self.runners.values():
            runner.close()
        self._pending.clear()

    # ------------------------------------------------------------ colour ---
    def set_metric(self, metric: str) -> None:
        """Colour nodes by ``metric``."""
        self.colour_metric = metric
        self.recolour()

    def node_values(self, kind: str, metric: str) -> dict[str, float | None]:
        """Metric value of every visible node of ``kind``."""
        graph, out = self.graphs[kind], {}
        marker = self._marker()
        paused_non_finite = marker.local if marker is not None and marker.non_finite else None
        for nid, card in self.views[kind].nodes.by_id.items():
            key = graph.module_of(nid)
            # a parameter's card is its module's weight, not the module's output: a NaN
            # output made by finite weights (the finding says so) left them red too
            weight = card.kind == "param"
            # a folded container never called itself (a ModuleList): the call whose
            # output leaves it gives its value, instead of a blank card
            source = graph.source_of(nid) if card.kind == "group" else None
            if self.snapshot is not None:   # a recorded step: red where it made NaN/Inf
                row = self.snapshot.get(key, {}) if key is not None else {}
                if not row and source is not None:
                    row = self.snapshot.get(source, {})
                out[nid] = math.nan if row.get(NON_FINITE) and not weight else row.get(metric)
                continue
            state = self.model.module(*key) if key is not None else None
            out[nid] = state.metric(metric) if state is not None else None
            if out[nid] is None and source is not None and (
                    inner := self.model.module(*source)) is not None:
                out[nid] = inner.metric(metric)
            if weight:
                continue
            # non-finite overrides the metric: the card is red whatever is chosen
            if key is not None and (key == paused_non_finite or (
                    state is not None and not (state.finite and state.grad_finite))):
                out[nid] = math.nan
        return out

    def recolour(self) -> None:
        """Recolour the visible view from the model (or from a comparison)."""
        kind, view = self.kind, self.view
        if self.compare is not None:
            diffs = {nid: self.compare.get(self.graphs[kind].module_of(nid) or (-1, ""))
                     for nid in view.nodes.by_id}
            view.set_difference_values(diffs, self.colour_metric)
            view.set_origins(set())
        else:
            values = self.node_values(kind, self.colour_metric)
            view.set_metric_values(values, self.colour_metric, self.loss_nodes(kind))
            tags = dict.fromkeys(self.nan_origins(kind, values), ORIGIN_TAG)
            tags.update(self.raised_at(kind))
            view.set_origins(tags)

    def raised_at(self, kind: str) -> dict[str, str]:
        """Visible nodes of the modules an exception escaped from (the shown rank's),
        each with its tag ("RuntimeError raised here")."""
        graph, out = self.graphs[kind], {}
        for e in self.model.exceptions:
            if e.rank != self.model.rank or e.module is None or (
                    self.shown_step is not None and self.shown_step < e.step):
                continue
            nid = graph.visible_for_module(e.root or 0, e.module)
            if nid is not None:
                out[nid] = f"{e.type or 'exception'} raised here"
        return out

    def nan_origins(self, kind: str, values: dict[str, float | None]) -> set[str]:
        """Visible nodes of the modules a ``non_finite`` finding names as where the
        NaN/Inf came from, while they show it (red in ``values``); their folded
        container where they are folded."""
        graph, out = self.graphs[kind], set()
        for finding in self.model.findings.values():
            if finding.kind != ORIGIN_FINDING or finding.rank != self.model.rank:
                continue
            nid = graph.visible_for_module(finding.root, finding.module)
            v = values.get(nid) if nid is not None else None
            if v is not None and not math.isfinite(v):
                out.add(nid)
        return out

    def loss_nodes(self, kind: str) -> set[str]:
        """Visible nodes of losses (``SessionModel.is_loss``): coloured, but left out of
        the colour range (the gradient into a loss is 1, its output the loss value:
        neither compares with the model's layers, and either would squeeze their
        colours together)."""
        graph, is_loss = self.graphs[kind], self.model.is_loss
        return {nid for nid in self.views[kind].nodes.by_id
                if (key := graph.module_of(nid)) is not None and is_loss(*key)}

    def set_snapshot(self, metrics: dict[ModuleKey, dict[str, float]] | None) -> None:
        """Colour by one recorded step's per-module values (None: live values)."""
        self.snapshot = metrics
        self.recolour()

    def set_comparison(self, diffs: dict[ModuleKey, float] | None) -> None:
        """Colour by per-module differences (None: back to live values)."""
        self.compare = diffs
        self.recolour()

    # --------------------------------------------------------- selection ---
    def _clicked(self, kind: str, nid: str) -> None:
        key = self.graphs[kind].module_of(nid)
        if key is not None:
            self.view_state.select(self.model.rank, *key, node=(kind, nid))

    def _double_clicked(self, kind: str, nid: str) -> None:
        graph = self.graphs[kind]
        attrs = graph.visible_graph().nodes.get(nid, {})
        changed = graph.copy()
        if attrs.get("run"):   # a folded run of blocks: show them one by one again
            changed.fold_runs = False
        elif attrs.get("kind") == "group":
            changed.expand(attrs["group"], through_single=True)
        else:
            key = graph.group_of(nid)
            if key is None:
                return
            changed.collapse(key)
        self.relayout(kind, incremental=True, model=changed)

    def show_selection(self, centre: bool | None = None) -> None:
        """Draw the ``ViewState``'s selection in both views, related nodes highlighted
        (a selection of another rank than the one shown draws nothing); ``centre``
        (default: unless a card was clicked) scrolls the view on screen to it."""
        sel = self.view_state.selection
        if sel is not None and sel.rank != self.model.rank:
            sel = None
        if centre is None:
            centre = sel is not None and sel.node is None
        for kind, view in self.views.items():
            if sel is None:
                view.select_nodes([])
                view.set_related(set())
                continue
            graph = self.graphs[kind]
            related = set(graph.nodes_for_module(sel.root, sel.path))
            main = graph.visible_for_module(sel.root, sel.path)
            if (sel.node is not None and sel.node[0] == kind
                    and graph.module_of(sel.node[1]) == sel.local):   # the card clicked
                main = sel.node[1]
            ids = [main] if main else sorted(related)[:1]
            view.select_nodes(ids, centre=centre and kind == self.kind)
            view.set_related(related - set(ids))

    def find(self, text: str) -> bool:
        """Reveal the first module whose path or class contains ``text`` (folded ones too)."""
        from tensorscope.ui.search import module_matches
        pairs = [((m.root, m.path), m.type) for m in self.model.modules.values()
                 if m.rank == self.model.rank]
        matches = module_matches(text, pairs)
        if not matches:
            return False
        self.reveal_module(*matches[0])
        return True

    def reveal_module(self, root: int, path: str) -> None:
        """Select a module and show it: containers folding it are expanded first
        (laid out off the GUI thread, then selected and centred)."""
        graph = self.graphs[self.kind]
        folding = [k for k in graph.collapsed
                   if k[0] == root and k[1] != path and (not k[1] or path.startswith(k[1] + "."))]
        if not self.view_state.select(self.model.rank, root, path):
            self.show_selection(centre=True)   # selected already: show it again
        if folding and graph.has_module(root, path):
            changed = graph.copy()
            for key in sorted(folding, key=lambda k: len(k[1])):
                changed.expand(key)
            self._reveal_pending = True
            self.relayout(self.kind, incremental=True, model=changed)

    def set_banner(self, text: str, alarm: bool = False) -> None:
        """Say above the graph why training stopped (empty: hide)."""
        self.banner.setText(text)
        self.banner.setVisible(bool(text))
        colour = self.theme.non_finite if alarm else self.theme.executing
        self.banner.setStyleSheet(f"background: {colour.name()}; color: white; "
                                  "padding: 5px 10px; font-weight: bold;")

    def set_notice(self, text: str, details: str = "", warning: bool = True) -> None:
        """Say above the graph what is wrong with the session shown, until told
        otherwise (empty: hide); ``details`` is its tooltip; ``warning`` False: news
        rather than a fault (a recording still being written), in the accent colour."""
        self.notice.setText(text)
        self.notice.setToolTip(details)
        self.notice.setVisible(bool(text))
        colour = self.theme.precision_change if warning else self.theme.accent
        self.notice.setStyleSheet(f"background: {colour.name()}; "
                                  "color: white; padding: 4px 10px;")

    def _marker(self) -> PausedMarker | None:
        """The ``ViewState``'s paused-at marker if it is of the rank shown."""
        marker = self.view_state.paused_at
        return marker if marker is not None and marker.rank == self.model.rank else None

    def _show_paused_at(self) -> None:
        """Outline the paused-at module (nothing while running) and scroll to it; a
        module that stopped on NaN/Inf is drawn red (kept across re-layouts)."""
        marker = self._marker()
        for kind, view in self.views.items():
            nid = (self.graphs[kind].visible_for_module(*marker.local)
                   if marker is not None else None)
            view.set_executing(nid)
            if nid is not None and kind == self.kind:
                view.reveal(nid)
        if self.views[self.kind].nodes.cards:
            self.recolour()

    def _show_breakpoints(self) -> None:
        """Show breakpoint dots on the nodes of modules with a breakpoint."""
        keys = self.view_state.module_breaks
        for kind, view in self.views.items():
            ids = {self.graphs[kind].visible_for_module(r, p) for r, p in keys}
            view.set_breakpoints({i for i in ids if i})

    def expand_all(self) -> None:
        """Expand every container of the current graph."""
        changed = self.graphs[self.kind].copy()
        changed.expand_all()
        # every card moves: the view kept where it was looked at empty canvas
        self.relayout(self.kind, incremental=True, model=changed, fit=True)

    def set_fold_runs(self, on: bool) -> None:
        """Fold runs of identical blocks (``h.0–11 ×12``) in the current graph, or not."""
        changed = self.graphs[self.kind].copy()
        changed.fold_runs = on
        self.relayout(self.kind, incremental=False, model=changed)

    def collapse_all(self) -> None:
        """Fold every container below the roots (one card per top-level module)."""
        changed = self.graphs[self.kind].copy()
        changed.collapse_below(1)
        self.relayout(self.kind, incremental=False, model=changed)

    def collapse_default(self) -> None:
        """Back to the default collapse depth (computed off the GUI thread)."""
        changed = self.graphs[self.kind].copy()
        labels = self.labels()
        changed.set_type_of(labels.type_of)
        widths = self.widths

        def work() -> Prepared:
            changed.collapse_to_budget()
            return prepare(changed, labels.describe, widths)
        self._submit(self.kind, work, fit=True)


def relative_change(a: float | None, b: float | None) -> float | None:
    """(b - a) / |a| with guards (None when either is missing)."""
    if a is None or b is None or not (math.isfinite(a) and math.isfinite(b)):
        return None if a is None or b is None else float("nan")
    return (b - a) / max(abs(a), 1e-12)
