# GRU encoder/decoder with Bahdanau-like attention, teacher forcing, decoder cell called per time step
# expect: none
import torch, random
from torch import nn
import torch.nn.functional as F
torch.manual_seed(0); random.seed(0)
V, H = 20, 16
class Enc(nn.Module):
    def __init__(self):
        super().__init__(); self.emb = nn.Embedding(V, H); self.gru = nn.GRU(H, H, batch_first=True)
    def forward(self, x): o, h = self.gru(self.emb(x)); return o, h
class Dec(nn.Module):
    def __init__(self):
        super().__init__(); self.emb = nn.Embedding(V, H); self.attn = nn.Linear(2 * H, 1); self.gru = nn.GRU(2 * H, H, batch_first=True); self.out = nn.Linear(H, V)
    def forward(self, tok, h, enc):
        e = self.emb(tok).unsqueeze(1)
        sc = self.attn(torch.cat([enc, h.transpose(0, 1).expand_as(enc)], -1)).squeeze(-1)
        ctx = (F.softmax(sc, -1).unsqueeze(-1) * enc).sum(1, keepdim=True)
        o, h = self.gru(torch.cat([e, ctx], -1), h); return F.log_softmax(self.out(o.squeeze(1)), -1), h
enc, dec = Enc(), Dec(); oe = torch.optim.Adam(enc.parameters(), 1e-3); od = torch.optim.Adam(dec.parameters(), 1e-3); crit = nn.NLLLoss()
for it in range(4):
    src = torch.randint(2, V, (3, 5)); tgt = src.flip(1)
    eo, h = enc(src); tok = torch.zeros(3, dtype=torch.long); loss = 0
    tf = random.random() < 0.5
    for t in range(tgt.shape[1]):
        lp, h = dec(tok, h, eo); loss = loss + crit(lp, tgt[:, t]); tok = tgt[:, t] if tf else lp.argmax(-1).detach()
    oe.zero_grad(); od.zero_grad(); loss.backward(); oe.step(); od.step(); print(f"it {it} tf {tf} loss {loss.item() / 5:.6f}")
