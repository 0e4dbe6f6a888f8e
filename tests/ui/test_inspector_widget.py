"""TensorInspector with qtbot: slicing, debounced requests, dtypes, grid, export, hints."""
from __future__ import annotations

import numpy as np
import pytest

from inspector_host import ArrayHost, make_body
from tensorscope.common.tensors import tensor_meta
from tensorscope.ui.inspector import HINT_NOT_PAUSED, TensorInspector
from tensorscope.ui.model.received import format_value

REF = "0:features.0#1/out"


@pytest.fixture
def inspector(qtbot):
    widget = TensorInspector()
    qtbot.addWidget(widget)
    widget.resize(420, 800)
    widget.show()
    return widget


def show(inspector, array, ref=REF, dtype=None, original_dtype=""):
    previous = getattr(inspector, "test_host", None)
    if previous is not None:
        inspector.tensor_requested.disconnect(previous.answer)
    host = ArrayHost(inspector, {ref: array}, original_dtype=original_dtype)
    meta = tensor_meta("features.0", shape=list(array.shape), dtype=dtype or array.dtype.name,
                       device="cpu")
    inspector.show_tensor(ref, meta, {"min": float(np.min(array.real)) if array.size else 0.0})
    inspector.test_host = host   # Qt holds slots weakly: keep the host alive with the widget
    return host


def test_moving_a_slider_changes_the_requested_slice_and_the_shown_data(inspector, qtbot):
    data = np.arange(4 * 5 * 6, dtype=np.float32).reshape(4, 5, 6)
    host = show(inspector, data)
    assert host.requests[-1][1] == "0, :, :"
    np.testing.assert_array_equal(inspector.heatmap.values, data[0])
    slider = inspector.slicer.sliders[0].slider
    with qtbot.waitSignal(inspector.tensor_requested, timeout=2000) as blocker:
        slider.setValue(2)
    assert blocker.args[1] == "2, :, :"
    assert inspector.slicer.slice_edit.text() == "2, :, :"
    np.testing.assert_array_equal(inspector.heatmap.values, data[2])


def test_rapid_slider_moves_coalesce_into_one_request(inspector, qtbot):
    data = np.zeros((10, 3, 3), dtype=np.float32)
    host = show(inspector, data)
    before = len(host.requests)
    for value in range(1, 10):
        inspector.slicer.sliders[0].slider.setValue(value)
    qtbot.waitUntil(lambda: len(host.requests) > before, timeout=2000)
    qtbot.wait(200)   # the debounce window passes with no further request
    assert [r[1] for r in host.requests[before:]] == ["9, :, :"]


def test_slice_text_is_parsed_and_a_bad_one_shows_an_error(inspector, qtbot):
    data = np.arange(60, dtype=np.int64).reshape(3, 4, 5)
    host = show(inspector, data)
    edit = inspector.slicer.slice_edit
    edit.setText("1, 1:3, :")
    with qtbot.waitSignal(inspector.tensor_requested, timeout=2000):
        edit.returnPressed.emit()
    assert host.requests[-1][1] == "1, 1:3, :"
    assert inspector.slicer.sliders[0].slider.value() == 1
    np.testing.assert_array_equal(inspector.heatmap.values, data[1, 1:3])
    count = len(host.requests)
    edit.setText("1, ?")
    edit.returnPressed.emit()                  # no exception reaches the caller
    assert inspector.slicer.error_label.isVisible()
    assert "not an integer" in inspector.slicer.error_label.text()
    qtbot.wait(150)
    assert len(host.requests) == count         # nothing fetched for bad text
    edit.setText("2, :, :")
    edit.returnPressed.emit()
    assert not inspector.slicer.error_label.isVisible()


def test_rows_and_columns_map_to_chosen_dims(inspector, qtbot):
    data = np.arange(2 * 3 * 4, dtype=np.float32).reshape(2, 3, 4)
    host = show(inspector, data)
    box = inspector.slicer.rows_box
    box.setCurrentIndex(box.findData(2))       # rows := dim 2 (was cols: they swap)
    with qtbot.waitSignal(inspector.tensor_requested, timeout=2000):
        box.textActivated.emit(box.currentText())
    assert (inspector.state.rows, inspector.state.cols) == (2, 1)
    assert host.requests[-1][1] == "0, :, :"
    np.testing.assert_array_equal(inspector.heatmap.values, data[0].T)
    assert inspector.heatmap.plot.getAxis("left").labelText == "dim 2"


