# BUG: a char-RNN whose [B, T, V] scores go through nn.LogSoftmax() with no dim (it picks
# dim=0 for 3-d input) and then NLLLoss over [B*T, V].
# expect: softmax_dim "logsm"
import warnings
import torch
from torch import nn
warnings.simplefilter("ignore")

torch.manual_seed(0)
class CharRNN(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(30, 16)
        self.rnn = nn.LSTM(16, 32, batch_first=True)
        self.out = nn.Linear(32, 30)
        self.logsm = nn.LogSoftmax()
    def forward(self, x):
        h, _ = self.rnn(self.emb(x))
        return self.logsm(self.out(h))
model = CharRNN()
opt = torch.optim.Adam(model.parameters(), lr=2e-3)
crit = nn.NLLLoss()
for step in range(5):
    x = torch.randint(0, 30, (4, 11))
    opt.zero_grad()
    logp = model(x[:, :-1])
    loss = crit(logp.reshape(-1, 30), x[:, 1:].reshape(-1))
    loss.backward()
    opt.step()
    print(step, round(loss.item(), 4))
