# MISTAKE: a VAE whose KL term lost its minus sign: the loss rewards a large KL, logvar grows
# without bound and exp(logvar) overflows (gradients explode first, then turn Inf/NaN).
# FIX: kld = -0.5 * torch.sum(1 + logvar - mu.pow(2) - logvar.exp()).
# expect: non_finite "fc22"
# expect: exploding_gradient ""
import torch, torch.nn as nn, torch.nn.functional as F
torch.manual_seed(0)
class VAE(nn.Module):
    def __init__(self):
        super().__init__(); self.fc1 = nn.Linear(64, 32); self.fc21 = nn.Linear(32, 4); self.fc22 = nn.Linear(32, 4); self.fc3 = nn.Linear(4, 32); self.fc4 = nn.Linear(32, 64)
    def forward(self, x):
        h = F.relu(self.fc1(x)); mu, logvar = self.fc21(h), self.fc22(h)
        z = mu + torch.randn_like(mu) * torch.exp(0.5 * logvar)
        return torch.sigmoid(self.fc4(F.relu(self.fc3(z)))), mu, logvar
model = VAE(); opt = torch.optim.Adam(model.parameters(), lr=1e-2)
data = torch.rand(256, 64)
for epoch in range(6):
    for i in range(0, 256, 32):
        x = data[i:i + 32]
        recon, mu, logvar = model(x)
        bce = F.binary_cross_entropy(recon, x, reduction="sum")
        kld = 0.5 * torch.sum(1 + logvar - mu.pow(2) - logvar.exp())
        loss = bce + kld
        opt.zero_grad(); loss.backward(); opt.step()
    print(epoch, loss.item())
