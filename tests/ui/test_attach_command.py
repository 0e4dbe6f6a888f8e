"""``tensorscope attach``: a job's other ranks are found, a refused attach is explained."""
from __future__ import annotations

from tensorscope.common.events import Hello
from tensorscope.ui.app import job_attacher
from tensorscope.ui.main_window import MainWindow
from tensorscope.ui.theme import make_theme


def test_the_job_attacher_reaches_the_other_ranks_at_base_port_plus_rank():
    """It imported tensorscope.transport, which no longer exists: every attach raised
    ModuleNotFoundError before connecting."""
    started: list[str] = []
    on_hello = job_attacher("127.0.0.1:7011", started.append)
    on_hello(Hello(rank=1, world_size=3), None)
    on_hello(Hello(rank=2, world_size=3), None)   # once only
    assert started == ["127.0.0.1:7010", "127.0.0.1:7012"]


def test_an_error_before_any_session_is_what_the_empty_graph_says(qtbot):
    w = MainWindow(make_theme(False), settings_key=None)
    qtbot.addWidget(w)
    w.show()
    with qtbot.waitSignal(w.bridge.error_reported, timeout=5000):
        w.bridge.post_error("Could not attach to 127.0.0.1:1: [Errno 111] Connection refused")
    assert "Could not attach to 127.0.0.1:1" in w.graph.views["module"]._empty_text
