# MISTAKE: encoder_optimizer.zero_grad() was forgotten: the encoder's gradients
# keep adding up across iterations.
# expect: grad_accumulation ""
import torch
from torch import nn

torch.manual_seed(0)
V, H = 20, 16
enc = nn.GRU(H, H, batch_first=True)
emb = nn.Embedding(V, H)
dec = nn.Sequential(nn.Linear(H, V))
enc_opt = torch.optim.Adam(list(emb.parameters()) + list(enc.parameters()), lr=1e-3)
dec_opt = torch.optim.Adam(dec.parameters(), lr=1e-3)
for it in range(5):
    src, tgt = torch.randint(0, V, (4, 7)), torch.randint(0, V, (4,))
    dec_opt.zero_grad()
    _, h = enc(emb(src))
    loss = nn.functional.cross_entropy(dec(h[-1]), tgt)
    loss.backward()
    enc_opt.step()
    dec_opt.step()
