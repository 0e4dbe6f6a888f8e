# MISTAKE: an autoencoder whose decoder ends in a sigmoid, trained with MSE
# against the raw 0..255 pixels: the output lies in (0, 1) and can never reach
# its targets; the sigmoid saturates.
# FIX: compare with img / 255 (or drop the sigmoid).
# expect: target_out_of_range "dec.1"
import torch, torch.nn as nn
torch.manual_seed(0)
class AE(nn.Module):
    def __init__(self):
        super().__init__()
        self.enc = nn.Sequential(nn.Linear(64, 16), nn.ReLU())
        self.dec = nn.Sequential(nn.Linear(16, 64), nn.Sigmoid())
    def forward(self, x): return self.dec(self.enc(x))
m = AE(); opt = torch.optim.Adam(m.parameters(), lr=1e-3)
for step in range(10):
    img = torch.randint(0, 256, (32, 64)).float()
    loss = nn.functional.mse_loss(m(img / 255), img)     # targets left at 0..255
    opt.zero_grad(); loss.backward(); opt.step()
print(round(loss.item(), 3))
