/**
 * A worker for wasm-threads.browser.test.ts: the page's case of the threaded kernels, run where the engine runs them
 * (a dedicated worker, which may block in Atomics.wait). Posts what it found: whether the worker is cross-origin
 * isolated, the threads that ran, and a bf16 GEMV and a 16-row product at Qwen3-0.6B's gate/up width on 1 and on
 * `threads` threads, the product also on the unfused build.
 */
import { encode } from '../../formats/encode';
import { planMatmul } from './plan';
import { WasmKernels } from './wasm';

self.onmessage = async (e: MessageEvent<{ threads: number }>) => {
  const one = WasmKernels.load({ threads: 1 });
  const many = WasmKernels.load({ threads: e.data.threads });
  if (typeof one === 'string' || typeof many === 'string') return self.postMessage({ error: String(one) + String(many) });
  // the workers start once this worker's event loop runs: wait for them
  for (let i = 0; i < 200 && many.pool && !many.pool.ready; i++) await new Promise((r) => setTimeout(r, 25));
  const [N, K, M] = [3072, 1024, 2];
  const w = new Uint16Array(encode('bf16', Float32Array.from({ length: N * K }, (_, i) => Math.sin(i) * 0.05), [N, K]).buffer);
  const x = Float32Array.from({ length: M * K }, (_, i) => Math.cos(i));
  const p = planMatmul({ shape: [M, K], dtype: 'f32' }, { shape: [N, K], dtype: 'bf16' }, undefined, { transB: true });
  const [y1, y2] = [new Float32Array(M * N), new Float32Array(M * N)];
  one.matmul(p, x, w, 'bf16', null, y1);
  for (let r = 0; r < 4; r++) many.matmul(p, x, w, 'bf16', null, y2);
  // a prompt's product (the packed kernels) on the threads, and on the unfused build: fused only where `fma` says
  const unfused = WasmKernels.load({ threads: 1, fma: false });
  if (typeof unfused === 'string') return self.postMessage({ error: unfused });
  const P = 16;
  const xp = Float32Array.from({ length: P * K }, (_, i) => Math.cos(i * 0.37));
  const pp = planMatmul({ shape: [P, K], dtype: 'f32' }, { shape: [N, K], dtype: 'bf16' }, undefined, { transB: true });
  const [z1, z2, z3] = [new Float32Array(P * N), new Float32Array(P * N), new Float32Array(P * N)];
  one.matmul(pp, xp, w, 'bf16', null, z1);
  many.matmul(pp, xp, w, 'bf16', null, z2);
  unfused.matmul(pp, xp, w, 'bf16', null, z3);
  self.postMessage({
    isolated: (self as { crossOriginIsolated?: boolean }).crossOriginIsolated === true,
    shared: many.shared,
    threads: many.threads,
    note: many.threadsNote,
    ready: many.pool?.ready ?? false,
    workerRows: many.pool?.workerRows ?? 0,
    equal: y1.every((v, i) => Object.is(v, y2[i])),
    packedEqual: z1.every((v, i) => Object.is(v, z2[i])),
    fma: many.fma,
    unfusedDiffers: z1.some((v, i) => !Object.is(v, z3[i])),
  });
};
