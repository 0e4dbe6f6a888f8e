# MISTAKE: images arrive as N x H x W x C (numpy/PIL layout) but Conv2d expects
# N x C x H x W.
# FIX: x = x.permute(0, 3, 1, 2).
# expect: exception "0"
import torch
from torch import nn

torch.manual_seed(0)
model = nn.Sequential(nn.Conv2d(3, 8, 3), nn.ReLU())
model(torch.randn(2, 24, 24, 3))
