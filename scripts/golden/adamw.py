#!/usr/bin/python3
"""Golden numbers for src/kernels/adamw: torch 1.13 (Debian python3-torch) AdamW, float32.

Run: /usr/bin/python3 scripts/golden/adamw.py > src/kernels/adamw/golden/adamw.json
Two parameter groups as upstream builds them (matrices decay, biases/LayerNorm do not), a changing
learning rate, and clip_grad_norm_(max_norm=1.0) before every step (steps 2 and 4 get large
gradients, so the clip is active there and idle elsewhere).
"""
import torch


from goldenjson import dump

torch.manual_seed(0)
f = torch.float32
w = torch.randn(3, 4, dtype=f).requires_grad_(True)
bias = torch.randn(4, dtype=f).requires_grad_(True)
init = {"w": w.detach().flatten().tolist(), "bias": bias.detach().flatten().tolist()}
opt = torch.optim.AdamW(
    [{"params": [w], "weight_decay": 0.1}, {"params": [bias], "weight_decay": 0.0}],
    lr=1e-3, betas=(0.9, 0.95), eps=1e-8,
)
lrs = [1e-3, 5e-4, 2e-3, 1e-3, 7e-4]
steps = []
for t, lr in enumerate(lrs, start=1):
    k = 10.0 if t in (2, 4) else 0.1
    gw = torch.randn(3, 4, dtype=f) * k
    gb = torch.randn(4, dtype=f) * k
    w.grad, bias.grad = gw.clone(), gb.clone()
    total = torch.nn.utils.clip_grad_norm_([w, bias], max_norm=1.0)
    for group in opt.param_groups:
        group["lr"] = lr
    opt.step()
    steps.append({
        "lr": lr, "grad_w": gw.flatten().tolist(), "grad_bias": gb.flatten().tolist(),
        "total_norm": total.item(),
        "w": w.detach().flatten().tolist(), "bias": bias.detach().flatten().tolist(),
    })
state = {
    "m_w": opt.state[w]["exp_avg"].flatten().tolist(), "v_w": opt.state[w]["exp_avg_sq"].flatten().tolist(),
    "m_bias": opt.state[bias]["exp_avg"].flatten().tolist(), "v_bias": opt.state[bias]["exp_avg_sq"].flatten().tolist(),
}
print(dump({"torch": torch.__version__, "betas": [0.9, 0.95], "eps": 1e-8, "weight_decay": 0.1,
            "max_norm": 1.0, "init": init, "steps": steps, "final_state": state}))
