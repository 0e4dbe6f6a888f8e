# MISTAKE: MNIST-style uint8 digits flattened and cast to float inside the model's forward
# without scaling: the first Linear layer sees pixels of 0..255 instead of 0..1.
# FIX: x = x.float() / 255 (or (x / 255 - 0.1307) / 0.3081, MNIST's mean and std).
# expect: unnormalized_input ""
import torch
import torch.nn.functional as F
from torch import nn

torch.manual_seed(0)


class Mlp(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(28 * 28, 64)
        self.fc2 = nn.Linear(64, 10)

    def forward(self, x):
        x = x.view(x.size(0), -1)
        return self.fc2(F.relu(self.fc1(x)))


def fake_digits(n):
    """Dark background, a bright blob per image (like MNIST's strokes), uint8."""
    img = torch.zeros(n, 28, 28)
    cy, cx = torch.randint(8, 20, (n, 1, 1)), torch.randint(8, 20, (n, 1, 1))
    yy, xx = torch.arange(28).view(1, 28, 1), torch.arange(28).view(1, 1, 28)
    blob = torch.exp(-((yy - cy) ** 2 + (xx - cx) ** 2) / 18.0)
    img = blob * 255 + torch.rand(n, 28, 28) * 10
    return img.clamp(0, 255).to(torch.uint8)


model = Mlp()
opt = torch.optim.Adam(model.parameters(), lr=1e-3)
digits, labels = fake_digits(512), torch.randint(0, 10, (512,))
for step in range(32):
    idx = torch.randint(0, 512, (32,))
    opt.zero_grad()
    loss = F.cross_entropy(model(digits[idx].float()), labels[idx])
    loss.backward()
    opt.step()
