"""``sampler_epoch_not_set``: a shuffling ``DistributedSampler`` that never gets ``set_epoch``."""
from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.data import DataLoader, TensorDataset
from torch.utils.data.distributed import DistributedSampler

import tensorscope
from sinks import FindingSink


def _train(set_epoch: bool, shuffle: bool = True, peek: bool = False,
           epochs: int = 3) -> tuple[set[tuple[str, str]], list[list[int]]]:
    """Train over a rank's shard (rank 0 of 2, no process group needed); the kinds
    found and each epoch's first batch of labels."""
    torch.manual_seed(0)
    data = TensorDataset(torch.randn(64, 6), torch.arange(64))
    sampler = DistributedSampler(data, num_replicas=2, rank=0, shuffle=shuffle, seed=1)
    loader = DataLoader(data, batch_size=8, sampler=sampler)
    model = nn.Linear(6, 64)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    w = tensorscope.watch(model, opt, connect=False)
    sink = FindingSink()
    w.session.add_sink(sink)
    if peek:   # a look at one batch before training
        next(iter(loader))
    firsts = []
    for epoch in range(epochs):
        if set_epoch:
            sampler.set_epoch(epoch)
        for i, (x, y) in enumerate(loader):
            if i == 0:
                firsts.append(y.tolist())
            opt.zero_grad()
            F.cross_entropy(model(x), y).backward()
            opt.step()
    w.close()
    assert not getattr(DistributedSampler.__iter__, "__tensorscope_wrapped__", False)
    assert not getattr(DataLoader.__iter__, "__tensorscope_wrapped__", False)   # both put back
    return {k for k in sink.findings if k[0] == "sampler_epoch_not_set"}, firsts


def test_a_sampler_without_set_epoch_is_found() -> None:
    found, firsts = _train(set_epoch=False, peek=True)
    assert found == {("sampler_epoch_not_set", "")}
    assert firsts[0] == firsts[1] == firsts[2]   # the mistake itself: one order, every epoch


def test_set_epoch_a_peek_or_no_shuffle_is_not() -> None:
    found, firsts = _train(set_epoch=True, peek=True)
    assert found == set() and firsts[0] != firsts[1]
    assert _train(set_epoch=False, shuffle=False)[0] == set()   # an evaluation sampler
    assert _train(set_epoch=False, epochs=1, peek=True)[0] == set()   # one epoch after a peek


def test_the_order_is_unchanged_under_the_watch() -> None:
    torch.manual_seed(0)
    data = TensorDataset(torch.arange(20))
    plain = list(DistributedSampler(data, num_replicas=2, rank=1, seed=3))
    model = nn.Linear(1, 1)
    with tensorscope.watch(model, torch.optim.SGD(model.parameters(), lr=0.1), connect=False):
        watched = list(DistributedSampler(data, num_replicas=2, rank=1, seed=3))
    assert watched == plain


def test_which_loaders_give_every_rank_the_whole_dataset() -> None:
    from tensorscope.hooks.diagnostics.samplers import unsharded

    data = TensorDataset(torch.randn(8, 2))
    assert unsharded(DataLoader(data, batch_size=2, shuffle=True))
    assert not unsharded(DataLoader(data, sampler=DistributedSampler(data, 2, 0)))

    class Stream(torch.utils.data.IterableDataset):   # may shard itself by rank
        def __iter__(self):
            return iter(range(4))

    assert not unsharded(DataLoader(Stream()))

    class Loader(DataLoader):   # a subclass (Accelerate's shard their batches)
        pass

    assert not unsharded(Loader(data))
