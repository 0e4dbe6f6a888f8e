"""A tiny training script for the end-to-end tests (run under `tensorscope run`).

Environment: STEPS (default 6), NAN_STEP (inject a NaN into the input of that
step), STEP_DELAY (seconds to sleep per step), BAD_SHAPE=1 (the last layer
has the wrong input size: a shape error in the first forward).
"""
from __future__ import annotations

import os
import time

import torch
from torch import nn

torch.manual_seed(0)
hidden_in = 5 if os.environ.get("BAD_SHAPE") == "1" else 8
model = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(hidden_in, 2))
opt = torch.optim.SGD(model.parameters(), lr=0.01)
steps = int(os.environ.get("STEPS", "6"))
nan_step = int(os.environ.get("NAN_STEP", "-1"))
delay = float(os.environ.get("STEP_DELAY", "0"))
for step in range(steps):
    x = torch.arange(12, dtype=torch.float32).reshape(3, 4) + step
    if step == nan_step:
        x[0, 0] = float("nan")
    loss = model(x).pow(2).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
    time.sleep(delay)
print(f"finished {steps} steps", flush=True)
