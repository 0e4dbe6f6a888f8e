"""Models people train, built from transformers' config classes with random weights
(no downloads: ``HF_HUB_OFFLINE=1``), and their graphs as TensorScope's own capture
sees them. Used by ``gui_scale.py --section models`` and ``docs/make_model_screenshots.py``.

* ``gpt2``: a 12-layer GPT-2 (``GPT2Config``/``GPT2LMHeadModel``, 64 wide);
* ``resnet50``: a ResNet-50-shaped net (``ResNetConfig``/``ResNetForImageClassification``,
  bottleneck blocks [3, 4, 6, 3], narrow);
* ``gpt2_plain`` / ``resnet_plain``: plain-PyTorch copies of the same shapes (no
  transformers needed).
"""
from __future__ import annotations

import os
from typing import Any, Callable

os.environ.setdefault("HF_HUB_OFFLINE", "1")

Batch = Callable[[], tuple[tuple, dict]]


def gpt2() -> tuple[Any, Batch]:
    """A 12-layer GPT-2 LM with random weights; batches of token ids (labels = inputs)."""
    import torch
    from transformers import GPT2Config, GPT2LMHeadModel
    torch.manual_seed(0)
    model = GPT2LMHeadModel(GPT2Config(n_layer=12, n_embd=64, n_head=4, vocab_size=500,
                                       n_positions=64, bos_token_id=0, eos_token_id=0))

    def batch() -> tuple[tuple, dict]:
        ids = torch.randint(0, 500, (2, 32))
        return (), {"input_ids": ids, "labels": ids}
    return model, batch


def resnet50() -> tuple[Any, Batch]:
    """A ResNet-50-shaped classifier with random weights; batches of 64×64 images."""
    import torch
    from transformers import ResNetConfig, ResNetForImageClassification
    torch.manual_seed(0)
    model = ResNetForImageClassification(ResNetConfig(
        embedding_size=16, hidden_sizes=[32, 64, 128, 256], depths=[3, 4, 6, 3],
        layer_type="bottleneck", num_labels=10))

    def batch() -> tuple[tuple, dict]:
        return (), {"pixel_values": torch.randn(2, 3, 64, 64),
                    "labels": torch.randint(0, 10, (2,))}
    return model, batch


