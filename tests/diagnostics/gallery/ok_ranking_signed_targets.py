# CORRECT: learning to rank with MarginRankingLoss (targets +1/-1), plus CosineEmbeddingLoss and HingeEmbeddingLoss on +1/-1 pair labels.
# expect: none
import torch, torch.nn as nn, torch.nn.functional as F
torch.manual_seed(0)
scorer = nn.Sequential(nn.Linear(8, 32), nn.ReLU(), nn.Linear(32, 1)); emb = nn.Linear(8, 16)
opt = torch.optim.Adam(list(scorer.parameters()) + list(emb.parameters()), lr=1e-3)
w = torch.randn(8)
rank, cos, hinge = nn.MarginRankingLoss(margin=0.5), nn.CosineEmbeddingLoss(margin=0.2), nn.HingeEmbeddingLoss(margin=1.0)
for step in range(20):
    a, b = torch.randn(32, 8), torch.randn(32, 8)
    target = torch.where(a @ w > b @ w, 1.0, -1.0)
    l1 = rank(scorer(a).squeeze(1), scorer(b).squeeze(1), target)
    l2 = cos(emb(a), emb(b), target)
    l3 = hinge(F.pairwise_distance(emb(a), emb(b)), target)
    loss = l1 + l2 + 0.1 * l3
    opt.zero_grad(); loss.backward(); opt.step()
    if step % 5 == 0: print(step, round(loss.item(), 4))
