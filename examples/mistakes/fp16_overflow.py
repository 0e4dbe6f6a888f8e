# MISTAKE: the model runs in float16 on unnormalised inputs (raw values in the
# thousands): activations exceed float16's maximum (65504) and become inf.
# FIX: normalise the inputs, use bfloat16, or autocast with a GradScaler.
# RUN: tensorscope run --headless examples/mistakes/fp16_overflow.py
# expect: fp16_overflow "fc1"
import torch
from torch import nn


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(64, 64)
        self.fc2 = nn.Linear(64, 1)
        nn.init.uniform_(self.fc1.weight, 0.0, 0.1)

    def forward(self, x):
        return self.fc2(self.fc1(x))


torch.manual_seed(0)
model = Net().half()
with torch.no_grad():
    for _ in range(3):
        x = (torch.rand(8, 64) * 30000.0).half()
        print(model(x).float().mean().item())
