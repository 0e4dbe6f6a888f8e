"""Labels that never make their dock wider than the user made it.

A ``QLabel`` asks for its whole text as its minimum width: a module path of 80
characters in a title, or in a wrapped hint (a path has no spaces to wrap at),
widened the inspector's dock and squeezed the graph to a strip.
"""
from __future__ import annotations

import re

from PySide6.QtCore import QEvent, QObject, QSize, Qt
from PySide6.QtWidgets import QLabel, QWidget

#: a zero-width space: where a wrapped label may break a dotted path or a long name
BREAK = "\u200b"
_BREAKABLE = re.compile(r"([._/\]›:,])(?=\S)")


def breakable(text: str) -> str:
    """``text`` with break opportunities after the dots, underscores, slashes and
    brackets of paths, so that a word-wrapped label wraps a long module path."""
    return _BREAKABLE.sub(lambda m: m.group(1) + BREAK, text)


class ElidedLabel(QLabel):
    """One line, elided in the middle to the width the layout gives it (the full
    text in the tooltip); it asks for its text's width but needs only a little.
    ``text()`` is the full text."""

    MIN_WIDTH = 40

    def __init__(self, text: str = "", parent: QWidget | None = None,
                 min_width: int = MIN_WIDTH) -> None:
        super().__init__(parent)
        self.min_width = min_width
        self._full = ""
        self._tip = ""
        self.setText(text)

    def setText(self, text: str) -> None:  # noqa: N802 (Qt API)
        """Show ``text``, elided to the label's width."""
        self._full = text
        self._elide()
        self.updateGeometry()

    def text(self) -> str:
        """The full text (what is shown may be elided)."""
        return self._full

    def setToolTip(self, tip: str) -> None:  # noqa: N802 (Qt API)
        """A tooltip shown under the full text when that is elided."""
        self._tip = tip
        self._elide()

    def sizeHint(self) -> QSize:  # noqa: N802 (Qt API)
        """Room for the whole text."""
        metrics = self.fontMetrics()
        margins = self.contentsMargins()
        return QSize(metrics.horizontalAdvance(self._full) + margins.left() + margins.right()
                     + 2 * self.margin() + 2, super().sizeHint().height())

    def minimumSizeHint(self) -> QSize:  # noqa: N802 (Qt API)
        """A few characters' width: the layout elides the rest."""
        return QSize(min(self.min_width, self.sizeHint().width()),
                     super().minimumSizeHint().height())

    def resizeEvent(self, event) -> None:  # noqa: N802 (Qt API)
        super().resizeEvent(event)
        self._elide()

    def _elide(self) -> None:
        width = self.contentsRect().width() - 2 * self.margin()
        shown = self.fontMetrics().elidedText(self._full, Qt.TextElideMode.ElideMiddle,
                                              max(width, 0))
        if shown != super().text():
            super().setText(shown)
        elided = shown != self._full
        tip = "\n".join(t for t in (self._full if elided else "", self._tip) if t)
        if tip != super().toolTip():
            super().setToolTip(tip)


class WrappedLabel(QLabel):
    """A word-wrapped label that also wraps inside long paths (``breakable``), so
    that its longest word never sets the width of its dock. ``text()`` is the text
    as given."""

    def __init__(self, text: str = "", parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setWordWrap(True)
        self._full = ""
        self.setText(text)

    def setText(self, text: str) -> None:  # noqa: N802 (Qt API)
        """Show ``text`` with break opportunities in its paths."""
        self._full = text
        super().setText(breakable(text))

    def text(self) -> str:
        """The text as given (without the break opportunities)."""
        return self._full


class CentredNote(QLabel):
    """Grey text over the middle of an empty widget (a plot, a list) saying why it is
    empty; mouse events pass through to the widget. ``left``: px kept clear at the
    left (a plot's axis labels)."""

    def __init__(self, over: QWidget, colour: str, left: int = 12) -> None:
        super().__init__(over)
        self.left = left
        self.setWordWrap(True)
        self.setAlignment(Qt.AlignmentFlag.AlignCenter)
        self.setAttribute(Qt.WidgetAttribute.WA_TransparentForMouseEvents)
        self.setStyleSheet(f"color: {colour}; background: transparent;")
        over.installEventFilter(self)
        self.hide()

    def eventFilter(self, watched: QObject, event: QEvent) -> bool:  # noqa: N802 (Qt API)
        """Follow the widget's size."""
        if event.type() == QEvent.Type.Resize:
            self._place()
        return False

    def _place(self) -> None:
        self.setGeometry(self.parentWidget().rect().adjusted(self.left, 28, -12, -28))

    def say(self, text: str) -> None:
        """Show ``text`` (empty: hide)."""
        if text != self.text():
            self.setText(text)
            self._place()
        if self.isVisibleTo(self.parentWidget()) != bool(text):
            self.setVisible(bool(text))
