# MISTAKE: uint8 images cast to float (0..255), then Normalize((0.1307,), (0.3081,)) as if they were in
# [0, 1] (torchvision v2 ToDtype(float32) without scale=True): inputs are about -0.4..827.
# FIX: divide by 255 before Normalize (ToDtype(torch.float32, scale=True)).
# expect: unnormalized_input ""
import torch, torch.nn as nn
torch.manual_seed(0)
imgs = torch.randint(0, 256, (256, 1, 28, 28), dtype=torch.uint8); labels = torch.randint(0, 10, (256,))
def transform(x):
    x = x.to(torch.float32)                 # ToDtype(torch.float32) -- forgot scale=True
    return (x - 0.1307) / 0.3081            # Normalize((0.1307,), (0.3081,))
model = nn.Sequential(nn.Conv2d(1, 8, 3), nn.ReLU(), nn.MaxPool2d(2), nn.Flatten(), nn.Linear(8 * 13 * 13, 10))
opt = torch.optim.Adam(model.parameters(), lr=1e-3)
for epoch in range(2):
    for i in range(0, 256, 32):
        x = transform(imgs[i:i+32])
        opt.zero_grad(); loss = nn.functional.cross_entropy(model(x), labels[i:i+32]); loss.backward(); opt.step()
    print(epoch, f"{loss.item():.6f}")
