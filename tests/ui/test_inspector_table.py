"""The inspector's numbers table: columns fit their text without asking for every cell."""
from __future__ import annotations

import numpy as np

from tensorscope.ui.inspector.table import ArrayTableView
from tensorscope.ui.model.received import format_value


def test_columns_fit_their_widest_number_without_reading_every_cell_through_qt(qtbot):
    view = ArrayTableView()
    qtbot.addWidget(view)
    view.resize(400, 300)
    view.show()
    rng = np.random.default_rng(0)
    table = (rng.normal(size=(140, 140)) * 10.0 ** rng.integers(-8, 8, (140, 140))
             ).astype(np.float32)
    model = view.array_model
    calls = []
    original = model.data
    model.data = lambda index, role=0: (calls.append(role), original(index, role))[1]
    view.set_array(table)
    # Qt's resizeColumnsToContents asked for ~8 roles of all 19600 cells (2 s frozen)
    assert len(calls) < 1000
    metrics = view.fontMetrics()
    for col in range(table.shape[1]):
        widest = max(metrics.horizontalAdvance(format_value(v)) for v in table[:, col])
        assert view.columnWidth(col) > widest
