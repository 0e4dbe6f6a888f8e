# MISTAKE: binary masks loaded as 0/255 go into BCEWithLogitsLoss unscaled; it expects
# targets in [0, 1] and does not check, so the loss has no minimum.
# FIX: scale the targets into [0, 1]: mask / 255.
# RUN: tensorscope run --headless examples/mistakes/target_out_of_range.py
# expect: target_out_of_range "2"
import torch
from torch import nn

torch.manual_seed(0)
model = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.ReLU(), nn.Conv2d(8, 1, 1))
opt = torch.optim.Adam(model.parameters(), lr=1e-3)
loss_fn = nn.BCEWithLogitsLoss()
for step in range(5):
    image = torch.randn(4, 3, 16, 16)
    mask = (torch.rand(4, 1, 16, 16) > 0.5).float() * 255     # mistake: not divided by 255
    opt.zero_grad()
    loss = loss_fn(model(image), mask)
    loss.backward()
    opt.step()
    print(f"step {step} loss {loss.item():.2f}")
