"""The module tree dock: hierarchy plus live columns, sortable and filterable."""
from __future__ import annotations

import re

from PySide6.QtCore import (QEvent, QItemSelectionModel, QModelIndex, QObject,
                            QSortFilterProxyModel, Qt, QTimer, Signal)
from PySide6.QtGui import QBrush, QStandardItem, QStandardItemModel
from PySide6.QtWidgets import (QHeaderView, QLineEdit, QStyle, QStyledItemDelegate,
                               QStyleOptionViewItem, QTreeView, QVBoxLayout, QWidget)

from tensorscope.ui.elided import CentredNote
from tensorscope.ui.model.cards import shape_candidates, shape_text, short_dtype
from tensorscope.ui.legend import format_number
from tensorscope.ui.model.changes import ChangeCursor
from tensorscope.ui.model.session_model import LocalKey, ModuleState, SessionModel
from tensorscope.ui.search import natural_key
from tensorscope.ui.theme import Theme, make_theme

#: the headers are short (a header wider than its cells took the room a column needed:
#: 'Output shape' held 105 px over ``4×64×64`` while GPT-2's classes read 'GPT…');
#: each says what it means in its tooltip
COLUMNS = ("Module", "Class", "Shape", "Dtype", "Device", "Params", "Grad norm",
           "Findings")
HEADER_TIPS = ("The module's name (its path in the row's tooltip)",
               "The module's class",
               "The shape of the module's first tensor output, at its latest call",
               "The dtype of that output",
               "The device of that output",
               "Parameters the module holds, its children's included",
               "L2 norm of the gradient that flowed into the module's output, at its latest "
               "call under autograd",
               "Findings about the module")
#: px: keep every column in view (a shape up to ``128×2048×128256`` or
#: ``16×3×16×224×224`` whole)
COLUMN_CAPS = (150, 110, 140, 62, 50, 60, 72, 40)
#: the columns whose text is measured again when it grows past their width (a shape or
#: a class arrives with the first calls, after the tree was measured on empty cells)
GROWING = (1, 2, 5)
#: px: the least a column is squeezed to when the dock is narrow (its text elides;
#: a module's full path is in its tooltip)
COLUMN_MINS = (70, 50, 56, 40, 46, 52, 72, 40)
#: the columns that give way, in turn, for the columns up to Grad norm to fit the dock:
#: Dtype and Device first, down to ``bf16`` and ``cuda:0`` (what they hold is short),
#: and Params, down to ``100.5k``; then the Module column, never below its deepest open row's name (each row's tooltip
#: has its path); then Class and Shape, which say what a row is. Findings, last
#: and mostly empty, may scroll
SHRINK_ORDER = (3, 4, 5, 0, 1, 2)
#: px a child row is indented (Qt's 20 leaves no room for names six levels down,
#: ``resnet.encoder.stages.0.layers.0.shortcut``)
INDENT = 12
KEY_ROLE = Qt.ItemDataRole.UserRole + 1
SORT_ROLE = Qt.ItemDataRole.UserRole + 2


def _human(n: int) -> str:
    for unit, div in (("M", 1e6), ("k", 1e3)):
        if n >= div:
            return f"{n / div:.1f}{unit}"
    return str(n)


def fit_widths(natural: list[int], available: int, name_min: int = COLUMN_MINS[0]) -> list[int]:
    """Column widths that fit ``available`` px where the columns' ``natural`` widths do
    not: the ``SHRINK_ORDER`` columns give way in turn, down to ``COLUMN_MINS`` (the
    Module column down to ``name_min``: room for its deepest open row's name). What
    still does not fit scrolls sideways."""
    widths = list(natural)
    mins = (max(COLUMN_MINS[0], name_min), *COLUMN_MINS[1:])
    excess = sum(widths[:COLUMNS.index("Grad norm") + 1]) - available
    for col in SHRINK_ORDER:
        if excess <= 0:
            break
        give = min(excess, max(0, widths[col] - mins[col]))
        widths[col] -= give
        excess -= give
    return widths


#: characters of a module's name that stay readable however deep its row (a longer
#: name elides in the middle; its tooltip has the whole path)
NAME_CHARS = 8


def tree_order(modules: dict[LocalKey, ModuleState]) -> list[LocalKey]:
    """Parents before children, siblings in PyTorch's order (``named_children``, as the
    module tree lists them), modules no parent lists after them in natural order."""
    place: dict[LocalKey, int] = {}
    for (root, _path), state in modules.items():
        for i, child in enumerate(state.children):
            place.setdefault((root, child), i)
    return sorted(modules, key=lambda k: (k[0], k[1].count(".") if k[1] else -1,
                                          place.get(k, 1 << 30), natural_key(k[1])))


