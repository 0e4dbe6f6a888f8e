# MISTAKE: gradient accumulation over 2 micro-batches of a seq2seq GRU (encoder and
# decoder optimizers), but zero_grad() sits at the top of every micro-step: each step()
# sees only the last micro-batch's gradients, divided by the accumulation factor.
# expect: zero_grad_before_step ""
import torch
from torch import nn

torch.manual_seed(0)


class Seq2Seq(nn.Module):
    def __init__(self, vocab=12, hidden=16):
        super().__init__()
        self.emb = nn.Embedding(vocab, hidden)
        self.enc = nn.GRU(hidden, hidden, batch_first=True)
        self.dec = nn.GRU(hidden, hidden, batch_first=True)
        self.out = nn.Linear(hidden, vocab)

    def forward(self, src, tgt_in):
        _, h = self.enc(self.emb(src))
        y, _ = self.dec(self.emb(tgt_in), h)
        return self.out(y)


model = Seq2Seq()
opt = torch.optim.Adam(model.parameters(), lr=1e-3)
accum_steps = 2
for i in range(12):
    src = torch.randint(1, 12, (4, 6))
    tgt = torch.flip(src, [1])
    tgt_in = torch.cat([torch.zeros(4, 1, dtype=torch.long), tgt[:, :-1]], 1)
    opt.zero_grad()                          # mistake: every micro-step
    logits = model(src, tgt_in)
    loss = nn.functional.cross_entropy(logits.reshape(-1, 12), tgt.reshape(-1)) / accum_steps
    loss.backward()
    if (i + 1) % accum_steps == 0:
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        print(f"step {i // accum_steps} loss {loss.item() * accum_steps:.4f}")
