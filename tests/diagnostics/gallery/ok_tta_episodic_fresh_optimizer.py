# CORRECT: episodic test-time adaptation (MEMO/TENT-style): for each test batch restore the trained
# weights and build a fresh optimizer (state reset on purpose), one entropy step, then predict.
# expect: none
import copy, torch, torch.nn as nn, torch.nn.functional as F
torch.manual_seed(0)
model = nn.Sequential(nn.Linear(8, 32), nn.LayerNorm(32), nn.ReLU(), nn.Linear(32, 4))
opt = torch.optim.Adam(model.parameters(), lr=1e-2)
for step in range(6):  # brief source training
    x, y = torch.randn(32, 8), torch.randint(0, 4, (32,))
    loss = F.cross_entropy(model(x), y); opt.zero_grad(); loss.backward(); opt.step()
    print('train', step, repr(loss.item()))
model.requires_grad_(False); model[1].requires_grad_(True)
source_state = copy.deepcopy(model.state_dict())
preds = []
for i in range(8):
    model.load_state_dict(source_state)
    tta_opt = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=1e-3)
    x = torch.randn(16, 8) + 0.5
    p = model(x).softmax(-1)
    ent = -(p * p.clamp_min(1e-8).log()).sum(-1).mean()
    tta_opt.zero_grad(); ent.backward(); tta_opt.step()
    with torch.no_grad(): preds.append(model(x).argmax(-1))
    print('tta', i, repr(ent.item()))
print('preds', torch.cat(preds)[:16].tolist())
print('final', repr(sum(p.double().sum().item() for p in model.parameters())))
