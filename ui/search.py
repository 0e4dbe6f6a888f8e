"""Find a module by path or class, like Netron's and Model Explorer's search.

``module_matches`` (no Qt) searches every module of the session, folded or
not; ``ModuleSearch`` drives the toolbar's search box: Enter goes to the next
match, Shift+Enter to the previous one, a label says "3 of 12" or "no match",
and the graph panel expands whatever folds the match to reveal it.
"""
from __future__ import annotations

import re
from typing import Iterable

from PySide6.QtCore import QEvent, QObject, Qt
from PySide6.QtWidgets import QLabel, QLineEdit

ModuleKey = tuple[int, str]


def natural_key(text: str) -> list:
    """Sort key reading digit runs as numbers: ``h.2`` < ``h.10``."""
    return [int(part) if part.isdigit() else part.lower() for part in re.split(r"(\d+)", text)]


def module_matches(text: str, modules: Iterable[tuple[ModuleKey, str]]) -> list[ModuleKey]:
    """Modules whose path or class contains ``text`` (case-insensitive), in natural
    order, an exact path first. ``modules``: ``((root, path), class name)`` pairs."""
    t = text.strip().lower()
    if not t:
        return []
    found = [(key, key[1].lower() == t) for key, type_name in modules
             if t in key[1].lower() or t in type_name.lower()]
    found.sort(key=lambda kv: (not kv[1], kv[0][0], natural_key(kv[0][1])))
    return [key for key, _exact in found]


class ModuleSearch(QObject):
    """The search box's state: the matches of its text and which one is shown."""

    def __init__(self, box: QLineEdit, label: QLabel, panel, modules) -> None:
        """``panel``: the GraphPanel (``reveal_module``); ``modules()``: the pairs to search."""
        super().__init__(box)
        self.box, self.label, self.panel, self.modules = box, label, panel, modules
        self.matches: list[ModuleKey] = []
        self.index = -1
        self._text = ""
        box.installEventFilter(self)
        box.textChanged.connect(self._changed)

    def eventFilter(self, obj, event) -> bool:  # noqa: N802 (Qt API)
        if obj is self.box and event.type() == QEvent.Type.KeyPress and \
                event.key() in (Qt.Key.Key_Return, Qt.Key.Key_Enter):
            back = bool(event.modifiers() & Qt.KeyboardModifier.ShiftModifier)
            self.step(-1 if back else 1)
            return True
        return False

    def _changed(self, text: str) -> None:
        if not text.strip():
            self.matches, self.index, self._text = [], -1, ""
            self.label.setText("")

    def step(self, delta: int) -> ModuleKey | None:
        """Go to the next (``1``) or previous (``-1``) match; search anew if the text changed."""
        text = self.box.text()
        if text != self._text:
            self._text = text
            self.matches = module_matches(text, self.modules())
            self.index = -1 if delta > 0 else 0
        if not self.matches:
            self.label.setText("no match" if text.strip() else "")
            return None
        self.index = (self.index + delta) % len(self.matches)
        key = self.matches[self.index]
        self.label.setText(f"{self.index + 1} of {len(self.matches)}")
        self.panel.reveal_module(*key)
        return key