DTYPES = {
    "bool": (np.array([[True, False], [False, True]]), "bool", ""),
    "int8": (np.array([[-128, 0], [5, 127]], dtype=np.int8), "int8", ""),
    "int64": (np.array([[2**40, -3], [0, 7]], dtype=np.int64), "int64", ""),
    "float16": (np.array([[0.5, -1.25], [np.nan, np.inf]], dtype=np.float16), "float16", ""),
    "bfloat16": (np.array([[1.0, 0.0078125], [-2.5, 3.0]], dtype=np.float32), "bfloat16",
                 "bfloat16"),
    "complex64": (np.array([[3 + 4j, -1j], [0, 1 + 1j]], dtype=np.complex64), "complex64", ""),
}


@pytest.mark.parametrize("name", list(DTYPES))
def test_every_dtype_renders_in_every_view(inspector, qtbot, name):
    data, dtype, original = DTYPES[name]
    show(inspector, data, dtype=dtype, original_dtype=original)
    for view in ("heatmap", "table", "line"):
        assert inspector.state.set_view(view)
        inspector.request_now()
        assert inspector.stack.currentWidget() is inspector.pages[view]
    assert inspector.state.set_view("table")
    inspector.request_now()
    model = inspector.table.array_model
    assert (model.rowCount(), model.columnCount()) == data.shape
    for (r, c), value in np.ndenumerate(data):
        assert model.data(model.index(r, c)) == format_value(value)
    if original:
        assert "bfloat16" in inspector.header.meta_line.text()
        assert "sent as float32" in inspector.header.meta_line.text()
    if name == "complex64":
        assert inspector.slicer.part_box.isVisibleTo(inspector)
        assert inspector.state.set_view("heatmap") and inspector.state.set_complex_part("imag")
        inspector.request_now()
        np.testing.assert_allclose(inspector.heatmap.values, data.imag)


def test_nan_and_inf_are_counted_and_do_not_break_the_colour_scale(inspector):
    data = np.array([[1.0, np.nan], [np.inf, -np.inf], [2.0, 3.0]], dtype=np.float32)
    show(inspector, data)
    legend = inspector.legend.text()
    assert "1 NaN" in legend and "1 +Inf" in legend and "1 −Inf" in legend
    assert inspector.heatmap.bar.levels() == (1.0, 3.0)
    assert inspector.heatmap.overlay.isVisible()


def test_nchw_tensor_shows_an_image_grid_of_tiles(inspector):
    data = np.random.default_rng(0).normal(size=(3, 2, 5, 6)).astype(np.float32)
    host = show(inspector, data)
    assert host.requests[-1][1] == ":, :, :, :"
    assert inspector.stack.currentWidget() is inspector.grid
    assert inspector.grid.tile_count == 6
    assert inspector.grid.mosaic.shape[:2] == (3 * 5 + 2, 2 * 6 + 1)
    big = np.zeros((20, 12, 4, 4), dtype=np.float32)
    show(inspector, big, ref="0:conv#2/out")
    assert inspector.grid.tile_count == 64     # 8 samples × 8 channels per page


def test_export_writes_valid_npy_and_csv(inspector, tmp_path):
    data = np.arange(12, dtype=np.float32).reshape(3, 4) / 7
    data[0, 0] = np.nan
    show(inspector, data)
    npy = inspector.export_npy(tmp_path / "slice.npy")
    np.testing.assert_array_equal(np.load(npy), data)
    csv = inspector.export_csv(tmp_path / "slice.csv")
    np.testing.assert_array_equal(np.loadtxt(csv, delimiter=",", dtype=np.float32), data)
    complex_data = np.array([1 + 2j, -3.5j], dtype=np.complex64)
    show(inspector, complex_data, ref="0:fft#1/out")
    path = inspector.export_csv(tmp_path / "c.csv")
    np.testing.assert_array_equal(np.loadtxt(path, dtype=np.complex64), complex_data)


def test_export_without_a_slice_says_why(inspector, tmp_path):
    with pytest.raises(RuntimeError, match="no slice"):
        inspector.export_npy(tmp_path / "x.npy")


