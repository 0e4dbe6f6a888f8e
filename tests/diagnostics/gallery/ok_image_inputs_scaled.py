# CORRECT: the twin of bug_unnormalized_input_cnn/_mlp_flattened: uint8 images scaled to
# 0..1 before a CNN, and MNIST-style digits standardised with the dataset's mean and std
# before an MLP (negative values, not whole numbers).
# expect: none
import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

torch.manual_seed(0)
n = 256
ramp = torch.linspace(0, 1, 32)
base = torch.rand(n, 3, 1, 1) * 160 + 40 * (ramp.view(1, 1, 32, 1) + ramp.view(1, 1, 1, 32))
images = (base + torch.randn(n, 3, 32, 32) * 20).clamp(0, 255).to(torch.uint8)
labels = torch.randint(0, 10, (n,))
loader = DataLoader(TensorDataset(images, labels), batch_size=16, shuffle=True)

cnn = nn.Sequential(
    nn.Conv2d(3, 16, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
    nn.Conv2d(16, 32, 3, padding=1), nn.ReLU(), nn.AdaptiveAvgPool2d(1), nn.Flatten(),
    nn.Linear(32, 10))
opt = torch.optim.SGD(cnn.parameters(), lr=1e-2, momentum=0.9)
for batch, target in loader:
    x = batch.float() / 255
    opt.zero_grad()
    F.cross_entropy(cnn(x), target).backward()
    opt.step()

digits = (torch.rand(512, 28, 28) ** 4 * 255).to(torch.uint8)
mean, std = digits.float().div(255).mean(), digits.float().div(255).std()
mlp = nn.Sequential(nn.Flatten(), nn.Linear(28 * 28, 64), nn.ReLU(), nn.Linear(64, 10))
opt = torch.optim.Adam(mlp.parameters(), lr=1e-3)
for step in range(16):
    idx = torch.randint(0, 512, (32,))
    x = (digits[idx].float() / 255 - mean) / std
    opt.zero_grad()
    F.cross_entropy(mlp(x), torch.randint(0, 10, (32,))).backward()
    opt.step()
