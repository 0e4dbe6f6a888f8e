# MoCo-style contrastive learning: InfoNCE logits are [positive, queue negatives]
# divided by a temperature, and the cross-entropy target is always class 0 (the
# positive). Momentum encoder updated under no_grad, a queue of keys. Correct code.
# expect: none
import torch
import torch.nn as nn
import torch.nn.functional as F

torch.manual_seed(0)
enc_q = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 8))
enc_k = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 8))
enc_k.load_state_dict(enc_q.state_dict())
for p in enc_k.parameters():
    p.requires_grad_(False)
queue = F.normalize(torch.randn(8, 64), dim=0)
opt = torch.optim.SGD(enc_q.parameters(), lr=0.03, momentum=0.9)
for step in range(6):
    x = torch.randn(32, 16)
    q = F.normalize(enc_q(x + 0.1 * torch.randn_like(x)), dim=1)
    with torch.no_grad():
        for pq, pk in zip(enc_q.parameters(), enc_k.parameters()):
            pk.mul_(0.99).add_(pq.detach(), alpha=0.01)
        k = F.normalize(enc_k(x + 0.1 * torch.randn_like(x)), dim=1)
    l_pos = torch.einsum("nc,nc->n", q, k).unsqueeze(-1)
    l_neg = torch.einsum("nc,ck->nk", q, queue)
    logits = torch.cat([l_pos, l_neg], dim=1) / 0.07
    labels = torch.zeros(logits.shape[0], dtype=torch.long)
    loss = F.cross_entropy(logits, labels)
    opt.zero_grad()
    loss.backward()
    opt.step()
    queue = torch.cat([queue[:, 32:], k.T], dim=1)