def test_metadata_only_selection_shows_the_pause_hint_and_fetches_nothing(inspector, qtbot):
    requests = []
    inspector.tensor_requested.connect(lambda *a: requests.append(a))
    meta = tensor_meta("fc", shape=[4, 4], dtype="float32", device="cpu")
    inspector.show_tensor(None, meta, {"mean": 0.25, "nan": 0})
    assert inspector.stack.currentWidget() is inspector.empty
    assert HINT_NOT_PAUSED in inspector.empty.text()
    assert inspector.header.value_text("mean") == "0.25"
    inspector.slicer.sliders  # the slicer stays usable; still nothing is fetched
    qtbot.wait(150)
    assert requests == []


def test_failed_fetch_is_shown(inspector):
    requests = []
    inspector.tensor_requested.connect(lambda *a: requests.append(a))
    inspector.show_tensor(REF, tensor_meta("f", shape=[2], dtype="float32"), None)
    inspector.slice_failed("training resumed")
    assert "training resumed" in inspector.status.text()
    inspector.slice_received({"ref": REF, "slice": ":", "dtype": "float32", "shape": [2],
                              "data": b"short"})   # malformed: an error, not an exception
    assert inspector.state.received is None


def test_heatmap_hover_reads_out_index_and_value(inspector):
    data = np.arange(6, dtype=np.float32).reshape(2, 3)
    show(inspector, data)
    assert inspector.heatmap.describe(2.0, 1.0) == "[1, 2] = 5"
    assert inspector.heatmap.describe(2.6, 1.0) == ""          # past the last column
    body = make_body(data, REF, ":, :")
    assert body["shape"] == [2, 3]


def test_a_calls_tensors_are_offered_in_a_picker(inspector):
    x, y = np.ones((2, 3), dtype=np.float32), np.zeros((2, 4), dtype=np.float32)
    refs = {"0:fc#1/in[0]": x, "0:fc#1/out": y}
    host = ArrayHost(inspector, refs)
    inspector.test_host = host
    entries = [dict(tensor_meta(r.rsplit("/", 1)[-1], shape=list(a.shape), dtype="float32"), ref=r)
               for r, a in refs.items()]
    inspector.show_choices(entries, {"mean": 0.0})
    picker = inspector.header.picker
    assert picker.isVisibleTo(inspector) and picker.currentText() == "out"
    assert host.requests[-1][0] == "0:fc#1/out" and inspector.state.stats == {"mean": 0.0}
    picker.setCurrentIndex(picker.findText("in[0]"))
    picker.activated.emit(picker.currentIndex())
    assert host.requests[-1][0] == "0:fc#1/in[0]"
    np.testing.assert_array_equal(inspector.heatmap.values, x)
    inspector.show_tensor(None, tensor_meta("out", shape=[1], dtype="float32"), None)
    assert not picker.isVisibleTo(inspector)


def test_empty_and_scalar_tensors(inspector):
    requests = []
    inspector.tensor_requested.connect(lambda *a: requests.append(a))
    inspector.show_tensor("0:e#1/out", tensor_meta("e", shape=[3, 0], dtype="float32"), None)
    assert requests == [] and "Empty tensor" in inspector.empty.text()
    scalar = np.array(2.5, dtype=np.float32)
    show(inspector, scalar, ref="0:loss#1/out")
    body = make_body(scalar, "0:loss#1/out", "")
    body["shape"] = [1]                          # np.ascontiguousarray makes scalars 1-d
    inspector.request_now()
    inspector.slice_received(body)
    assert inspector.stack.currentWidget() is inspector.table
    assert inspector.table.array_model.data(inspector.table.array_model.index(0, 0)) == "2.5"


def test_switching_views_before_the_new_slice_arrives_never_breaks(inspector):
    data = np.random.default_rng(1).normal(size=(3, 8, 8)).astype(np.float32)
    host = show(inspector, data)
    inspector.tensor_requested.disconnect(host.answer)     # answers arrive later
    for view in ("grid", "line", "table", "heatmap", "grid"):
        assert inspector.state.set_view(view)               # old data redrawn meanwhile
    inspector.tensor_requested.connect(host.answer)
    inspector.request_now()
    assert inspector.stack.currentWidget() is inspector.grid and inspector.grid.tile_count == 3


