# CORRECT: a char-RNN whose [B, T, V] scores go through log_softmax(dim=-1), flattened to
# [B*T, V] for NLLLoss; and a [B, V, T] variant given to NLLLoss as is (classes in dim 1).
# expect: none
import torch
from torch import nn
import torch.nn.functional as F

torch.manual_seed(0)
class CharRNN(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(30, 16)
        self.rnn = nn.LSTM(16, 32, batch_first=True)
        self.out = nn.Linear(32, 30)
    def forward(self, x):
        h, _ = self.rnn(self.emb(x))
        return F.log_softmax(self.out(h), dim=-1)
model = CharRNN()
opt = torch.optim.Adam(model.parameters(), lr=2e-3)
crit = nn.NLLLoss()
for step in range(5):
    x = torch.randint(0, 30, (4, 11))
    opt.zero_grad()
    logp = model(x[:, :-1])
    loss = crit(logp.reshape(-1, 30), x[:, 1:].reshape(-1)) + crit(logp.transpose(1, 2), x[:, 1:])
    loss.backward()
    opt.step()
    print(step, round(loss.item(), 4))
