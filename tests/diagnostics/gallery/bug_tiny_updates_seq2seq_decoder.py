# MISTAKE: the seq2seq tutorial's two optimizers, but decoder_optimizer.step() was
# forgotten: the decoder's gradients are computed and zeroed, it never learns.
# expect: tiny_updates ""
import torch
from torch import nn


class Encoder(nn.Module):
    def __init__(self, vocab, hidden):
        super().__init__()
        self.embedding = nn.Embedding(vocab, hidden)
        self.gru = nn.GRU(hidden, hidden, batch_first=True)

    def forward(self, x):
        return self.gru(self.embedding(x))


class Decoder(nn.Module):
    def __init__(self, vocab, hidden):
        super().__init__()
        self.embedding = nn.Embedding(vocab, hidden)
        self.gru = nn.GRU(hidden, hidden, batch_first=True)
        self.out = nn.Linear(hidden, vocab)

    def forward(self, tok, h):
        o, h = self.gru(torch.relu(self.embedding(tok)), h)
        return torch.log_softmax(self.out(o.squeeze(1)), dim=-1), h


torch.manual_seed(0)
V, H = 20, 16
enc, dec = Encoder(V, H), Decoder(V, H)
enc_opt = torch.optim.SGD(enc.parameters(), lr=0.01)
dec_opt = torch.optim.SGD(dec.parameters(), lr=0.01)
crit = nn.NLLLoss()
for it in range(6):
    src, tgt = torch.randint(0, V, (4, 7)), torch.randint(0, V, (4, 5))
    enc_opt.zero_grad()
    dec_opt.zero_grad()
    _, h = enc(src)
    tok, loss = torch.zeros(4, 1, dtype=torch.long), 0.0
    for t in range(5):
        logp, h = dec(tok, h)
        loss = loss + crit(logp, tgt[:, t])
        tok = tgt[:, t:t + 1]
    loss.backward()
    enc_opt.step()
