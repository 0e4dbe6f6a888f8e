# CORRECT: fast neural style transfer's training loop (a transformer net, a frozen loss
# network, content weight 1e5 and style weight 1e10 as in the reference recipe): the loss
# weights make the gradients large (~1e6), but Adam's steps are normalised by the
# gradients' own scale, so nothing explodes. No exploding_gradient.
# expect: none
import torch, torch.nn as nn
torch.manual_seed(0)
class Vgg(nn.Module):
    def __init__(self):
        super().__init__()
        self.slice1 = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.ReLU(inplace=True))
        self.slice2 = nn.Sequential(nn.MaxPool2d(2), nn.Conv2d(8, 16, 3, padding=1), nn.ReLU(inplace=True))
        for p in self.parameters(): p.requires_grad = False
    def forward(self, X):
        h = self.slice1(X); r1 = h; h = self.slice2(h); return r1, h
def gram_matrix(y):
    b, ch, h, w = y.size(); features = y.view(b, ch, w * h); return features.bmm(features.transpose(1, 2)) / (ch * h * w)
class TransformerNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.c1 = nn.Conv2d(3, 8, 3, padding=1); self.in1 = nn.InstanceNorm2d(8, affine=True); self.c2 = nn.Conv2d(8, 3, 3, padding=1); self.relu = nn.ReLU()
    def forward(self, x): return self.c2(self.relu(self.in1(self.c1(x))))
transformer = TransformerNet(); vgg = Vgg(); optimizer = torch.optim.Adam(transformer.parameters(), 1e-3); mse_loss = nn.MSELoss()
style = torch.rand(1, 3, 32, 32); gram_style = [gram_matrix(y) for y in vgg(style)]
for batch_id in range(6):
    x = torch.rand(4, 3, 32, 32); optimizer.zero_grad(); y = transformer(x)
    features_y = vgg(y); features_x = vgg(x)
    content_loss = 1e5 * mse_loss(features_y[1], features_x[1])
    style_loss = 0.
    for ft_y, gm_s in zip(features_y, gram_style):
        gm_y = gram_matrix(ft_y); style_loss += mse_loss(gm_y, gm_s[:4, :, :].expand_as(gm_y))
    style_loss *= 1e10; total_loss = content_loss + style_loss; total_loss.backward(); optimizer.step()
print(f"content {content_loss.item():.4f} style {style_loss.item():.4f}")
