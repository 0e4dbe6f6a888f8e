"""Example 8: attach the GUI to a script that is already running.

A long-running training job (a few minutes by default; each step sleeps a
little to stand in for a bigger model) that you start first and look at
later, the way you would on a remote GPU box.

Start it serving on a local port::

    tensorscope run --listen 127.0.0.1:7007 examples/08_attach.py

It prints the address and the file that holds its token (mode 0600), then
trains; nothing waits for a GUI. Whenever you like, from another terminal,
attach (the token never goes on a command line, where ``ps`` shows it)::

    export TENSORSCOPE_TOKEN=$(cat <the token file it printed>)
    tensorscope attach 127.0.0.1:7007

or do the same without ``tensorscope run``, with the two-line API
(``tensorscope.watch(model, optimizer, listen=...)``, see ``main``)::

    python examples/08_attach.py --watch-listen 127.0.0.1:7007

What to look at in TensorScope:

* On attach, the GUI fills in at once: the module tree, the latest graphs,
  the recent loss history and any findings, then live steps.
* Pause (the training thread stops at the next module or step boundary;
  the step counter in the terminal stops too), step one batch, step one
  module, inspect ``body.0``'s output in the inspector, then continue.
* Detach (close the window): training carries on at full speed. Attach again
  any time.

What you should see: the loss falls slowly and steadily, and no findings.
Use ``--steps`` and ``--delay`` to change how long it runs
(``--steps 5 --delay 0`` in CI).
"""
from __future__ import annotations

import argparse
import time

import torch
from torch import nn


class Model(nn.Module):
    """A residual MLP: 32 -> 64, two residual blocks, -> 8 classes."""

    def __init__(self) -> None:
        super().__init__()
        self.stem = nn.Linear(32, 64)
        self.body = nn.ModuleList(
            nn.Sequential(nn.LayerNorm(64), nn.Linear(64, 64), nn.GELU()) for _ in range(2))
        self.head = nn.Linear(64, 8)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.stem(x)
        for block in self.body:
            x = x + block(x)
        return self.head(x)


def train(model: nn.Module, optimizer: torch.optim.Optimizer, args: argparse.Namespace,
          device: torch.device) -> None:
    """``args.steps`` steps on a fixed random teacher's labels, sleeping ``args.delay`` each."""
    g = torch.Generator().manual_seed(1)
    teacher = torch.randn(32, 8, generator=g)
    loss_fn = nn.CrossEntropyLoss()
    model.train()
    for step in range(args.steps):
        x = torch.randn(64, 32, generator=g)
        y = (x @ teacher).argmax(dim=1)
        x, y = x.to(device), y.to(device)
        optimizer.zero_grad(set_to_none=True)
        loss = loss_fn(model(x), y)
        loss.backward()
        optimizer.step()
        if step % 100 == 0 or step == args.steps - 1:
            print(f"step {step}: loss {loss.item():.4f}", flush=True)
        time.sleep(args.delay)


def main() -> None:
    """Parse the arguments and train."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=5000)
    parser.add_argument("--delay", type=float, default=0.05, help="seconds to sleep per step")
    parser.add_argument("--watch-listen", metavar="HOST:PORT",
                        help="serve with tensorscope.watch(..., listen=HOST:PORT) "
                             "instead of `tensorscope run --listen`")
    args = parser.parse_args()

    torch.manual_seed(0)
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    model = Model().to(device)
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-4)

    if args.watch_listen:
        import tensorscope

        with tensorscope.watch(model, optimizer, listen=args.watch_listen, connect=False):
            train(model, optimizer, args, device)
    else:
        train(model, optimizer, args, device)


if __name__ == "__main__":
    main()