def test_finite_only_statistics_show_only_for_a_tensor_with_nan_or_inf(inspector):
    meta = tensor_meta("fc", shape=[4], dtype="float32", device="cpu")
    header = inspector.header
    inspector.show_tensor(None, meta, {"min": float("nan"), "nan": 1, "inf": 0,
                                       "finite_min": 1.0, "finite_max": 3.0})
    assert header.value_text("min") == "nan" and header.value_text("finite_min") == "1"
    assert header.stat_names["finite_min"].isVisible()
    assert header.stat_names["finite_min"].text() == "finite min"   # the catalogue's label
    assert not header.stat_names["finite_std"].isVisible()          # not in these stats
    inspector.show_tensor(None, meta, {"min": 1.0, "nan": 0, "inf": 0, "finite_min": 1.0})
    assert not header.stat_names["finite_min"].isVisible()
    assert not header.stat_values["finite_min"].isVisible()


def test_a_calls_statistics_go_to_the_output_they_describe(inspector):
    """A call returning (mask, values): its captured statistics are of ``values``;
    the mask is shown with its own slice's statistics, not the values'."""
    mask, values = np.ones((2, 3), dtype=bool), np.full((2, 3), 4.0, dtype=np.float32)
    refs = {"0:fc#1/out[0]": mask, "0:fc#1/out[1]": values}
    inspector.test_host = ArrayHost(inspector, refs)
    entries = [dict(tensor_meta(r.rsplit("/", 1)[-1], shape=[2, 3], dtype=a.dtype.name), ref=r)
               for r, a in refs.items()]
    captured = {"mean": 4.0, "min": 4.0}
    inspector.show_choices(entries, captured)
    assert inspector.state.ref == "0:fc#1/out[0]" and inspector.state.stats != captured
    picker = inspector.header.picker
    picker.setCurrentIndex(picker.findText("out[1]"))
    picker.activated.emit(picker.currentIndex())
    assert inspector.state.ref == "0:fc#1/out[1]" and inspector.state.stats == captured


def test_a_long_module_path_does_not_widen_the_inspector(inspector):
    """The title elides in the middle and the hint wraps inside the path: the dock
    keeps the width the user gave it."""
    path = ".".join(["a_really_long_container_name_for_a_block"] * 4) + ".1234"
    before = inspector.minimumSizeHint().width()
    inspector.show_tensor(None, tensor_meta(f"{path}/out", shape=[2, 4], dtype="float32"),
                          {"mean": 0.5}, unavailable=f"No values for {path}: none kept")
    assert inspector.minimumSizeHint().width() <= max(before, 420)
    assert inspector.header.title.minimumSizeHint().width() < 100
    assert inspector.empty.minimumSizeHint().width() < 360
    assert inspector.header.title.text().startswith(path)
    assert inspector.empty.text() == f"No values for {path}: none kept"
    inspector.resize(360, 800)
    title = inspector.header.title
    assert title.width() <= 360 and path in title.toolTip()


def test_an_all_nan_line_says_so_and_marks_each_element(inspector):
    """An all-NaN 1-d slice drew bare axes: no line, no marker, no word."""
    data = np.array([np.nan, np.nan, np.inf, np.nan], dtype=np.float32)
    show(inspector, data)
    assert inspector.stack.currentWidget() is inspector.line
    assert inspector.line.marked() == {"NaN": [0, 1, 3], "+Inf": [2], "−Inf": []}
    assert inspector.line.note.isVisibleTo(inspector.line)
    assert "No finite value" in inspector.line.note.text()
    show(inspector, np.array([1.0, np.nan, 3.0], dtype=np.float32))   # a gap, marked
    assert inspector.line.marked()["NaN"] == [1]
    assert not inspector.line.note.isVisibleTo(inspector.line)


