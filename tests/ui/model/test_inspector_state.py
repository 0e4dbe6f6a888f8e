"""InspectorState driven with no widget: dims, sliders, slice text, data, errors."""
from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

from inspector_host import make_body
from tensorscope.common.tensors import tensor_meta
from tensorscope.ui.model.inspector_state import HINT_NOT_PAUSED, InspectorState

REF = "0:net.fc#2/out"


def selected(shape, ref=REF, dtype="float32", **kwargs) -> InspectorState:
    state = InspectorState(**kwargs)
    state.select(ref, tensor_meta("net.fc", shape=list(shape), dtype=dtype), {"min": 0.0})
    return state


def test_defaults_pick_views_and_dims_by_rank():
    s2, s4, s1 = selected([5, 7]), selected([2, 3, 4, 4]), selected([9])
    assert (s2.view, s2.rows, s2.cols, s2.slice_text) == ("heatmap", 0, 1, ":, :")
    assert (s4.view, s4.tiles, s4.rows, s4.cols) == ("grid", (0, 1), 2, 3)
    assert (s1.view, s1.cols, s1.slice_text) == ("line", 0, ":")
    scalar = selected([])
    assert scalar.view == "table" and scalar.slice_text == ""


def test_slider_index_changes_slice_text_and_emits():
    state = selected([4, 6, 8])
    seen = []
    state.events.slice.connect(lambda e: seen.append(e.value))
    assert state.slider_dims == (0,)
    state.set_index(0, 3)
    assert state.slice_text == "3, :, :" and seen[-1] == "3, :, :"
    state.set_index(0, 99)                     # clamped to the dim
    assert state.indices[0] == 3


def test_slice_text_sets_dims_indices_and_ranges_both_ways():
    state = selected([4, 6, 8])
    assert state.set_slice_text("2,:,3:7")
    assert state.slice_text == "2, :, 3:7"
    assert (state.rows, state.cols, state.indices[0]) == (1, 2, 2)
    state.set_index(0, 1)                      # the typed range survives slider moves
    assert state.slice_text == "1, :, 3:7"
    assert state.set_slice_text("..., -1")     # negative index normalised, ellipsis expanded
    assert state.slice_text == ":, :, 7" and (state.rows, state.cols) == (0, 1)


def test_bad_slice_text_is_an_error_state_never_an_exception():
    state = selected([4, 6])
    errors = []
    state.events.error.connect(lambda e: errors.append(e.value))
    for bad in ("0, x", "1:2:3:4", "9, :", "0, 0, 0", "eval('1')", "::-1"):
        assert state.set_slice_text(bad) is False
        assert state.error and state.slice_text == bad
        assert state.request() is None          # nothing is fetched for bad text
    assert "out of range" in (state.set_slice_text("9, :") or state.error)
    assert state.set_slice_text("1, :") and state.error == "" and errors[-1] == ""


def test_more_than_four_kept_dims_is_rejected():
    state = selected([2, 2, 2, 2, 2])
    assert not state.set_slice_text(":, :, :, :, :")
    assert "at most 4" in state.error


def test_dims_mapping_transposes_the_received_slice():
    data = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    state = selected(data.shape)
    assert state.set_dims(2, 1)                 # rows = dim 2, cols = dim 1
    ref, text, _ = state.request()
    assert text == "0, :, :"
    assert state.receive(make_body(data, ref, text))
    np.testing.assert_array_equal(state.received.oriented, data[0].T)
    np.testing.assert_array_equal(state.received.axis_indices(0), np.arange(4))
    assert not state.set_dims(1, 1) and "different" in state.error
    assert not state.set_dims(0, 5) and "does not exist" in state.error


def test_views_adapt_dims():
    state = selected([3, 4, 5])
    assert state.set_view("line") and state.slice_text == "0, 0, :"
    assert state.set_view("table") and state.slice_text == "0, :, :"
    assert state.set_view("grid") and state.tiles == (0,) and state.slice_text == ":, :, :"
    assert not selected([3, 4]).set_view("grid")
    assert not state.set_view("pie") and "unknown view" in state.error
    assert not state.set_colormap("rainbow") and state.set_colormap("magma")
    assert not state.set_complex_part("angle") and state.set_complex_part("phase")


def test_large_tensors_are_fetched_strided_within_budget():
    state = selected([4096, 50257], max_elements=100_000)
    ref, text, limit = state.request()
    assert limit == 100_000
    rows, cols = (len(range(*s.indices(n))) for s, n in zip(state.key, state.shape))
    assert rows * cols <= 100_000 and text.startswith("::")


def test_grid_windows_tile_dims_and_fits_budget():
    state = selected([64, 16, 28, 28])
    assert state.view == "grid" and state.slice_text == "0:8, 0:8, :, :"
    assert state.slider_dims == (0, 1)
    state.set_index(0, 60)
    assert state.slice_text == "60:64, 0:8, :, :"


def test_stale_foreign_and_malformed_bodies_are_ignored():
    data = np.ones((3, 4), dtype=np.float32)
    state = selected(data.shape)
    ref, text, _ = state.request()
    assert not state.receive(make_body(data, "0:other#1/out", text))
    assert not state.receive(make_body(data, ref, "0, :"))          # an older request's answer
    bad = make_body(data, ref, text)
    bad["data"] = b"\x00" * 3
    assert not state.receive(bad) and state.status_is_error and "bytes" in state.status
    assert state.receive(make_body(data, ref, text.replace(" ", "")))  # same slice, other spelling
    state.fail("not paused any more")
    assert state.status_is_error and "not paused" in state.status


def test_metadata_only_selection_hints_how_to_get_values():
    state = InspectorState()
    state.select(None, tensor_meta("fc", shape=[2, 2], dtype="float32"), {"mean": 1.0})
    assert state.hint == HINT_NOT_PAUSED and state.status == HINT_NOT_PAUSED
    assert state.request() is None and state.stats == {"mean": 1.0}
    state.select(None, tensor_meta("fc", kind="object", dtype="int"), None)
    assert "Not a tensor" in state.hint and state.request() is None


def test_state_imports_no_qt():
    code = ("import sys, tensorscope.ui.model.inspector_state as s; s.InspectorState()\n"
            "print(any(m.split('.')[0] in ('PySide6', 'pyqtgraph') for m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True, timeout=60)
    assert out.stdout.strip() == "False"


@pytest.mark.parametrize("part,expected", [("magnitude", 5.0), ("real", 3.0), ("imag", 4.0)])
def test_complex_parts(part, expected):
    from tensorscope.ui.model.received import display_values
    assert display_values(np.array([3 + 4j], dtype=np.complex64), part)[0] == pytest.approx(expected)


from hypothesis import given, settings, strategies as st  # noqa: E402


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet="0123456789-+:,. .()[]x", max_size=24))
def test_any_slice_text_is_applied_or_rejected_without_raising(text):
    state = selected([3, 4, 5, 6, 7])
    if state.set_slice_text(text):
        assert state.error == ""
        again = state.slice_text                 # canonical text round-trips
        assert state.set_slice_text(again) and state.slice_text == again
    else:
        assert state.error and state.slice_text == text


@pytest.mark.parametrize("body", [None, [], {"ref": REF}, {"ref": REF, "slice": ":, :", "dtype": "float32",
                                  "shape": "2x2", "data": b""},
                                  {"ref": REF, "slice": ":, :", "dtype": "object", "shape": [1],
                                   "data": b"\0" * 8}])
def test_malformed_bodies_set_an_error_status(body):
    state = selected([2, 2])
    state.request()
    assert state.receive(body) is False
    assert state.received is None
