# CORRECT: NLLLoss on log-probabilities made three ways: log(softmax) of a mixture,
# x - logsumexp(x), and nn.LogSoftmax on a conv segmentation map.
# expect: none
import torch
from torch import nn
import torch.nn.functional as F

torch.manual_seed(0)
class Mix(nn.Module):
    def __init__(self):
        super().__init__()
        self.a = nn.Linear(10, 4)
        self.b = nn.Linear(10, 4)
    def forward(self, x):
        return torch.log(0.5 * F.softmax(self.a(x), 1) + 0.5 * F.softmax(self.b(x), 1) + 1e-8)
class LSE(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(10, 4)
    def forward(self, x):
        s = self.fc(x)
        return s - s.logsumexp(1, keepdim=True)
seg = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.ReLU(), nn.Conv2d(8, 4, 1), nn.LogSoftmax(dim=1))
models = [Mix(), LSE(), seg]
opt = torch.optim.Adam([p for m in models for p in m.parameters()], lr=1e-3)
nll = nn.NLLLoss()
for step in range(5):
    x, y = torch.randn(16, 10), torch.randint(0, 4, (16,))
    img, ymap = torch.randn(2, 3, 8, 8), torch.randint(0, 4, (2, 8, 8))
    opt.zero_grad()
    loss = nll(models[0](x), y) + F.nll_loss(models[1](x), y) + nll(seg(img), ymap)
    loss.backward()
    opt.step()
    print(step, round(loss.item(), 4))
