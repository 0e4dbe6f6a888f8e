"""The inspector against real bodies from ``tensorscope.training.slice_encode.encode_slice`` (torch tensors)."""
from __future__ import annotations

import numpy as np
import pytest

from tensorscope.common.tensors import tensor_meta
from tensorscope.ui.inspector import TensorInspector

torch = pytest.importorskip("torch")
from tensorscope.training.slice_encode import encode_slice  # noqa: E402  (after the torch check)

TENSORS = {
    "bool": lambda: torch.tensor([[True, False, True], [False, False, True]]),
    "int8": lambda: torch.arange(-3, 3, dtype=torch.int8).reshape(2, 3),
    "int64": lambda: torch.arange(6, dtype=torch.int64).reshape(2, 3) * 2**40,
    "float16": lambda: torch.tensor([[0.5, float("nan"), -2.0], [1e4, 0.0, 3.0]],
                                    dtype=torch.float16),
    "bfloat16": lambda: torch.tensor([[1.0, 2.5, -0.125], [3.0, 4.0, 5.0]],
                                     dtype=torch.bfloat16),
    "complex64": lambda: torch.tensor([[1 + 2j, -1j, 3], [0, 1, 2j]], dtype=torch.complex64),
}


@pytest.mark.parametrize("name", list(TENSORS))
def test_real_slices_of_every_dtype_render_with_exact_values(qtbot, name):
    tensor = TENSORS[name]()
    inspector = TensorInspector()
    qtbot.addWidget(inspector)
    ref = f"0:layer#1/{name}"
    answer = lambda r, text, limit: inspector.slice_received(  # noqa: E731
        encode_slice(tensor, text, ref=r, max_elements=limit))
    inspector.tensor_requested.connect(answer)
    meta = tensor_meta(name, shape=list(tensor.shape), dtype=str(tensor.dtype)[6:], device="cpu")
    inspector.show_tensor(ref, meta, None)
    assert inspector.state.received is not None, inspector.state.status
    expected = tensor.float().numpy() if name == "bfloat16" else tensor.numpy()
    np.testing.assert_array_equal(inspector.state.as_array(), expected)
    for view in ("heatmap", "table", "line"):
        assert inspector.state.set_view(view)
        inspector.request_now()
        assert inspector.stack.currentWidget() is inspector.pages[view]
    if name == "bfloat16":
        assert "bfloat16" in inspector.header.meta_line.text()
        assert "sent as float32" in inspector.header.meta_line.text()
    assert inspector.header.value_text("max") != "–"      # whole-tensor stats came with the body