def test_finite_statistics_wrap_instead_of_widening_the_inspector(inspector, qtbot):
    """A tensor holding Inf added finite min/max/mean/std: four pairs of
    ``finite mean -8.525e-09`` a row asked for ~575 px, and the inspector's dock grew
    over the graph. The pairs go two a row where four do not fit, every one shown."""
    stats = {"min": float("-inf"), "max": float("inf"), "mean": float("nan"),
             "std": float("nan"), "norm": float("inf"), "zero_fraction": 0.0, "nan": 0,
             "inf": 12, "finite_min": -5.491e4, "finite_max": 5.501e4,
             "finite_mean": -8.525e-09, "finite_std": 3.642e4}
    array = np.full((4, 8), np.inf, dtype=np.float32)
    show(inspector, array)
    inspector.show_tensor(REF, tensor_meta("features.0", shape=[4, 8], dtype="float32",
                                           device="cpu"), stats)
    header = inspector.header
    assert header.minimumSizeHint().width() <= 340
    assert inspector.minimumSizeHint().width() <= 360
    inspector.resize(340, 800)
    qtbot.waitUntil(lambda: header.stats.columns == 2, timeout=5000)
    for name, value in header.stat_values.items():
        assert value.isVisible() and value.width() >= value.sizeHint().width(), name
        assert header.stats.rect().contains(value.geometry()), name
    inspector.resize(900, 800)   # room again: four a row
    qtbot.waitUntil(lambda: header.stats.columns == 4, timeout=5000)
    assert header.stats.height() < 4 * header.stat_values["min"].height()
    # the texts alone rearrange (no resize, no label shown or hidden)
    long = {k: -8.525e-09 for k in ("min", "max", "mean", "std", "norm")}
    header.set_tensor(REF, {}, long)
    inspector.resize(400, 800)
    qtbot.waitUntil(lambda: header.stats.columns == 2, timeout=5000)
    header.set_tensor(REF, {}, {k: 1.0 for k in ("min", "max", "mean", "std", "norm")})
    qtbot.waitUntil(lambda: header.stats.columns == 4, timeout=5000)
    for name in ("min", "max", "mean", "std"):
        value = header.stat_values[name]
        assert value.width() >= value.sizeHint().width(), name


def test_a_downsampled_slice_names_its_stride_as_an_ordinal(inspector):
    from tensorscope.ui.inspector.widget import ordinal
    assert [ordinal(n) for n in (2, 3, 4, 11, 12, 13, 21, 22, 101, 111)] == [
        "2nd", "3rd", "4th", "11th", "12th", "13th", "21st", "22nd", "101st", "111th"]
    logits = np.zeros((2, 32, 50257), dtype=np.float32)   # GPT-2's logits: too many to send
    show(inspector, logits)
    text = inspector.status.text()
    assert "every 3rd element" in text and "3th" not in text


def test_a_scalar_is_described_as_one_value_not_an_empty_slice(inspector):
    show(inspector, np.array(2.5, dtype=np.float32), ref="0:loss#1/out")
    assert inspector.status.text() == "a scalar (0-d tensor): its one value"


def test_the_axes_of_a_one_element_heatmap_read_plain_indices(inspector):
    show(inspector, np.ones((1, 1), dtype=np.float32))
    assert inspector.stack.currentWidget() is inspector.heatmap
    for name, label in (("left", "dim 0"), ("bottom", "dim 1")):
        axis = inspector.heatmap.plot.getAxis(name)
        assert axis.labelString().find("x0.001") < 0
        assert label in axis.labelString()


def test_the_image_grid_says_how_tiles_are_scaled_and_reads_a_pixel_on_hover(inspector):
    from tensorscope.ui.inspector.grid import SCALE_NOTE
    from tensorscope.ui.model.received import format_value
    data = np.random.default_rng(0).normal(size=(3, 2, 5, 6)).astype(np.float32)
    show(inspector, data)
    grid = inspector.grid
    assert grid.readout.isVisibleTo(inspector) and grid.readout.text() == SCALE_NOTE
    # tile (sample 2, channel 1), pixel (3, 4): tiles are 5×6 with a 1-pixel gap
    text = grid.describe(1 * 7 + 4.5, 2 * 6 + 3.5)
    assert text.startswith(f"[2, 1, 3, 4] = {format_value(data[2, 1, 3, 4])}")
    tile = data[2, 1]
    assert f"tile {format_value(tile.min())} … {format_value(tile.max())}" in text
    assert grid.describe(6.5, 0.5) == ""        # the gap between two tiles
    assert grid.describe(-1.0, 0.5) == ""
    frames = np.arange(10 * 4 * 4, dtype=np.float32).reshape(10, 4, 4)   # T×H×W: 4 a row
    show(inspector, frames, ref="0:video#1/out")
    assert inspector.state.set_view("grid")
    inspector.request_now()
    assert inspector.stack.currentWidget() is grid and grid.tile_count == 10
    assert grid.describe(1 * 5 + 2.5, 1 * 5 + 0.5).startswith(
        f"[5, 0, 2] = {format_value(frames[5, 0, 2])}")


