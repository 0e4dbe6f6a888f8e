# MISTAKE: the classifier was sized for 28x28 images but gets 32x32 ones:
# after the flatten, Linear's input size does not match in_features.
# FIX: recompute in_features (or use nn.LazyLinear / adaptive pooling).
# RUN: tensorscope run --headless examples/mistakes/exception.py
# expect: exception "classifier.1"
import torch
from torch import nn

torch.manual_seed(0)
model = nn.Sequential()
model.add_module("features", nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2)))
model.add_module("classifier", nn.Sequential(nn.Flatten(), nn.Linear(8 * 14 * 14, 10)))
model(torch.randn(4, 3, 32, 32))
