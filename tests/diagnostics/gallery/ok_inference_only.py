# CORRECT: an inference-only script: eval mode and torch.no_grad() / inference_mode().
# expect: none
import torch
from torch import nn

torch.manual_seed(0)
model = nn.Sequential(nn.Conv2d(3, 8, 3), nn.BatchNorm2d(8), nn.ReLU(), nn.Dropout(0.5),
                      nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(8, 3), nn.Softmax(dim=1))
model.eval()
with torch.no_grad():
    for _ in range(4):
        probs = model(torch.randn(2, 3, 16, 16))
with torch.inference_mode():
    for _ in range(3):
        probs = model(torch.randn(2, 3, 16, 16))
print(probs.sum(dim=1))
