# MISTAKE: an autoencoder whose optimizer is given only the encoder's parameters.
# expect: param_not_in_optimizer "decoder"
import torch
from torch import nn


class AE(nn.Module):
    def __init__(self):
        super().__init__()
        self.encoder = nn.Sequential(nn.Linear(20, 8), nn.ReLU())
        self.decoder = nn.Sequential(nn.Linear(8, 20), nn.Sigmoid())

    def forward(self, x):
        return self.decoder(self.encoder(x))


torch.manual_seed(0)
model = AE()
opt = torch.optim.Adam(model.encoder.parameters(), lr=1e-3)
for step in range(4):
    x = torch.rand(16, 20)
    opt.zero_grad()
    nn.functional.binary_cross_entropy(model(x), x).backward()
    opt.step()
