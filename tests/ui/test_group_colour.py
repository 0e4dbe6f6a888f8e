"""A folded container that is never called itself (a ModuleList of layers) takes its
colour from the call whose output leaves it."""
from __future__ import annotations

import math

from sample_events import transformer_session
from tensorscope.common.events import CallDigest, StepSummary
from tensorscope.common.tensors import tensor_meta
from windows import laid_out_window


def _steps(paths: list[str]) -> list:
    out = []
    for step in range(2):
        for i, path in enumerate(paths):
            out.append(CallDigest(step=step, index=i, root=0, path=path, type="Linear",
                                  outputs=[tensor_meta("out", shape=[8, 128, 256],
                                                       dtype="float32", device="cpu",
                                                       numel=8 * 128 * 256)],
                                  stats={"norm": 1.0 + i}, grad_norm=0.01 * (i + 1)))
        out.append(StepSummary(step=step, loss=1.0))
    return out


def test_a_folded_module_list_is_coloured_by_its_last_layer(qtbot):
    """1,500 Linear layers in a ModuleList folded to one card: the card was left
    blank (no value: a ModuleList is never called) and the legend read 'no finite
    value', though every layer had a gradient norm."""
    msgs = transformer_session(2)
    paths = ["embed"] + [c["path"] for c in msgs[-1].nodes
                         if c.get("kind") == "call" and c["path"].startswith("encoder.")]
    paths.append("head")
    w = laid_out_window(qtbot, msgs + _steps(paths))
    w.graph.graphs["module"].collapse((0, "encoder.layers"))
    w.graph.relayout("module")
    view = w.graph.views["module"]
    qtbot.waitUntil(lambda: w.graph.pending_layouts() == 0
                    and w.graph.graphs["module"].visible_for_module(0, "encoder.layers.1.norm2")
                    in view.nodes.by_id, timeout=10_000)
    group = w.graph.graphs["module"].visible_for_module(0, "encoder.layers.1.norm2")
    assert view.nodes.by_id[group].kind == "group"
    w.graph.recolour()
    values = w.graph.node_values("module", "grad_norm")
    last = 0.01 * (paths.index("encoder.layers.1.norm2") + 1)
    assert values[group] is not None and math.isclose(values[group], last)
    assert group in view.nodes.colours


def test_a_zero_on_a_log_scale_is_the_foot_of_the_ramp_not_its_middle():
    """One positive gradient norm (a range of one value) and a zero: both were given
    the ramp's middle colour, as if the zero gradient were as large."""
    from tensorscope.ui.graph_view import colour_lookup
    from tensorscope.ui.theme import make_theme
    theme = make_theme(False)
    colours = colour_lookup({"a": 0.218, "b": 0.0}, 0.218, 0.218, True, theme)
    assert colours["b"] == theme.ramp(0.0) and colours["a"] != colours["b"]
