"""``train_mode_in_eval`` for a validation loop that forgot both ``model.eval()`` and
``torch.no_grad()``: forwards whose graphs no backward used, batch after batch
(``grad_tracking_in_inference``), with Dropout/BatchNorm in training mode."""
from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

import tensorscope
from sinks import FindingSink


def _run(eval_call: bool, no_grad: bool, mc_dropout: bool = False) -> set:
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(6, 16), nn.BatchNorm1d(16), nn.ReLU(), nn.Dropout(0.3),
                          nn.Linear(16, 3), nn.Dropout(0.1))
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    w = tensorscope.watch(model, opt, connect=False)
    sink = FindingSink()
    w.session.add_sink(sink)
    for _ in range(2):
        model.train()
        for _ in range(4):
            opt.zero_grad()
            F.cross_entropy(model(torch.randn(8, 6)), torch.randint(0, 3, (8,))).backward()
            opt.step()
        if eval_call:
            model.eval()
        if mc_dropout:   # the model in eval mode, one dropout switched back on
            model[3].train()
        with torch.no_grad() if no_grad else torch.enable_grad():
            val = sum(F.cross_entropy(model(torch.randn(8, 6)), torch.randint(0, 3, (8,))).item()
                      for _ in range(4))
        assert val > 0
    w.close()
    return {k for k in sink.findings if k[0] == "train_mode_in_eval"}


def test_validation_without_eval_nor_no_grad_names_the_train_mode_layers() -> None:
    assert _run(eval_call=False, no_grad=False) == {
        ("train_mode_in_eval", "1"), ("train_mode_in_eval", "3"), ("train_mode_in_eval", "5")}


def test_validation_in_eval_mode_without_no_grad_is_only_grad_tracking() -> None:
    assert not _run(eval_call=True, no_grad=False)
    assert not _run(eval_call=True, no_grad=False, mc_dropout=True)
    assert not _run(eval_call=True, no_grad=True)
