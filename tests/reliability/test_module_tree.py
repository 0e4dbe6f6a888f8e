"""Item 10 and the module-tree row of the hardening issue: a model that adds or replaces a
layer between steps re-emits its module tree, so the report and the GUI show the new
layers' parameters and configuration."""
from __future__ import annotations

import torch
from torch import nn

from tensorscope.common.events import ModuleTree
from tensorscope.hooks.watch import Watch
from tensorscope.training.report import ReportBuilder
from sinks import Log


class Net(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.body = nn.Sequential(nn.Linear(4, 4), nn.ReLU())
        self.head = nn.Linear(4, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.body(x))


def _nodes(tree: dict, out: dict) -> dict:
    """Every module entry of a tree or report root by path (nested or flat lists)."""
    out[tree.get("path", "")] = tree
    for child in tree.get("modules", []):
        _nodes(child, out)
    return out


def test_a_layer_added_between_steps_appears_in_the_tree_and_report(tmp_path):
    torch.manual_seed(0)
    net = Net()
    opt = torch.optim.SGD(net.parameters(), lr=0.1)
    report = ReportBuilder(str(tmp_path / "r.json"))
    w = Watch([], None, global_hooks=True, connect=False)
    log = Log()
    w.session.add_sink(log)
    w.session.add_sink(report)
    with w:
        for step in range(5):
            if step == 2:
                net.body.append(nn.Linear(4, 4))
                net.head = nn.Linear(4, 2)
                opt.add_param_group({"params": [*net.body[2].parameters(),
                                                *net.head.parameters()]})
            loss = net(torch.ones(2, 4)).pow(2).mean()
            opt.zero_grad()
            loss.backward()
            opt.step()
    trees = [m for m in log.messages if isinstance(m, ModuleTree)]
    last = trees[-1].roots[0]
    assert len(trees) >= 2, "the changed tree is emitted again"
    paths = _nodes(last, {})
    assert "body.2" in paths and paths["body.2"]["params"] == 20
    data = report.build()
    net_root = next(r for r in data["roots"] if r["type"] == "Net")
    shown = _nodes(net_root, {})
    assert shown["body.2"]["params"] == 20 and shown["body.2"]["config"]
    assert shown["head"]["params"] == 10
