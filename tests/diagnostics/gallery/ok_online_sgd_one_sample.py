# CORRECT: online learning: one sample per step for a 5-weight linear regression with plain SGD
# (lr=0.05): the first steps move the small initial weights by about their norm while the loss
# falls from ~36 to ~0.001; no learning rate is too high.
# expect: none
import torch, torch.nn as nn
torch.manual_seed(0)
w_true = torch.randn(5, 1)
model = nn.Linear(5, 1); opt = torch.optim.SGD(model.parameters(), lr=0.05)
for t in range(60):
    x = torch.randn(1, 5); y = x @ w_true + 0.01 * torch.randn(1, 1)
    opt.zero_grad(); loss = nn.functional.mse_loss(model(x), y); loss.backward(); opt.step()
    if t % 20 == 0: print(t, round(loss.item(), 5))
print([round(v, 3) for v in model.weight.view(-1).tolist()])
