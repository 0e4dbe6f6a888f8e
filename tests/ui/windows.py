"""Windows for GUI tests: shown, fed sample events, module graph laid out."""
from __future__ import annotations

from tensorscope.ui.main_window import MainWindow
from tensorscope.ui.theme import make_theme


def laid_out_window(qtbot, msgs: list, size: tuple[int, int] = (1600, 1000),
                    settings_key: str | None = None, timeout: int = 20_000) -> MainWindow:
    """A window fed ``msgs``, returned once its module graph has cards and no layout runs."""
    w = MainWindow(make_theme(False), settings_key=settings_key)
    qtbot.addWidget(w)
    w.resize(*size)
    w.show()
    w.ingest(msgs)
    view = w.graph.views["module"]
    qtbot.waitUntil(lambda: w.graph.pending_layouts() == 0 and bool(view.nodes.cards),
                    timeout=timeout)
    return w
