# BUG: a GRU tagger whose per-token scores (a Linear over [B, T, H], viewed to [B*T, C])
# go into F.nll_loss without log_softmax.
# expect: double_activation "tag"
import torch
from torch import nn
import torch.nn.functional as F

torch.manual_seed(0)
class Tagger(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(40, 16)
        self.rnn = nn.GRU(16, 24, batch_first=True, bidirectional=True)
        self.tag = nn.Linear(48, 7)
    def forward(self, x):
        h, _ = self.rnn(self.emb(x))
        return self.tag(h)
model = Tagger()
opt = torch.optim.Adam(model.parameters(), lr=1e-3)
for step in range(6):
    x, y = torch.randint(0, 40, (4, 9)), torch.randint(0, 7, (4, 9))
    opt.zero_grad()
    scores = model(x)
    loss = F.nll_loss(scores.view(-1, 7), y.view(-1))
    loss.backward()
    opt.step()
    print(step, round(loss.item(), 4))
