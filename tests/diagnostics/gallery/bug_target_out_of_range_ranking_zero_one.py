# MISTAKE: learning to rank with MarginRankingLoss, CosineEmbeddingLoss and HingeEmbeddingLoss
# given 0/1 pair labels (as a classifier takes them) instead of +1/-1: the pairs labelled 0
# give a constant (or no) loss and never train. FIX: target = y * 2 - 1.
# expect: target_out_of_range ""
import torch, torch.nn as nn, torch.nn.functional as F
torch.manual_seed(0)
scorer = nn.Sequential(nn.Linear(8, 32), nn.ReLU(), nn.Linear(32, 1)); emb = nn.Linear(8, 16)
opt = torch.optim.Adam(list(scorer.parameters()) + list(emb.parameters()), lr=1e-3)
w = torch.randn(8)
rank, cos, hinge = nn.MarginRankingLoss(margin=0.5), nn.CosineEmbeddingLoss(margin=0.2), nn.HingeEmbeddingLoss(margin=1.0)
for step in range(20):
    a, b = torch.randn(32, 8), torch.randn(32, 8)
    target = (a @ w > b @ w).float()
    l1 = rank(scorer(a).squeeze(1), scorer(b).squeeze(1), target)
    l2 = cos(emb(a), emb(b), target)
    l3 = hinge(F.pairwise_distance(emb(a), emb(b)), target)
    loss = l1 + l2 + 0.1 * l3
    opt.zero_grad(); loss.backward(); opt.step()
    if step % 5 == 0: print(step, round(loss.item(), 4))
