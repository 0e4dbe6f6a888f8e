"""The floor under any Python instrumentation: what bare hooks cost, before TensorScope.

``overhead.py`` measures TensorScope; this measures what every hook-based
tool pays before doing anything of its own, on the same four models and in
the same way (one model, blocks of steps alternating between hooks attached
and no hooks at all, median of the rounds' ratios: comparable with
``overhead.py``'s plain-copy baseline). Three levels, each including the one
before:

* ``hooks``: a no-op forward pre-hook and forward hook on every module
  (``always_call``, as TensorScope registers them) and no-op optimizer step
  hooks: PyTorch's own cost of calling Python hooks (which ``overhead.py
  --same-model`` leaves out of both sides);
* ``grad_hooks``: plus a no-op ``Tensor.register_hook`` on every module output
  that requires grad, removed at step end: the cost of per-output gradient
  callbacks (autograd calls back into Python once per output);
* ``essential``: plus the device work of ``default`` mode with the least
  possible Python around it: a flow table entry and a ``sum`` per new output
  (the finite check; outputs of the modules that pass their input's check
  on, ``capture.FINITE_PASSING``, are not summed, as in TensorScope), a
  squared norm per output gradient, and one read of all values per step.

``essential`` is the floor of ``default`` mode for any implementation in
Python; TensorScope's ratio above it is its bookkeeping (metadata, digests,
graphs, diagnostics, events).

    .venv/bin/python benchmarks/hook_floor.py --clock cpu --threads 1
"""
from __future__ import annotations

import argparse
import statistics
import sys
import weakref
from typing import Any

import torch

from overhead import CLOCKS, MODELS, WARMUP_STEPS, Trainer, _alternate, make
from tensorscope.hooks.capture import FINITE_PASSING

LEVELS = ("hooks", "grad_hooks", "essential")


class FloorHooks:
    """The hooks of one level on one trainer; ``active`` switches them on and off."""

    def __init__(self, trainer: Trainer, level: str) -> None:
        self.trainer = trainer
        self.level = level
        self.values: list[torch.Tensor] = []
        self.handles: list[Any] = []
        self.flow: dict[int, weakref.ref] = {}
        self.stack: list[torch.nn.Module] = []
        self._attached: list[Any] = []

    @property
    def active(self) -> bool:
        return bool(self._attached)

    @active.setter
    def active(self, on: bool) -> None:
        if on and not self._attached:
            t = self.trainer
            for m in list(t.model.modules()) + [t.loss_fn]:
                self._attached.append(m.register_forward_pre_hook(self.pre))
                self._attached.append(m.register_forward_hook(self.post, always_call=True))
            self._attached.append(t.opt.register_step_pre_hook(lambda *a: None))
            self._attached.append(t.opt.register_step_post_hook(self.step_end))
        elif not on:
            self.close()

    def pre(self, module: torch.nn.Module, args: tuple) -> None:
        if self.level == "essential":
            self.stack.append(module)

    def post(self, module: torch.nn.Module, args: tuple, out: Any) -> None:
        if self.level == "hooks" or not isinstance(out, torch.Tensor):
            return
        if self.level == "essential":
            self.stack.pop()
            ref = self.flow.get(id(out))
            if ref is None or ref() is not out:
                self.flow[id(out)] = weakref.ref(out)
                if not isinstance(module, FINITE_PASSING):
                    with torch.no_grad():
                        self.values.append(out.sum())
        if out.requires_grad:
            self.handles.append(out.register_hook(self.grad))

    def grad(self, g: torch.Tensor) -> None:
        if self.level == "essential":
            with torch.no_grad():
                flat = g.reshape(-1)
                self.values.append(torch.dot(flat, flat))

    def step_end(self, *args: Any) -> None:
        if self.values:
            torch.stack(self.values).tolist()
        for h in self.handles:
            h.remove()
        self.values, self.handles, self.flow, self.stack = [], [], {}, []

    def close(self) -> None:
        for h in self._attached:
            h.remove()
        self._attached = []


def measure(name: str, level: str, rounds: int, steps: int, clock: str) -> dict[str, Any]:
    """Hooks of ``level`` on and off on one model, in alternating blocks."""
    model, x, y = make(name, "cpu")
    trainer = Trainer(model, x, y)
    hooks = FloorHooks(trainer, level)
    tick = CLOCKS[clock]

    def block(active: bool, k: int) -> float:
        hooks.active = active
        return trainer.run(k, lambda: None, tick)

    try:
        trainer.run(WARMUP_STEPS, lambda: None)
        off, on = _alternate(lambda k: block(False, k), lambda k: block(True, k), rounds, steps)
    finally:
        hooks.close()
    ratio = statistics.median(b / a for a, b in zip(off, on))
    return {"model": name, "level": level, "ratio": ratio,
            "off_ms": statistics.median(off) * 1e3, "on_ms": statistics.median(on) * 1e3}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default=",".join(MODELS))
    parser.add_argument("--levels", default=",".join(LEVELS))
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--clock", choices=tuple(CLOCKS), default="wall")
    parser.add_argument("--threads", type=int, default=0)
    args = parser.parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    steps = {"mlp": 60}
    for name in args.models.split(","):
        for level in args.levels.split(","):
            row = measure(name, level, args.rounds, steps.get(name, 10), args.clock)
            print(f"{name:<12} {level:<11} off {row['off_ms']:8.2f} ms   on {row['on_ms']:8.2f} ms"
                  f"   ratio {row['ratio']:.3f}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
