"""Small models with known structure, and a helper that records events."""
from __future__ import annotations

from collections import namedtuple
from typing import Any

import torch
from torch import nn

import tensorscope
from tensorscope.common.events import GraphStructure, StepSummary
from tensorscope.common.step_calls import SignatureTable, is_call


class EventLog:
    """A session sink that keeps every message."""

    def __init__(self) -> None:
        self.messages: list[Any] = []
        self.closed = False

    def handle(self, msg: Any) -> None:
        self.messages.append(msg)

    def close(self) -> None:
        self.closed = True

    def of(self, cls: type) -> list[Any]:
        return [m for m in self.messages if isinstance(m, cls)]

    def digests(self, step: int | None = None) -> list[Any]:
        """Every module call, as rows of the steps' ``StepCalls`` (or ``CallDigest``)."""
        rows = SignatureTable().expand(self.messages)
        return [d for d in rows if is_call(d) and (step is None or d.step == step)]

    def summaries(self) -> list[StepSummary]:
        return self.of(StepSummary)

    def graphs(self, kind: str) -> list[GraphStructure]:
        return [g for g in self.of(GraphStructure) if g.kind == kind]


def watch(model: Any, optimizer: Any = None, **options: Any) -> tuple[Any, EventLog]:
    """``tensorscope.watch`` with an EventLog attached (no live links)."""
    options.setdefault("connect", False)
    w = tensorscope.watch(model, optimizer, **options)
    log = EventLog()
    w.session.add_sink(log)
    return w, log


class Classifier(nn.Module):
    """MLP 784-128-64-10."""

    def __init__(self) -> None:
        super().__init__()
        self.network = nn.Sequential(nn.Linear(784, 128), nn.ReLU(), nn.Linear(128, 64),
                                     nn.ReLU(), nn.Linear(64, 10))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.network(x)


class ConvNet(nn.Module):
    """Conv-BN-ReLU-pool, dropout, linear head; input 3x16x16."""

    def __init__(self) -> None:
        super().__init__()
        self.features = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8),
                                      nn.ReLU(), nn.MaxPool2d(2))
        self.dropout = nn.Dropout(0.5)
        self.fc = nn.Linear(8 * 8 * 8, 5)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc(self.dropout(torch.flatten(self.features(x), 1)))


class Residual(nn.Module):
    """out = relu(bn(conv2(relu(conv1(x)))) + x)."""

    def __init__(self, c: int = 4) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(c, c, 3, padding=1)
        self.conv2 = nn.Conv2d(c, c, 3, padding=1)
        self.bn = nn.BatchNorm2d(c)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = torch.relu(self.conv1(x))
        return torch.relu(self.bn(self.conv2(h)) + x)


class Encoder(nn.Module):
    """TransformerEncoder (d=16, 2 layers) called with a padding mask keyword."""

    def __init__(self) -> None:
        super().__init__()
        layer = nn.TransformerEncoderLayer(16, 2, 32, dropout=0.0, batch_first=True)
        self.encoder = nn.TransformerEncoder(layer, 2, enable_nested_tensor=False)
        self.head = nn.Linear(16, 3)

    def forward(self, x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        return self.head(self.encoder(x, src_key_padding_mask=mask).mean(dim=1))


class Recurrent(nn.Module):
    """An LSTM returning ``(out, (h, c))`` and a linear head on the last step."""

    def __init__(self) -> None:
        super().__init__()
        self.lstm = nn.LSTM(6, 5, batch_first=True)
        self.head = nn.Linear(5, 2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out, (h, c) = self.lstm(x)
        return self.head(out[:, -1])


Output = namedtuple("Output", ["logits", "hidden"])


class DictNet(nn.Module):
    """Returns a dict with logits, a namedtuple, a None and an int; and the loss."""

    def __init__(self) -> None:
        super().__init__()
        self.body = nn.Linear(4, 3)

    def forward(self, x: torch.Tensor, y: torch.Tensor) -> dict[str, Any]:
        logits = self.body(x)
        loss = nn.functional.cross_entropy(logits, y)
        return {"logits": logits, "extra": Output(logits, None), "n": 3, "loss": loss}


class Twice(nn.Module):
    """The same Linear applied twice."""

    def __init__(self) -> None:
        super().__init__()
        self.shared = nn.Linear(4, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.shared(torch.tanh(self.shared(x)))


class InplaceNet(nn.Module):
    """Linear followed by ReLU(inplace=True)."""

    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(4, 8)
        self.act = nn.ReLU(inplace=True)
        self.out = nn.Linear(8, 2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.out(self.act(self.fc(x)))


class Broken(nn.Module):
    """classifier.0 expects 1568 features and gets 2048."""

    def __init__(self) -> None:
        super().__init__()
        self.features = nn.Flatten()
        self.classifier = nn.Sequential(nn.Linear(1568, 64), nn.ReLU(), nn.Linear(64, 10))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.classifier(self.features(x))


def train_steps(model: nn.Module, opt: torch.optim.Optimizer, batches: list[tuple[Any, Any]],
                loss_fn: nn.Module | None = None) -> list[float]:
    """Plain training loop; returns the losses."""
    loss_fn = loss_fn or nn.CrossEntropyLoss()
    losses = []
    for x, y in batches:
        opt.zero_grad()
        loss = loss_fn(model(x), y)
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return losses
