# MISTAKE: a CNN with BatchNorm2d trained with batch_size=1, then evaluated in eval mode:
# training normalised each image by its own statistics, evaluation uses running statistics
# averaged from single images, so training and evaluation see different activations.
# FIX: a batch size of 8 or more, GroupNorm instead of BatchNorm, or BatchNorm kept in eval mode.
# RUN: tensorscope run --headless examples/mistakes/batchnorm_batch_of_one.py
# expect: batchnorm_batch_of_one "1"
import torch
from torch import nn

torch.manual_seed(0)
model = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU(),
                      nn.Conv2d(8, 2, 1))
opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
data = torch.utils.data.TensorDataset(torch.randn(6, 3, 16, 16), torch.randint(0, 2, (6, 16, 16)))
loader = torch.utils.data.DataLoader(data, batch_size=1, shuffle=True)   # mistake
for x, y in loader:
    opt.zero_grad()
    loss = nn.functional.cross_entropy(model(x), y)
    loss.backward()
    opt.step()
    print(f"loss {loss.item():.4f}")
model.eval()
with torch.no_grad():
    x, y = data[:]
    print(f"accuracy {(model(x).argmax(1) == y).float().mean().item():.4f}")
