# MISTAKE: the images are stored as uint8 (0..255, as a dataset on disk or torchvision's
# PILToTensor gives them) and cast with .float() only: the CNN sees values up to 255.
# FIX: x = images.float() / 255 (then, better, standardise with the channel mean/std).
# expect: unnormalized_input ""
import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

torch.manual_seed(0)
# smooth "photos": a random colour gradient per image plus pixel noise, stored as uint8
n = 256
ramp = torch.linspace(0, 1, 32)
base = torch.rand(n, 3, 1, 1) * 160 + 40 * (ramp.view(1, 1, 32, 1) + ramp.view(1, 1, 1, 32))
images = (base + torch.randn(n, 3, 32, 32) * 20).clamp(0, 255).to(torch.uint8)
labels = torch.randint(0, 10, (n,))
loader = DataLoader(TensorDataset(images, labels), batch_size=16, shuffle=True)

model = nn.Sequential(
    nn.Conv2d(3, 16, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
    nn.Conv2d(16, 32, 3, padding=1), nn.ReLU(), nn.AdaptiveAvgPool2d(1), nn.Flatten(),
    nn.Linear(32, 10))
opt = torch.optim.SGD(model.parameters(), lr=1e-3, momentum=0.9)
for epoch in range(2):
    for batch, target in loader:
        x = batch.float()
        opt.zero_grad()
        loss = F.cross_entropy(model(x), target)
        loss.backward()
        opt.step()
