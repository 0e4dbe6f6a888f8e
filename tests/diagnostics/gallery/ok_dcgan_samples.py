# pytorch/examples-style DCGAN: the generator is never put in eval mode; every few
# iterations it draws the fixed-noise grid under torch.no_grad() (still in train
# mode, as the DCGAN recipe does), then training goes on. That is a sample taken
# while training, not an evaluation: no finding.
# expect: none
import torch
from torch import nn

torch.manual_seed(0)
nz, ngf, ndf = 8, 8, 8
netG = nn.Sequential(
    nn.ConvTranspose2d(nz, ngf * 2, 4, 1, 0, bias=False), nn.BatchNorm2d(ngf * 2), nn.ReLU(True),
    nn.ConvTranspose2d(ngf * 2, ngf, 4, 2, 1, bias=False), nn.BatchNorm2d(ngf), nn.ReLU(True),
    nn.ConvTranspose2d(ngf, 1, 4, 2, 1, bias=False), nn.Tanh())
netD = nn.Sequential(
    nn.Conv2d(1, ndf, 4, 2, 1, bias=False), nn.LeakyReLU(0.2, inplace=True),
    nn.Conv2d(ndf, ndf * 2, 4, 2, 1, bias=False), nn.BatchNorm2d(ndf * 2),
    nn.LeakyReLU(0.2, inplace=True), nn.Conv2d(ndf * 2, 1, 4, 1, 0, bias=False), nn.Sigmoid())
criterion = nn.BCELoss()
fixed_noise = torch.randn(16, nz, 1, 1)
optD = torch.optim.Adam(netD.parameters(), lr=2e-4, betas=(0.5, 0.999))
optG = torch.optim.Adam(netG.parameters(), lr=2e-4, betas=(0.5, 0.999))
samples = []
for i in range(7):
    real = torch.randn(8, 1, 16, 16)
    netD.zero_grad()
    label = torch.full((8,), 1.0)
    errD_real = criterion(netD(real).view(-1), label)
    errD_real.backward()
    fake = netG(torch.randn(8, nz, 1, 1))
    label.fill_(0.0)
    errD_fake = criterion(netD(fake.detach()).view(-1), label)
    errD_fake.backward()
    optD.step()
    netG.zero_grad()
    label.fill_(1.0)
    errG = criterion(netD(fake).view(-1), label)
    errG.backward()
    optG.step()
    if i % 3 == 0 or i == 6:
        with torch.no_grad():
            samples.append(netG(fixed_noise).detach().cpu())
