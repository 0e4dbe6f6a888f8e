"""Example 11: a model compiled with ``torch.compile``.

An MLP 32-64-64-4 classifies random clusters, compiled before training
(``model = torch.compile(model)``). TensorScope sees the compiled module at
its boundary: one card, "MLP: compiled: 6 modules inside", with its inputs,
outputs, statistics and gradient norms; the six modules inside the compiled
graph (``net`` and its five layers) are listed folded inside it, marked not
observed.

Run it::

    tensorscope run examples/11_compiled.py
    tensorscope run --compile-eager-steps 2 examples/11_compiled.py
    tensorscope run --headless --report report.json --compile-eager-steps 1 examples/11_compiled.py --steps 3 --backend eager

``--compile-eager-steps N`` runs N steps on the original eager module, with
full capture of every module inside, then hands over to the compiled one
(those steps run PyTorch's eager kernels: their numbers can differ in the
last bits from the compiled ones).

What to look at in TensorScope:

* The graph: one card for the compiled MLP, its boundary tensors [64, 32]
  in and [64, 4] out, and its gradient norm in the plots.
* With ``--compile-eager-steps``: ``_orig_mod.net.0`` ... ``_orig_mod.net.4``
  captured in those steps, like an uncompiled model.

What you should see: one ``compiled`` finding of severity info (saying what
is not seen), no warnings.
"""
from __future__ import annotations

import argparse

import torch
from torch import nn


class MLP(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.net = nn.Sequential(nn.Linear(32, 64), nn.ReLU(), nn.Linear(64, 64), nn.ReLU(),
                                 nn.Linear(64, 4))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net(x)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=100)
    parser.add_argument("--backend", default="inductor",
                        help="torch.compile backend (eager: dynamo only, quick to compile)")
    args = parser.parse_args()
    torch.manual_seed(0)
    centres = torch.randn(4, 32) * 3
    model = torch.compile(MLP(), backend=args.backend)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    loss_fn = nn.CrossEntropyLoss()
    for step in range(args.steps):
        y = torch.randint(0, 4, (64,))
        x = centres[y] + torch.randn(64, 32)
        opt.zero_grad()
        loss = loss_fn(model(x), y)
        loss.backward()
        opt.step()
        if step % 20 == 0 or step == args.steps - 1:
            print(f"step {step}: loss {loss.item():.3f}")


if __name__ == "__main__":
    main()
