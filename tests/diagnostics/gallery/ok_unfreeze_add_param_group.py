# CORRECT: a frozen backbone unfrozen later for fine-tuning and added to the optimizer as
# a new parameter group with a smaller learning rate.
# expect: none
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
model.backbone.requires_grad_(False)
opt = torch.optim.Adam(filter(lambda p: p.requires_grad, model.parameters()), lr=1e-3)
crit = nn.CrossEntropyLoss()
for epoch in range(4):
    if epoch == 2:
        model.backbone.requires_grad_(True)
        opt.add_param_group({"params": model.backbone.parameters(), "lr": 1e-4})
    for step in range(3):
        x, y = torch.randn(16, 10), torch.randint(0, 3, (16,))
        opt.zero_grad(); loss = crit(model(x), y); loss.backward(); opt.step()
