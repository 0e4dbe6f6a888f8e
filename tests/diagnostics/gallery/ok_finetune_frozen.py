# Transfer learning: a pretrained-style backbone frozen with requires_grad_(False)
# and kept in eval mode (its BatchNorm statistics fixed), a new head trained with
# SGD + momentum and a OneCycleLR scheduler; validation with model.eval(). Then
# the last backbone block is unfrozen and added with add_param_group at a lower
# learning rate, its BatchNorm still in eval mode (fixed statistics, trained
# affine). Correct code.
# expect: none
import torch
import torch.nn as nn


def conv_bn(cin, cout):
    return nn.Sequential(nn.Conv2d(cin, cout, 3, padding=1, bias=False),
                         nn.BatchNorm2d(cout), nn.ReLU(inplace=True))


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.backbone = nn.Sequential(conv_bn(3, 8), nn.MaxPool2d(2), conv_bn(8, 16),
                                      nn.AdaptiveAvgPool2d(1), nn.Flatten())
        self.head = nn.Sequential(nn.Dropout(0.2), nn.Linear(16, 5))

    def forward(self, x):
        return self.head(self.backbone(x))


torch.manual_seed(0)
model = Model()
model.backbone.requires_grad_(False)
opt = torch.optim.SGD(model.head.parameters(), lr=0.01, momentum=0.9)
sched = torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=0.1, total_steps=20)
loss_fn = nn.CrossEntropyLoss(label_smoothing=0.1)


def train_epoch(n, scheduled):
    model.train()
    model.backbone.eval()
    for _ in range(n):
        x, y = torch.randn(8, 3, 16, 16), torch.randint(0, 5, (8,))
        opt.zero_grad()
        loss_fn(model(x), y).backward()
        opt.step()
        if scheduled:
            sched.step()


def validate():
    model.eval()
    with torch.no_grad():
        return sum((model(torch.randn(8, 3, 16, 16)).argmax(1) == 0).sum().item()
                   for _ in range(2))


train_epoch(4, True)
validate()
model.backbone[2].requires_grad_(True)
opt.add_param_group({"params": model.backbone[2].parameters(), "lr": 1e-3})
train_epoch(3, False)
validate()
