# BUG: the backbone is frozen after a warm-up epoch, but gradients are cleared with
# model.zero_grad(set_to_none=False): the frozen parameters keep zero gradients (not
# None), so SGD's momentum goes on moving them every step.
# FIX: model.zero_grad() (set_to_none=True), or p.grad = None when freezing.
# expect: ineffective_freeze "backbone"
import torch
from torch import nn
torch.manual_seed(0)
class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.backbone = nn.Sequential(nn.Linear(10, 32), nn.ReLU(), nn.Linear(32, 32), nn.ReLU())
        self.head = nn.Linear(32, 3)
    def forward(self, x):
        return self.head(self.backbone(x))
model = Net()
opt = torch.optim.SGD(model.parameters(), lr=1e-2, momentum=0.9)
for epoch in range(4):
    if epoch == 1:   # warm up everything, then freeze the backbone
        for p in model.backbone.parameters():
            p.requires_grad = False
    for i in range(8):
        x, y = torch.randn(16, 10), torch.randint(0, 3, (16,))
        model.zero_grad(set_to_none=False)
        nn.functional.cross_entropy(model(x), y).backward()
        opt.step()
