# CORRECT: nn.TransformerEncoder with a causal float mask (-inf above the diagonal)
# passed positionally; a padding mask by keyword.
# expect: none
import torch
import torch.nn.functional as F
from torch import nn


class LM(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(50, 32)
        layer = nn.TransformerEncoderLayer(32, 2, 64, dropout=0.0, batch_first=True)
        self.enc = nn.TransformerEncoder(layer, 2, enable_nested_tensor=False)
        self.out = nn.Linear(32, 50)

    def forward(self, idx, mask):
        return self.out(self.enc(self.emb(idx), mask))


torch.manual_seed(0)
model = LM()
opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
T = 12
mask = torch.triu(torch.full((T, T), float("-inf")), diagonal=1)
for step in range(4):
    idx = torch.randint(0, 50, (8, T + 1))
    opt.zero_grad()
    logits = model(idx[:, :-1], mask)
    F.cross_entropy(logits.reshape(-1, 50), idx[:, 1:].reshape(-1)).backward()
    opt.step()