def test_an_exploded_tensors_histogram_reads_its_exponent_on_the_ticks(inspector, qtbot):
    """-6.5e+35 read '-6e+08' under '(x1e+27)': pyqtgraph ran out of SI prefixes."""
    exploded = -np.linspace(5e34, 6.5e35, 16, dtype=np.float32).reshape(16, 1)
    show(inspector, exploded)
    axis = inspector.header.hist.getPlotItem().getAxis("bottom")
    qtbot.waitUntil(lambda: axis.range[0] < -1e35, timeout=2000)
    axis.updateAutoSIPrefix()
    assert "x1e" not in axis.labelString()
    ticks = [t for _spacing, values in axis.tickValues(*axis.range, 300) for t in values]
    assert any("e+35" in s for s in axis.tickStrings(ticks, axis.autoSIPrefixScale, 1e35))
    show(inspector, np.linspace(-7e-6, 9e-6, 64, dtype=np.float32).reshape(8, 8))
    qtbot.waitUntil(lambda: axis.range[1] < 1e-4, timeout=2000)
    axis.updateAutoSIPrefix()
    assert "(x1e-06)" in axis.labelString()   # small gradients keep their scale


def test_the_colour_bar_has_room_for_its_labels_at_any_magnitude(inspector):
    """pyqtgraph's 45 px colour-bar axis dropped labels wider than it: a 1e+07 slice's
    bar read '0' alone, an exploded 1e+35 one nothing."""
    from PySide6.QtGui import QFontMetricsF
    for scale in (1e7, 1e35, 1.0):
        data = np.random.default_rng(0).normal(size=(8, 8)).astype(np.float32) * scale
        show(inspector, data)
        axis = inspector.heatmap.bar.axis
        lo, hi = axis.range
        levels = axis.tickValues(lo, hi, 200)
        font = axis.style.get("tickFont") or axis.font()
        widest = max(QFontMetricsF(font).horizontalAdvance(t) for spacing, values in levels[:1]
                     for t in axis.tickStrings(values, 1.0, spacing))
        assert axis.width() >= widest + 10


def test_a_line_plots_x_axis_names_whole_indices_only(inspector):
    """A 4-element slice's x axis read '0 0.5 1 1.5 2 2.5 3': elements 0.5 do not exist."""
    show(inspector, np.array([0.2, 0.6, 1.5, 1.4], dtype=np.float32))
    assert inspector.stack.currentWidget() is inspector.line
    axis = inspector.line.plot.getAxis("bottom")
    lo, hi = axis.range
    ticks = [v for _spacing, values in axis.tickValues(lo, hi, 300) for v in values]
    assert ticks and all(float(v).is_integer() and 0 <= v <= 3 for v in ticks)
    assert axis.tickStrings(ticks, 1.0, 1.0) == [str(int(v)) for v in ticks]


def test_a_softmaxs_histogram_reads_plain_fractions(inspector, qtbot):
    """Values of 0.15 to 0.42 read '200 250 300' under '(x0.001)'."""
    probs = np.linspace(0.15, 0.42, 64, dtype=np.float32).reshape(16, 4)
    show(inspector, probs)
    axis = inspector.header.hist.getPlotItem().getAxis("bottom")
    qtbot.waitUntil(lambda: 0.4 < axis.range[1] < 0.5, timeout=2000)
    axis.updateAutoSIPrefix()
    assert "x0.001" not in axis.labelString() and axis.autoSIPrefixScale == 1.0
    show(inspector, np.linspace(-3e20, 2e20, 64, dtype=np.float32).reshape(8, 8))
    qtbot.waitUntil(lambda: axis.range[1] > 1e20, timeout=2000)
    axis.updateAutoSIPrefix()
    assert "x1e+18" not in axis.labelString()   # '2e+20' on the ticks, as on the colour bar
