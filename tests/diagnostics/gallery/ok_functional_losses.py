# CORRECT: every functional loss with matching shapes, sigmoid followed by
# binary_cross_entropy (not the logits version), log_softmax followed by nll_loss.
# expect: none
import torch
import torch.nn.functional as F
from torch import nn

torch.manual_seed(0)
model = nn.Sequential(nn.Linear(6, 16), nn.ReLU(), nn.Linear(16, 4))
opt = torch.optim.Adam(model.parameters(), lr=1e-3)
for step in range(4):
    x = torch.randn(32, 6)
    y_reg, y_bin = torch.randn(32, 1), torch.randint(0, 2, (32, 1)).float()
    y_cls = torch.randint(0, 4, (32,))
    out = model(x)
    reg = out[:, :1]
    loss = (F.mse_loss(reg, y_reg) + F.l1_loss(reg, y_reg) + F.smooth_l1_loss(reg, y_reg)
            + F.huber_loss(reg, y_reg) + F.binary_cross_entropy(torch.sigmoid(out[:, 1:2]), y_bin)
            + F.binary_cross_entropy_with_logits(out[:, 2:3], y_bin)
            + F.nll_loss(F.log_softmax(out, dim=1), y_cls) + F.cross_entropy(out, y_cls)
            + F.mse_loss(reg, torch.tensor(0.5)))           # a scalar target broadcasts fine
    opt.zero_grad()
    loss.backward()
    opt.step()
