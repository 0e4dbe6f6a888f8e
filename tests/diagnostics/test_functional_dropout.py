"""``train_mode_in_eval`` for functional dropout that ``model.eval()`` cannot reach."""
from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

import tensorscope
from sinks import Log


class Net(nn.Module):
    def __init__(self, how: str) -> None:
        super().__init__()
        self.fc1, self.fc2, self.how = nn.Linear(6, 16), nn.Linear(16, 2), how
        self.drop = nn.Dropout(0.5)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = torch.relu(self.fc1(x))
        if self.how == "default":          # the mistake: training defaults to True
            h = F.dropout(h, 0.5)
        elif self.how == "keyword_p":
            h = F.dropout(h, p=0.3)
        elif self.how == "follows":
            h = F.dropout(h, 0.5, training=self.training)
        elif self.how == "mc":             # Monte Carlo dropout: on by intent
            h = F.dropout(h, 0.5, True)
        elif self.how == "zero":
            h = F.dropout(h, 0.0)
        elif self.how == "module":
            h = self.drop(h)
        return self.fc2(h)


def _run(how: str, evaluate: bool = True) -> tuple[set, list[float]]:
    torch.manual_seed(0)
    model = Net(how)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    x, y = torch.randn(8, 6), torch.randint(0, 2, (8,))
    log = Log()
    outs: list[float] = []
    with tensorscope.watch(model, opt, connect=False) as w:
        w.session.add_sink(log)
        for _ in range(2):
            opt.zero_grad()
            F.cross_entropy(model(x), y).backward()
            opt.step()
        if evaluate:
            model.eval()
        with torch.no_grad():
            outs = model(x).flatten().tolist()
    return log.kinds, outs


def test_functional_dropout_left_on_in_eval_is_named_at_its_module():
    kinds, _ = _run("default")
    assert ("train_mode_in_eval", "") in kinds
    kinds, _ = _run("keyword_p")
    assert ("train_mode_in_eval", "") in kinds


def test_dropout_that_follows_the_mode_or_is_on_by_intent_is_left_alone():
    for how in ("follows", "mc", "zero", "module"):
        kinds, _ = _run(how)
        assert not {k for k in kinds if k[0] == "train_mode_in_eval"}, how
    kinds, _ = _run("default", evaluate=False)   # training mode throughout: nothing wrong
    assert not {k for k in kinds if k[0] == "train_mode_in_eval"}


def test_the_wrapper_changes_no_number_and_is_removed_on_detach():
    original = F.dropout
    _kinds, watched = _run("default")
    assert F.dropout is original
    torch.manual_seed(0)
    model = Net("default")
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    x, y = torch.randn(8, 6), torch.randint(0, 2, (8,))
    for _ in range(2):
        opt.zero_grad()
        F.cross_entropy(model(x), y).backward()
        opt.step()
    model.eval()
    with torch.no_grad():
        plain = model(x).flatten().tolist()
    assert watched == plain
