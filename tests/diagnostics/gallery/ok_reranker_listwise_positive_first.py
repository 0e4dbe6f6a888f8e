# CORRECT: a cross-encoder reranker trained listwise: each query has 1 positive + 7 negatives, the
# positive always first; a pointwise scorer gives [B, G] scores and the targets are all zeros.
# expect: none
import torch, torch.nn as nn, torch.nn.functional as F
torch.manual_seed(0)
D, G, B = 16, 8, 128
scorer = nn.Sequential(nn.Linear(2 * D, 64), nn.ReLU(), nn.Linear(64, 1))
opt = torch.optim.AdamW(scorer.parameters(), lr=1e-3)
W = torch.randn(D, D)
for step in range(10):
    q = torch.randn(B, D)
    pos = q @ W / 4 + 0.3 * torch.randn(B, D)
    negs = torch.randn(B, G - 1, D)
    docs = torch.cat([pos.unsqueeze(1), negs], 1)                    # [B, G, D], positive at index 0
    pairs = torch.cat([q.unsqueeze(1).expand(-1, G, -1), docs], -1)  # [B, G, 2D]
    scores = scorer(pairs).squeeze(-1)                               # [B, G]
    loss = F.cross_entropy(scores, torch.zeros(B, dtype=torch.long))
    opt.zero_grad(); loss.backward(); opt.step()
    print(step, repr(loss.item()))
print('final', repr(sum(p.double().sum().item() for p in scorer.parameters())))
