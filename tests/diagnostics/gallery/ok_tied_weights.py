# CORRECT: input embedding and output projection share one weight.
# expect: none
import torch
from torch import nn


class TiedLM(nn.Module):
    def __init__(self, vocab=40, d=16):
        super().__init__()
        self.emb = nn.Embedding(vocab, d)
        self.rnn = nn.GRU(d, d, batch_first=True)
        self.decoder = nn.Linear(d, vocab, bias=False)
        self.decoder.weight = self.emb.weight

    def forward(self, x):
        h, _ = self.rnn(self.emb(x))
        return self.decoder(h)


torch.manual_seed(0)
model = TiedLM()
opt = torch.optim.Adam(model.parameters(), lr=1e-3)
for step in range(4):
    x = torch.randint(0, 40, (4, 10))
    opt.zero_grad()
    logits = model(x)
    nn.functional.cross_entropy(logits.reshape(-1, 40), x.reshape(-1)).backward()
    opt.step()
