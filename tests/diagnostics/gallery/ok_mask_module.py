# CORRECT: a submodule builds an additive attention mask full of -inf; the
# attention consumes it and the model's output stays finite.
# expect: none
import torch
from torch import nn


class CausalMask(nn.Module):
    def forward(self, x):
        t = x.shape[1]
        return torch.full((t, t), float("-inf"), device=x.device).triu(1)


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.mask = CausalMask()
        self.attn = nn.MultiheadAttention(16, 2, batch_first=True)
        self.out = nn.Linear(16, 16)

    def forward(self, x):
        h, _ = self.attn(x, x, x, attn_mask=self.mask(x), need_weights=False)
        return self.out(h)


torch.manual_seed(0)
model = Model()
opt = torch.optim.Adam(model.parameters(), lr=1e-3)
for step in range(4):
    x = torch.randn(4, 7, 16)
    opt.zero_grad()
    loss = nn.functional.mse_loss(model(x), x)
    loss.backward()
    opt.step()
