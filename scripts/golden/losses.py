#!/usr/bin/python3
"""Golden numbers for src/kernels/loss: torch 1.13 (Debian python3-torch), float64.

Run: /usr/bin/python3 scripts/golden/losses.py > src/kernels/loss/golden/losses.json
Inputs are written into the JSON too, so the test needs no Python.
"""
import torch


from goldenjson import dump

import torch.nn.functional as F

torch.manual_seed(0)
d = torch.float64
out = {"torch": torch.__version__}


def grad_case(fn, *xs):
    xs = [x.clone().requires_grad_(True) for x in xs]
    loss = fn(*xs)
    loss.backward()
    return loss.item(), [x.grad.flatten().tolist() for x in xs]


# cross-entropy, ignore index -100, mean over labelled rows
logits = torch.randn(4, 5, dtype=d) * 2
labels = torch.tensor([2, -100, 0, 4])
loss, (g,) = grad_case(lambda x: F.cross_entropy(x, labels, ignore_index=-100), logits)
big = logits * 500  # large logits: the shift by the row max must keep this finite
loss_big, (g_big,) = grad_case(lambda x: F.cross_entropy(x, labels, ignore_index=-100), big)
none = F.cross_entropy(logits, torch.full((4,), -100), ignore_index=-100).item()
out["cross_entropy"] = {
    "shape": [4, 5], "logits": logits.flatten().tolist(), "labels": labels.tolist(),
    "loss": loss, "grad": g,
    "big_logits": big.flatten().tolist(), "big_loss": loss_big, "big_grad": g_big,
    "all_ignored_torch": str(none),  # torch: nan; ours: 0 by choice
}

# cosine similarity: torch 1.13 clamps each squared norm at eps^2 on its own (not the product)
ca = torch.tensor([[1e-9, 0.0], [1e-9, 0.0], [3e-9, 4e-9], [0.0, 0.0], [3.0, 4.0]], dtype=d)
cb = torch.tensor([[1.0, 0.0], [1e-9, 0.0], [1e-9, 2e-9], [1.0, 2.0], [4.0, 3.0]], dtype=d)
xa, xb = ca.clone().requires_grad_(True), cb.clone().requires_grad_(True)
s = F.cosine_similarity(xa, xb, dim=-1)
s.sum().backward()
out["cosine_similarity"] = {
    "shape": [5, 2], "a": ca.flatten().tolist(), "b": cb.flatten().tolist(),
    "sim": s.tolist(), "grad_a_of_sum": xa.grad.flatten().tolist(), "grad_b_of_sum": xb.grad.flatten().tolist(),
}

# masked cosine loss and MSE as the inner loop uses them (masked mean over rows; MSE averages over d first)
a = torch.randn(5, 3, dtype=d)
b = torch.randn(5, 3, dtype=d)
mask = torch.tensor([1.0, 0.0, 1.0, 1.0, 1.0], dtype=d)


def masked_mean(v, m):
    return (v * m).sum() / m.sum()


cos_loss, (cga, cgb) = grad_case(lambda x, y: masked_mean(1 - F.cosine_similarity(x, y, dim=-1), mask), a, b)
mse_loss, (mga, mgb) = grad_case(lambda x, y: masked_mean(((x - y) ** 2).mean(-1), mask), a, b)
cos_all, _ = grad_case(lambda x, y: (1 - F.cosine_similarity(x, y, dim=-1)).mean(), a, b)
mse_all, _ = grad_case(lambda x, y: F.mse_loss(x, y), a, b)
out["pair"] = {
    "shape": [5, 3], "a": a.flatten().tolist(), "b": b.flatten().tolist(), "mask": mask.tolist(),
    "cos_loss": cos_loss, "cos_grad_a": cga, "cos_grad_b": cgb,
    "mse_loss": mse_loss, "mse_grad_a": mga, "mse_grad_b": mgb,
    "cos_loss_unmasked": cos_all, "mse_loss_unmasked": mse_all,
}
print(dump(out))
