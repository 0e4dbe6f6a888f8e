"""``softmax_dim`` for a cross-entropy whose classes are not at dimension 1: ``[N, T, C]``
logits from a linear layer (silent in PyTorch when T == C, or with probability targets
of the same shape), and probability targets with the classes last (``F.one_hot``)."""
from __future__ import annotations

from typing import Callable

import torch
import torch.nn.functional as F
from torch import nn

import tensorscope
from sinks import FindingSink

IMPORTED_CE = F.cross_entropy   # taken before any watch wraps it: seen only in the graph


class Tagger(nn.Module):
    """Per-token scores ``[N, T, C]``: a GRU, then a linear head (classes last)."""

    def __init__(self, classes: int) -> None:
        super().__init__()
        self.emb = nn.Embedding(20, 8)
        self.rnn = nn.GRU(8, 16, batch_first=True)
        self.head = nn.Linear(16, classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.rnn(self.emb(x))[0])


def _train(model: nn.Module, loss: Callable[[torch.Tensor], torch.Tensor],
           make_input: Callable[[], torch.Tensor]) -> set:
    torch.manual_seed(0)
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    w = tensorscope.watch(model, opt, connect=False)
    sink = FindingSink()
    w.session.add_sink(sink)
    for _ in range(3):
        opt.zero_grad()
        loss(model(make_input())).backward()
        opt.step()
    w.close()
    return {k for k in sink.findings if k[0] in ("softmax_dim", "loss_broadcast")}


def _tokens() -> torch.Tensor:
    return torch.randint(0, 20, (4, 6))


def test_sequence_logits_with_classes_last_are_named_at_the_head() -> None:
    """T == C: PyTorch takes dimension 1 (the positions) as the classes without error."""
    y = torch.randint(0, 6, (4, 6))
    for ce in (nn.CrossEntropyLoss(), F.cross_entropy, IMPORTED_CE,
               lambda z, t: F.nll_loss(F.log_softmax(z, 1), t)):
        got = _train(Tagger(6), lambda z: ce(z, y), _tokens)
        assert got == {("softmax_dim", "head")}, ce
    # probability targets of the same shape: silent whatever T is
    p = torch.softmax(torch.randn(4, 6, 3), -1)
    assert _train(Tagger(3), lambda z: F.cross_entropy(z, p), _tokens) == {
        ("softmax_dim", "head")}


def test_sequence_log_probabilities_with_classes_last_into_nll() -> None:
    """``nn.LogSoftmax(dim=-1)`` over [N, T, C] scores, then NLLLoss as they are (T == C):
    the loss reads dimension 1 as the classes."""
    y = torch.randint(0, 6, (4, 6))
    model = nn.Sequential(Tagger(6), nn.LogSoftmax(dim=-1))
    assert _train(model, lambda z: F.nll_loss(z, y), _tokens) == {("softmax_dim", "1")}
    model = nn.Sequential(Tagger(6), nn.LogSoftmax(dim=-1))
    assert not _train(model, lambda z: F.nll_loss(z.transpose(1, 2), y), _tokens)


def test_log_softmax_over_positions_then_flattened_is_named_once() -> None:
    """``F.log_softmax(z, dim=1)`` of [N, T, C] scores (over the positions), flattened to
    [N * T, C] for the NLL loss: one finding, at the log-softmax; the loss itself takes
    the classes last (no second finding at the head saying it reads dimension 1)."""
    y = torch.randint(0, 5, (4, 6))
    got = _train(Tagger(5), lambda z: F.nll_loss(F.log_softmax(z, 1).reshape(-1, 5),
                                                 y.reshape(-1)), _tokens)
    assert got == {("softmax_dim", "")}


def test_sequence_logits_with_the_classes_moved_are_silent() -> None:
    y = torch.randint(0, 6, (4, 6))
    onehot = F.one_hot(y, 6).float()
    for loss in (lambda z: F.cross_entropy(z.transpose(1, 2), y),
                 lambda z: F.cross_entropy(z.permute(0, 2, 1), onehot.permute(0, 2, 1)),
                 lambda z: nn.CrossEntropyLoss(label_smoothing=0.1)(z.reshape(-1, 6),
                                                                    y.reshape(-1)),
                 lambda z: F.nll_loss(F.log_softmax(z, -1).reshape(-1, 6), y.reshape(-1))):
        assert not _train(Tagger(6), loss, _tokens)


def test_convolution_logits_are_classes_first() -> None:
    """A convolution's channels are dimension 1: segmentation, frame classification."""
    seg = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.ReLU(), nn.Conv2d(8, 5, 1))
    y = torch.randint(0, 5, (2, 5, 5))
    assert not _train(seg, lambda z: F.cross_entropy(z, y), lambda: torch.randn(2, 3, 5, 5))
    frames = nn.Conv1d(2, 5, 3, padding=1)
    soft = torch.softmax(torch.randn(2, 5, 5), 1)   # probabilities over dimension 1
    assert not _train(frames, lambda z: F.cross_entropy(z, soft), lambda: torch.randn(2, 2, 5))


class LabelScores(nn.Module):
    """[N, C, T] scores from a batched product of class embeddings and the GRU states."""

    def __init__(self) -> None:
        super().__init__()
        self.emb = nn.Embedding(20, 8)
        self.rnn = nn.GRU(8, 8, batch_first=True)
        self.classes = nn.Parameter(torch.randn(6, 8))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.rnn(self.emb(x))[0]
        return torch.bmm(self.classes.expand(x.shape[0], -1, -1), h.transpose(1, 2))


def test_a_batched_product_may_put_the_classes_at_dimension_1() -> None:
    y = torch.randint(0, 6, (4, 6))
    assert not _train(LabelScores(), lambda z: F.cross_entropy(z, y), _tokens)


def test_one_hot_targets_with_classes_last_are_named() -> None:
    """[N, C, T] logits (a Conv1d) against F.one_hot(y, C): [N, T, C], T == C."""
    frames = nn.Sequential(nn.Conv1d(2, 8, 3, padding=1), nn.ReLU(), nn.Conv1d(8, 5, 1))
    y = torch.randint(0, 5, (2, 5))
    got = _train(frames, lambda z: nn.CrossEntropyLoss()(z, F.one_hot(y, 5).float()),
                 lambda: torch.randn(2, 2, 5))
    assert got == {("softmax_dim", "2")}
    assert not _train(frames, lambda z: F.cross_entropy(z, F.one_hot(y, 5).float().movedim(
        -1, 1)), lambda: torch.randn(2, 2, 5))