def natural_text(path: str) -> str:
    """``path`` with digit runs zero-padded, so that text order is natural order."""
    return re.sub(r"\d+", lambda m: m.group(0).zfill(10), path)


class ModuleTreePanel(QWidget):
    """Tree of every root's modules; emits ``module_selected(root, path)``."""

    module_selected = Signal(int, str)

    def __init__(self, parent: QWidget | None = None, theme: Theme | None = None) -> None:
        super().__init__(parent)
        self.theme = theme or make_theme()
        self.items: dict[LocalKey, list[QStandardItem]] = {}  # of the rank shown
        self.source = QStandardItemModel(0, len(COLUMNS), self)
        self.source.setHorizontalHeaderLabels(list(COLUMNS))
        for col, tip in enumerate(HEADER_TIPS):
            self.source.setHeaderData(col, Qt.Orientation.Horizontal, tip,
                                      Qt.ItemDataRole.ToolTipRole)
        self.proxy = QSortFilterProxyModel(self)
        self.proxy.setSourceModel(self.source)
        self.proxy.setRecursiveFilteringEnabled(True)
        self.proxy.setFilterCaseSensitivity(Qt.CaseSensitivity.CaseInsensitive)
        self.proxy.setFilterKeyColumn(-1)
        self.proxy.setSortRole(SORT_ROLE)
        self.filter = QLineEdit(self)
        self.filter.setPlaceholderText("Filter modules (path or class)…")
        self.filter.setClearButtonEnabled(True)
        self.filter.textChanged.connect(self._filter_changed)
        self.view = QTreeView(self)
        self.view.setModel(self.proxy)
        self.view.setSortingEnabled(True)
        self.view.sortByColumn(-1, Qt.SortOrder.AscendingOrder)
        self.view.setAlternatingRowColors(True)
        self.view.setUniformRowHeights(True)
        self.view.header().setSectionResizeMode(QHeaderView.ResizeMode.Interactive)
        self.view.header().setStretchLastSection(False)
        self._natural: list[int] = []     # the columns' widths for their contents (capped)
        self._fitting = False
        self._user_sized = False          # the user dragged a column: widths are theirs
        self.view.header().sectionResized.connect(self._section_resized)
        self.view.setIndentation(INDENT)
        # names and classes keep their start (``convolu…``, ``Embed…``: a row's tooltip
        # has the whole path); a shape both its ends (``2×…×64``)
        self._shapes = _MiddleElided(self.view)
        self.view.setItemDelegateForColumn(COLUMNS.index("Shape"), self._shapes)
        self._name_min = COLUMN_MINS[0]   # px the deepest open row's name needs
        # an opened row shows deeper names: the Module column grows to show them too,
        # measured once per burst (expandToDepth/expandAll signal every row they open:
        # a measure each took 12 s on a model of 700 blocks)
        self._remeasure = QTimer(self)
        self._remeasure.setSingleShot(True)
        self._remeasure.setInterval(0)
        self._remeasure.timeout.connect(lambda: self._measure(only_names=True))
        self.view.expanded.connect(lambda _index: self._remeasure.start())
        self.view.collapsed.connect(lambda _index: self._remeasure.start())
        # a cell's text grew past its column (the first calls' shapes): measure every
        # column again, once per refresh
        self._regrow = QTimer(self)
        self._regrow.setSingleShot(True)
        self._regrow.setInterval(0)
        self._regrow.timeout.connect(self._measure)
        self.view.viewport().installEventFilter(self)
        self.view.selectionModel().currentChanged.connect(self._current_changed)
        box = QVBoxLayout(self)
        box.setContentsMargins(4, 4, 4, 4)
        box.addWidget(self.filter)
        box.addWidget(self.view)
        self._seen = ChangeCursor()
        self._rank = 0
        self._quiet = False
        self.note = CentredNote(self.view.viewport(), self.theme.subtle.name())
        self.note.say("Modules appear with the script's first forward pass")

    def clear(self) -> None:
        """Forget every row (a new session starts)."""
        self.source.removeRows(0, self.source.rowCount())
        self.items.clear()
        self._seen.reset()

    def _filter_changed(self, text: str) -> None:
        self.proxy.setFilterFixedString(text)
        if text:
            self.view.expandAll()

    # ----------------------------------------------------------- refresh ---
    def refresh(self, model: SessionModel) -> None:
        """Sync with the model (GUI thread, on the repaint timer): the selected rank."""
        if model.rank != self._rank:
            self.clear()
            self._rank = model.rank
        changed = model.changes.take(self._seen, "structure", "calls", "findings")
        if "structure" in changed:
            self._add_missing(model)
        if changed or not self.items:
            self.note.say("" if self.items else
                          "No module was recorded" if model.steps_seen or model.ended else
                          "Modules appear with the script's first forward pass")
        if changed & {"calls", "findings"}:
            for key, state in model.rank_modules().items():
                row = self.items.get(key)
                if row is not None:
                    self._fill(row, state)

    def _add_missing(self, model: SessionModel) -> None:
        added = False
        modules = model.rank_modules()
        for key in tree_order(modules):
            if key in self.items:
                continue
            state = modules[key]
            parent = self._parent_item(model, key)
            name = (model.root_names.get(key[0], f"root {key[0]}") if not key[1]
                    else key[1].rsplit(".", 1)[-1])
            row = [QStandardItem(name)] + [QStandardItem() for _ in COLUMNS[1:]]
            for item in row:
                item.setEditable(False)
                item.setData(f"{key[0]}:{key[1]}", KEY_ROLE)
            row[0].setData(natural_text(key[1]), SORT_ROLE)   # h.2 before h.10
            row[0].setToolTip(key[1] or f"{name} (root)")
            parent.appendRow(row)
            self.items[key] = row
            self._fill(row, state)
            added = True
        if added:
            self.view.expandToDepth(1)
            self._measure()
            self._remeasure.stop()   # measured just now, the opened rows included

    def _measure(self, only_names: bool = False) -> None:
        """The columns' natural widths for the rows in view (capped), then fit them.
        ``only_names``: a row was opened, only the Module column's can have grown."""
        if self._user_sized:
            return
        self._fitting = True
        try:
            for col in (0,) if only_names and self._natural else range(len(COLUMNS)):
                self.view.resizeColumnToContents(col)
        finally:
            self._fitting = False
        self._name_min = self._deepest_name_room()
        caps = (max(COLUMN_CAPS[0], self._name_min), *COLUMN_CAPS[1:])
        natural = [min(self.view.columnWidth(col), cap) for col, cap in enumerate(caps)]
        if only_names and self._natural:
            natural = [max(natural[0], self._natural[0]), *self._natural[1:]]
        self._natural = natural
        self._fit_columns()

    def _deepest_name_room(self) -> int:
        """px of the Module column that shows every open row's name (up to
        ``NAME_CHARS`` of it) past its indentation: a deep row's name elided to
        nothing told nothing."""
        metrics = self.view.fontMetrics()
        step = self.view.indentation()
        # a text's margins inside its cell (Qt elides within them), and a root row's
        # branch arrow: each row was measured one indentation short, so GPT-2's
        # ``h.3.attn`` and ``h.3.ln_1`` read 'a…' and 'ln…'
        margin = 2 * (self.view.style().pixelMetric(
            QStyle.PixelMetric.PM_FocusFrameHMargin, None, self.view) + 1) + 2
        need = 0
        pending = [(QModelIndex(), 1 if self.view.rootIsDecorated() else 0)]
        while pending:   # the rows in view: children of open rows only
            parent, indents = pending.pop()
            if parent.isValid() and not self.view.isExpanded(parent):
                continue
            for row in range(self.proxy.rowCount(parent)):
                index = self.proxy.index(row, 0, parent)
                name = str(index.data() or "")
                if len(name) > NAME_CHARS:
                    name = name[:NAME_CHARS - 1] + "…"
                need = max(need, indents * step + metrics.horizontalAdvance(name) + margin)
                if self.proxy.hasChildren(index):
                    pending.append((index, indents + 1))
        return need

    def _fit_columns(self) -> None:
        """Squeeze the columns into the view's width, so that Params and Grad norm stay
        in view in a narrow dock (unless the user sized the columns)."""
        if not self._natural or self._user_sized:
            return
        self._fitting = True
        try:
            for col, width in enumerate(fit_widths(self._natural, self.view.viewport().width(),
                                                   self._name_min)):
                self.view.setColumnWidth(col, width)
        finally:
            self._fitting = False

    def _grown(self, col: int, text: str) -> None:
        """Measure the columns again (soon) if ``text`` is wider than column ``col``
        was measured, and its cap leaves it room to grow."""
        if not self._natural or self._user_sized or self._regrow.isActive():
            return
        need = self.view.fontMetrics().horizontalAdvance(text) + 12
        if need > self._natural[col] and self._natural[col] < COLUMN_CAPS[col]:
            self._regrow.start()

    def _section_resized(self, _col: int, _old: int, _new: int) -> None:
        if not self._fitting:
            self._user_sized = True

    def eventFilter(self, watched: QObject, event: QEvent) -> bool:  # noqa: N802 (Qt API)
        """Refit the columns when the view's viewport (its dock) is resized."""
        if watched is self.view.viewport() and event.type() == QEvent.Type.Resize:
            self._fit_columns()
        return super().eventFilter(watched, event)

    def _parent_item(self, model: SessionModel, key: LocalKey) -> QStandardItem:
        root, path = key
        if not path:
            return self.source.invisibleRootItem()
        parent_path = path.rsplit(".", 1)[0] if "." in path else ""
        parent = self.items.get((root, parent_path))
        return parent[0] if parent is not None else self.source.invisibleRootItem()

    def _fill(self, row: list[QStandardItem], s: ModuleState) -> None:
        grad = "—" if s.grad_norm is None else format_number(s.grad_norm)
        if not s.grad_finite:
            grad = "NaN/Inf"
        kind, shape = s.type, shape_text(s.shape)
        if s.compiled is not None:
            kind = f"{s.type} (compiled: {s.compiled} modules inside)"
        elif s.inside_compiled is not None and s.last_step < 0:
            shape = "not observed (compiled)"   # never drawn as if captured
        # dtypes as the cards' badges write them (f32, bf16): "float32" took the room
        # a class name or a shape needed; the whole name is the cell's tooltip
        values = (kind, shape, short_dtype(s.dtype), s.device,
                  _human(s.params) if s.params else "", grad, str(s.findings or ""))
        sorts = (s.type, str(s.shape), s.dtype, s.device, s.params,
                 -1.0 if s.grad_norm is None else float(s.grad_norm), s.findings)
        for col, (item, text, sort) in enumerate(zip(row[1:], values, sorts), start=1):
            if item.text() != text:
                item.setText(text)
                item.setData(sort, SORT_ROLE)
                if col in GROWING:
                    item.setToolTip(text)   # an elided class or shape reads whole here
                    self._grown(col, text)
        # red where the NaN/Inf is: the name for an output, the gradient norm for a gradient
        # (a finite gradient norm in red read as a bad gradient)
        if row[3].toolTip() != s.dtype:
            row[3].setToolTip(s.dtype)
        row[0].setForeground(QBrush(self.theme.non_finite) if not s.finite else QBrush())
        row[6].setForeground(QBrush(self.theme.non_finite) if not s.grad_finite else QBrush())
        # a root's row: its name (elided in the column: 'CrossE…', 'GPT2LM…'), not '(root)'
        tip = ((s.path or f"{row[0].text()} (root)")
               + ("\noutput holds NaN/Inf" if not s.finite else ""))
        if row[0].toolTip() != tip:
            row[0].setToolTip(tip)
        row[7].setForeground(QBrush(self.theme.precision_change) if s.findings else QBrush())

    # --------------------------------------------------------- selection ---
    def _current_changed(self, current: QModelIndex, _previous: QModelIndex) -> None:
        if self._quiet or not current.isValid():
            return
        key = _parse_key(current.data(KEY_ROLE))
        if key is not None:
            self.module_selected.emit(*key)

    def select_module(self, root: int, path: str) -> bool:
        """Select and reveal a module without re-emitting ``module_selected``."""
        row = self.items.get((root, path))
        if row is None:
            return False
        index = self.proxy.mapFromSource(row[0].index())
        if not index.isValid():
            return False
        self._quiet = True
        try:
            self.view.selectionModel().setCurrentIndex(
                index, QItemSelectionModel.SelectionFlag.ClearAndSelect
                | QItemSelectionModel.SelectionFlag.Rows)
            self.view.scrollTo(index)
        finally:
            self._quiet = False
        return True

    def selected_module(self) -> LocalKey | None:
        """The selected ``(root, path)``, if any."""
        index = self.view.selectionModel().currentIndex()
        return _parse_key(index.data(KEY_ROLE)) if index.isValid() else None


class _MiddleElided(QStyledItemDelegate):
    """Shape cells shortened by whole dims (``2×…×500``; ``shape_candidates``), and
    elided in the middle only when not even the last dim fits."""

    def initStyleOption(self, option: QStyleOptionViewItem, index: QModelIndex) -> None:  # noqa: N802
        super().initStyleOption(option, index)
        option.textElideMode = Qt.TextElideMode.ElideMiddle
        style = option.widget.style() if option.widget is not None else None
        margin = (style.pixelMetric(QStyle.PixelMetric.PM_FocusFrameHMargin, None,
                                    option.widget) + 1 if style is not None else 3)
        room = option.rect.width() - 2 * margin
        if room <= 0 or option.fontMetrics.horizontalAdvance(option.text) <= room:
            return
        for text in shape_candidates(option.text):
            if option.fontMetrics.horizontalAdvance(text) <= room:
                option.text = text
                return


def _parse_key(data: object) -> LocalKey | None:
    if not isinstance(data, str) or ":" not in data:
        return None
    root, _, path = data.partition(":")
    return int(root), path
