# MISTAKE: a prediction loop without torch.no_grad(): every forward builds an
# autograd graph (and keeps activations) that no backward will ever use.
# FIX: wrap inference in `with torch.no_grad():` (or torch.inference_mode()).
# RUN: tensorscope run --headless examples/mistakes/grad_tracking_in_inference.py
# expect: grad_tracking_in_inference ""
import torch
from torch import nn

torch.manual_seed(0)
model = nn.Sequential(nn.Linear(20, 64), nn.ReLU(), nn.Linear(64, 5))
model.eval()
predictions = []
for batch in range(6):
    logits = model(torch.randn(32, 20))
    predictions.append(logits.argmax(dim=1))
print(torch.cat(predictions).shape)
