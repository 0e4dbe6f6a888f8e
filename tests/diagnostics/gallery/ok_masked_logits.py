# CORRECT: invalid actions masked with -inf logits before the softmax /
# cross-entropy (the loss and the gradients stay finite).
# expect: none
import torch
from torch import nn


class Policy(nn.Module):
    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(8, 32), nn.Tanh(), nn.Linear(32, 6))

    def forward(self, x, valid):
        return self.net(x).masked_fill(~valid, float("-inf"))


torch.manual_seed(0)
policy = Policy()
opt = torch.optim.Adam(policy.parameters(), lr=1e-3)
for step in range(4):
    x = torch.randn(16, 8)
    valid = torch.ones(16, 6, dtype=torch.bool)
    valid[:, 4:] = False
    target = torch.randint(0, 4, (16,))
    logits = policy(x, valid)
    loss = nn.functional.cross_entropy(logits, target)
    opt.zero_grad()
    loss.backward()
    opt.step()
    probs = torch.softmax(logits.detach(), dim=-1)