def gpt2_plain() -> tuple[Any, Batch]:
    """GPT-2's shape in plain PyTorch: embeddings, 12 pre-norm blocks fed position ids,
    a final norm and a head; the loss is the model's own."""
    import torch
    from torch import nn

    class Block(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.ln_1, self.ln_2 = nn.LayerNorm(64), nn.LayerNorm(64)
            self.attn = nn.MultiheadAttention(64, 4, batch_first=True)
            self.mlp = nn.Sequential(nn.Linear(64, 256), nn.GELU(), nn.Linear(256, 64))

        def forward(self, x, position_ids):
            h = self.ln_1(x)
            causal = position_ids[0][None, :] > position_ids[0][:, None]
            x = x + self.attn(h, h, h, attn_mask=causal, need_weights=False)[0]
            return x + self.mlp(self.ln_2(x))

    class TinyGPT(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.wte, self.wpe = nn.Embedding(500, 64), nn.Embedding(64, 64)
            self.h = nn.ModuleList(Block() for _ in range(12))
            self.ln_f = nn.LayerNorm(64)
            self.lm_head = nn.Linear(64, 500, bias=False)

        def forward(self, input_ids, labels):
            pos = torch.arange(input_ids.shape[1])[None]
            x = self.wte(input_ids) + self.wpe(pos)
            for block in self.h:
                x = block(x, pos)
            logits = self.lm_head(self.ln_f(x))
            return nn.functional.cross_entropy(logits.flatten(0, 1), labels.flatten())

    torch.manual_seed(0)

    def batch() -> tuple[tuple, dict]:
        ids = torch.randint(0, 500, (2, 32))
        return (), {"input_ids": ids, "labels": ids}
    return TinyGPT(), batch


def resnet_plain() -> tuple[Any, Batch]:
    """A ResNet-50-shaped net in plain PyTorch, HF's block: ``out += shortcut(x)``."""
    import torch
    from torch import nn

    class Bottleneck(nn.Module):
        def __init__(self, cin: int, cout: int, stride: int) -> None:
            super().__init__()
            mid = cout // 4
            self.layer = nn.Sequential(
                nn.Conv2d(cin, mid, 1, bias=False), nn.BatchNorm2d(mid), nn.ReLU(),
                nn.Conv2d(mid, mid, 3, stride, 1, bias=False), nn.BatchNorm2d(mid), nn.ReLU(),
                nn.Conv2d(mid, cout, 1, bias=False), nn.BatchNorm2d(cout), nn.Identity())
            self.shortcut = (nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False),
                                           nn.BatchNorm2d(cout))
                             if cin != cout or stride != 1 else nn.Identity())
            self.activation = nn.ReLU()

        def forward(self, x):
            out = self.layer(x)
            out += self.shortcut(x)
            return self.activation(out)

    class ResNet50Shaped(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.stem = nn.Sequential(nn.Conv2d(3, 16, 7, 2, 3, bias=False), nn.BatchNorm2d(16),
                                      nn.ReLU(), nn.MaxPool2d(3, 2, 1))
            stages, cin = [], 16
            for i, (depth, cout) in enumerate(zip((3, 4, 6, 3), (32, 64, 128, 256))):
                blocks = [Bottleneck(cin if j == 0 else cout, cout, 2 if i and j == 0 else 1)
                          for j in range(depth)]
                stages.append(nn.Sequential(*blocks))
                cin = cout
            self.stages = nn.Sequential(*stages)
            self.pool, self.fc = nn.AdaptiveAvgPool2d(1), nn.Linear(256, 10)

        def forward(self, pixel_values, labels):
            logits = self.fc(torch.flatten(self.pool(self.stages(self.stem(pixel_values))), 1))
            return nn.functional.cross_entropy(logits, labels)

    torch.manual_seed(0)

    def batch() -> tuple[tuple, dict]:
        return (), {"pixel_values": torch.randn(2, 3, 64, 64),
                    "labels": torch.randint(0, 10, (2,))}
    return ResNet50Shaped(), batch


MODELS: dict[str, Callable[[], tuple[Any, Batch]]] = {
    "gpt2": gpt2, "resnet50": resnet50, "gpt2_plain": gpt2_plain, "resnet_plain": resnet_plain}


def train(name: str, steps: int = 2, session_sink: Any = None, record: str | None = None) -> Any:
    """Train model ``name`` ``steps`` steps under ``tensorscope.watch`` (no GUI); the
    watch's events go to ``session_sink`` (and to ``record``, a .tscope file)."""
    import torch

    import tensorscope
    model, batch = MODELS[name]()
    opt = torch.optim.AdamW(model.parameters(), 1e-3)
    options: dict[str, Any] = {"connect": False}
    if record:
        options["record"] = record
    w = tensorscope.watch(model, opt, **options)
    if session_sink is not None:
        w.session.add_sink(session_sink)
    with w:
        for _ in range(steps):
            args, kwargs = batch()
            out = model(*args, **kwargs)
            loss = out if isinstance(out, torch.Tensor) else out.loss
            opt.zero_grad()
            loss.backward()
            opt.step()
    return w


class GraphSink:
    """Collects the watch's last graphs and module classes (a session sink)."""

    def __init__(self) -> None:
        self.graphs: dict[str, Any] = {}
        self.types: dict[tuple[int, str], str] = {}

    def handle(self, msg: Any) -> None:
        from tensorscope.common.events import GraphStructure, ModuleTree
        if isinstance(msg, GraphStructure):
            self.graphs[msg.kind] = msg
        elif isinstance(msg, ModuleTree):
            for root in msg.roots:
                for m in root.get("modules", []):
                    self.types[(int(root.get("root", 0)), m["path"])] = m["type"]

    def close(self) -> None:
        pass


def captured(name: str, steps: int = 2) -> GraphSink:
    """The graphs TensorScope captured of model ``name``."""
    sink = GraphSink()
    train(name, steps, sink)
    return sink


def main() -> None:
    """``python benchmarks/real_models.py NAME STEPS [FILE.tscope]``: train (for recordings)."""
    import sys
    name, steps = sys.argv[1], int(sys.argv[2]) if len(sys.argv) > 2 else 3
    train(name, steps, record=sys.argv[3] if len(sys.argv) > 3 else None)


if __name__ == "__main__":
    main()
