"""``repeated_module``: one layer object listed several times in a container.

``nn.ModuleList([nn.Linear(64, 64)] * 4)`` (or ``nn.Sequential(*[block] * n)``)
repeats *one* layer four times: list multiplication copies references, not
layers. The four positions share one set of weights, the model has a quarter
of the parameters the code suggests, and each step updates that one layer
with the sum of four gradients. ``[nn.Linear(64, 64) for _ in range(4)]`` (or
``copy.deepcopy``) makes four layers.

Once per root, at the end of its first training step: each ``ModuleList`` or
``Sequential`` of the model whose children hold the same module object at two
positions or more, where that module has parameters (a shared ``nn.ReLU`` or
``nn.Dropout`` holds none and is harmless), is reported, one warning per
model at its first such container. Weight sharing on purpose reuses one
module in ``forward`` (a loop over a single block, ALBERT-style) rather than
listing it, and is not this. Metadata only.
"""
from __future__ import annotations

from typing import Any

from torch import nn

from tensorscope.hooks.diagnostics.base import Diagnostic, module_label
from tensorscope.hooks.observer import StepRecord

MAX_MODULES = 4096   # modules looked at per root


class RepeatedModuleObserver(Diagnostic):
    """Containers that list the same parametrised module more than once."""

    def __init__(self) -> None:
        self._checked = 0   # roots looked at so far

    def on_step_end(self, record: StepRecord) -> None:
        """Look at the roots seen for the first time (training steps only)."""
        roots = self.ctx.roots
        if record.kind != "train" or self._checked >= len(roots):
            return
        for rid in range(self._checked, len(roots)):
            self._check(rid, roots[rid], record.step)
        self._checked = len(roots)

    def _check(self, rid: int, root: Any, step: int) -> None:
        for n, (path, mod) in enumerate(root.named_modules()):
            if n >= MAX_MODULES:
                return
            if not isinstance(mod, (nn.ModuleList, nn.Sequential)):
                continue
            children = [c for c in mod._modules.values() if c is not None]
            seen: dict[int, list[int]] = {}
            for i, c in enumerate(children):
                seen.setdefault(id(c), []).append(i)
            for places in seen.values():
                if len(places) < 2:
                    continue
                child = children[places[0]]
                params = sum(p.numel() for p in child.parameters())
                if not params:
                    continue
                self._report(rid, path, type(mod).__name__, type(child).__name__,
                             places, len(children), params, step)
                return

    def _report(self, rid: int, path: str, container: str, kind: str, places: list[int],
                total: int, params: int, step: int) -> None:
        k = len(places)
        where = module_label(self.ctx, rid, path)
        self.emit("repeated_module", "warning", "forward", rid, path,
                  f"{where} ({container}) holds one and the same {kind} object at "
                  f"positions {', '.join(map(str, places[:8]))}{' ...' if k > 8 else ''} "
                  f"of its {total}: list multiplication ([layer] * {k}) repeats a "
                  f"reference, not the layer, so those {k} positions share one set of "
                  f"{params:,} weights and each step updates that single layer with the sum "
                  f"of their gradients; the model is smaller than it reads. Fix: build "
                  f"each layer on its own ([{kind}(...) for _ in range({k})], or "
                  f"copy.deepcopy(layer) per position); if sharing is meant, keep one "
                  f"layer and call it in a loop.", step=step)
