# CORRECT: Fine-tuning a CNN with small batches while keeping every BatchNorm in eval mode (frozen running stats,
# affine params still trained), the classic `freeze_bn()` of detection/segmentation repos. No Dropout.
# expect: none
import torch, torch.nn as nn, torch.nn.functional as F
torch.manual_seed(0)
class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.features = nn.Sequential(nn.Conv2d(3, 16, 3, padding=1), nn.BatchNorm2d(16), nn.ReLU(),
                                      nn.Conv2d(16, 32, 3, stride=2, padding=1), nn.BatchNorm2d(32), nn.ReLU())
        self.seg = nn.Conv2d(32, 3, 1)
    def forward(self, x): return F.interpolate(self.seg(self.features(x)), scale_factor=2, mode='bilinear')
    def freeze_bn(self):
        for m in self.modules():
            if isinstance(m, nn.BatchNorm2d): m.eval()
model = Net()
model.load_state_dict({k: (v.uniform_(0.5, 1.5) if 'running_var' in k else v) for k, v in model.state_dict().items()})  # "pretrained" stats
opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
for step in range(10):
    model.train(); model.freeze_bn()
    x = torch.randn(2, 3, 16, 16); y = torch.randint(0, 3, (2, 16, 16))
    loss = F.cross_entropy(model(x), y)
    opt.zero_grad(); loss.backward(); opt.step()
    print(step, repr(loss.item()))
print('final', repr(sum(p.double().sum().item() for p in model.parameters())))
