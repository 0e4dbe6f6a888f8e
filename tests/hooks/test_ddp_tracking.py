"""DDP wrappers built while watched are noted (``hooks.registry.track_ddp``) and the
class is left as it was after detach."""
from __future__ import annotations

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP

import tensorscope
from sinks import FindingSink
from tensorscope.hooks.registry import built_ddp_wrappers, synced_parameters


def test_a_wrapper_built_while_watched_is_noted_and_the_class_restored(tmp_path) -> None:
    original = DDP.__init__
    dist.init_process_group("gloo", init_method=f"file://{tmp_path / 'store'}", rank=0,
                            world_size=1)
    try:
        torch.manual_seed(0)
        inner = nn.Linear(4, 2)
        opt = torch.optim.SGD(inner.parameters(), lr=0.1)
        w = tensorscope.watch(inner, opt, connect=False)
        sink = FindingSink()
        w.session.add_sink(sink)
        model = DDP(inner)
        assert DDP.__init__ is not original
        assert model in built_ddp_wrappers()
        assert {id(p) for p in inner.parameters()} <= synced_parameters([inner])
        before = [p.detach().clone() for p in inner.parameters()]
        for _ in range(3):   # one rank: going around the wrapper changes nothing
            opt.zero_grad()
            F.mse_loss(model.module(torch.randn(8, 4)), torch.zeros(8, 2)).backward()
            opt.step()
        w.close()
        assert DDP.__init__ is original
        assert not [k for k in sink.findings if k[0] == "ddp_bypassed"]
        assert any(not torch.equal(a, b) for a, b in zip(before, inner.parameters()))
    finally:
        dist.destroy_process_group()
