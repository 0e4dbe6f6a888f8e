# CORRECT: pix2pix-style image-to-image GAN trained with batch_size=1 and BatchNorm2d on
# purpose (batch statistics of one image: an instance norm); samples are drawn with the
# generator kept in training mode, as pix2pix does at test time, so the running
# statistics are never used.
# expect: none
import torch
from torch import nn

torch.manual_seed(0)


def down(cin, cout, norm=True):
    layers = [nn.Conv2d(cin, cout, 4, 2, 1, bias=not norm)]
    if norm:
        layers.append(nn.BatchNorm2d(cout))
    return nn.Sequential(*layers, nn.LeakyReLU(0.2))


def up(cin, cout):
    return nn.Sequential(nn.ConvTranspose2d(cin, cout, 4, 2, 1, bias=False), nn.BatchNorm2d(cout),
                         nn.Dropout(0.5), nn.ReLU())


class UNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.d1, self.d2, self.d3 = down(3, 8, norm=False), down(8, 16), down(16, 32)
        self.u1, self.u2 = up(32, 16), up(32, 8)
        self.out = nn.Sequential(nn.ConvTranspose2d(16, 3, 4, 2, 1), nn.Tanh())

    def forward(self, x):
        a = self.d1(x)
        b = self.d2(a)
        c = self.d3(b)
        y = self.u1(c)
        y = self.u2(torch.cat([y, b], 1))
        return self.out(torch.cat([y, a], 1))


netG = UNet()
netD = nn.Sequential(down(6, 8, norm=False), down(8, 16), nn.Conv2d(16, 1, 4, 1, 1))
optG = torch.optim.Adam(netG.parameters(), lr=2e-4, betas=(0.5, 0.999))
optD = torch.optim.Adam(netD.parameters(), lr=2e-4, betas=(0.5, 0.999))
gan_loss, l1 = nn.BCEWithLogitsLoss(), nn.L1Loss()
pairs = [(torch.rand(1, 3, 32, 32) * 2 - 1, torch.rand(1, 3, 32, 32) * 2 - 1) for _ in range(6)]
for epoch in range(2):
    for real_a, real_b in pairs:
        fake_b = netG(real_a)
        optD.zero_grad()
        pred_fake = netD(torch.cat([real_a, fake_b.detach()], 1))
        pred_real = netD(torch.cat([real_a, real_b], 1))
        loss_d = 0.5 * (gan_loss(pred_fake, torch.zeros_like(pred_fake))
                        + gan_loss(pred_real, torch.ones_like(pred_real)))
        loss_d.backward()
        optD.step()
        optG.zero_grad()
        pred_fake = netD(torch.cat([real_a, fake_b], 1))
        loss_g = gan_loss(pred_fake, torch.ones_like(pred_fake)) + 100 * l1(fake_b, real_b)
        loss_g.backward()
        optG.step()
    with torch.no_grad():   # pix2pix samples with batch statistics (no netG.eval())
        sample = netG(pairs[0][0])
    print(f"epoch {epoch} loss_d {loss_d.item():.4f} loss_g {loss_g.item():.4f} "
          f"sample {sample.mean().item():.4f}")
