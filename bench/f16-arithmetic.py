"""What f16 arithmetic would cost a decode GEMV in accuracy (docs/performance.md, "f32 arithmetic").

Random [512, K] f16 weights (std 0.02, as a trained projection's) against an f32 input, in three ways: f32 products
and sums (what the fused GEMV does), f16 products summed eight at a time in f16 (one vec4 word of halves) and then in
f32, and everything in f16. Prints the largest error of each against float64, as a fraction of the output's peak.
Run with /usr/bin/python3 (numpy).
"""
import numpy as np

rng = np.random.default_rng(0)
print('K      f32        f16 x8 + f32   all f16')
for K in (1024, 2048, 6144):
    W = (rng.standard_normal((512, K)) * 0.02).astype(np.float16)
    x = rng.standard_normal(K).astype(np.float32)
    ref = W.astype(np.float64) @ x.astype(np.float64)
    f32 = (W.astype(np.float32) @ x).astype(np.float64)
    products = (W * x.astype(np.float16)).astype(np.float16).reshape(512, K // 8, 8)
    words = np.zeros((512, K // 8), np.float16)
    for j in range(8):
        words = (words + products[:, :, j]).astype(np.float16)
    mixed = words.astype(np.float32).sum(1).astype(np.float64)
    half = np.zeros(512, np.float16)
    for w in range(K // 8):
        half = (half + words[:, w]).astype(np.float16)
    peak = np.abs(ref).max()
    errs = [np.abs(y - ref).max() / peak for y in (f32, mixed, half.astype(np.float64))]
    print(f'{K:<6} ' + '  '.join(f'{e:.1e}'.ljust(12) for e in errs))
