# CORRECT: the twins of bug_unscaled_accumulation_*: accumulation with the loss divided
# by the number of micro-batches (loss / k, loss * (1 / k)), micro-batch losses summed
# then divided once, a reduction='sum' loss whose scale the user chose (divided by the
# sample count at the end), a DCGAN-style discriminator step (two different losses of
# one criterion, each backwarded once), and two losses of one forward backwarded in a
# loop (retain_graph) before one step.
# expect: none
import torch
import torch.nn.functional as F
from torch import nn

torch.manual_seed(0)


def batches(n, size=16):
    for _ in range(n):
        yield torch.randn(size, 10), torch.randint(0, 3, (size,))


def mlp():
    return nn.Sequential(nn.Linear(10, 32), nn.ReLU(), nn.Linear(32, 3))


K = 4


# loss / K and loss * (1 / K)
def divided():
    for scale in ("div", "mul"):
        model = mlp()
        opt = torch.optim.SGD(model.parameters(), lr=0.05)
        for i, (x, y) in enumerate(batches(12)):
            loss = nn.CrossEntropyLoss()(model(x), y)
            (loss / K if scale == "div" else loss * (1.0 / K)).backward()
            if (i + 1) % K == 0:
                opt.step()
                opt.zero_grad()


# summed over the micro-batches, divided once, one backward
def summed_then_divided():
    model = mlp()
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    for step in range(3):
        total = sum(F.cross_entropy(model(x), y) for x, y in batches(K)) / K
        opt.zero_grad()
        total.backward()
        opt.step()


# reduction='sum': the sum over every sample of the K micro-batches, divided at the end
def sum_reduction():
    model = mlp()
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    for step in range(3):
        opt.zero_grad()
        for x, y in batches(K):
            F.cross_entropy(model(x), y, reduction="sum").backward()
        for p in model.parameters():
            p.grad /= K * 16
        opt.step()


# DCGAN's discriminator: errD_real.backward(); errD_fake.backward(); optimizerD.step()
def dcgan_discriminator():
    netG = nn.Sequential(nn.Linear(4, 16), nn.ReLU(), nn.Linear(16, 10))
    netD = nn.Sequential(nn.Linear(10, 16), nn.LeakyReLU(0.2), nn.Linear(16, 1), nn.Sigmoid())
    bce = nn.BCELoss()
    optD = torch.optim.Adam(netD.parameters(), lr=2e-4, betas=(0.5, 0.999))
    optG = torch.optim.Adam(netG.parameters(), lr=2e-4, betas=(0.5, 0.999))
    for step in range(6):
        real = torch.randn(16, 10) + 2
        netD.zero_grad()
        errD_real = bce(netD(real).view(-1), torch.ones(16))
        errD_real.backward()
        fake = netG(torch.randn(16, 4))
        errD_fake = bce(netD(fake.detach()).view(-1), torch.zeros(16))
        errD_fake.backward()
        optD.step()
        netG.zero_grad()
        errG = bce(netD(fake).view(-1), torch.ones(16))
        errG.backward()
        optG.step()


# two losses of one forward, backwarded in a loop, one step
def two_losses_one_forward():
    trunk, head_a, head_b = nn.Linear(10, 16), nn.Linear(16, 3), nn.Linear(16, 1)
    params = [*trunk.parameters(), *head_a.parameters(), *head_b.parameters()]
    opt = torch.optim.SGD(params, lr=0.05)
    for x, y in batches(6):
        h = torch.relu(trunk(x))
        losses = [F.cross_entropy(head_a(h), y), F.mse_loss(head_b(h).squeeze(1), y.float())]
        opt.zero_grad()
        for loss in losses:
            loss.backward(retain_graph=True)
        opt.step()


divided()
summed_then_divided()
sum_reduction()
dcgan_discriminator()
two_losses_one_forward()
