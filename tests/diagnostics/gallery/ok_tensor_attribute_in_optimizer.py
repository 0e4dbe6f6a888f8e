# CORRECT: a learnable temperature kept as a plain tensor but given to the optimizer by
# hand (CLIP-style logit scale), and a frozen constant tensor attribute.
# expect: none
import torch
from torch import nn

torch.manual_seed(0)
class Clip(nn.Module):
    def __init__(self):
        super().__init__()
        self.img = nn.Linear(12, 8)
        self.txt = nn.Linear(6, 8)
        self.logit_scale = torch.zeros(1, requires_grad=True)
        self.eye = torch.eye(8)
    def forward(self, a, b):
        ia = nn.functional.normalize(self.img(a), dim=-1)
        tb = nn.functional.normalize(self.txt(b), dim=-1)
        return self.logit_scale.exp() * ia @ tb.t()
model = Clip()
opt = torch.optim.AdamW(list(model.parameters()) + [model.logit_scale], lr=1e-3)
for step in range(5):
    a, b = torch.randn(16, 12), torch.randn(16, 6)
    logits = model(a, b)
    labels = torch.arange(16)
    loss = (nn.functional.cross_entropy(logits, labels) + nn.functional.cross_entropy(logits.t(), labels)) / 2
    opt.zero_grad()
    loss.backward()
    opt.step()
    print(step, round(loss.item(), 4), round(model.logit_scale.item(), 5))
