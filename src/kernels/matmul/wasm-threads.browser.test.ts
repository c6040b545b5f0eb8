// The threaded CPU kernels in the page: the test server sends the app's cross-origin isolation headers (vite.config.ts),
// so a dedicated worker has SharedArrayBuffer, starts the kernel workers (Workers from a blob) and splits a GEMV
// among them with the single thread's bits; the page's main thread, which may not block, is offered one thread.
import { describe, expect, it } from 'vitest';
import { WasmKernels } from './wasm';

describe('the CPU kernels on threads in the page', () => {
  it('run on 3 threads in a cross-origin isolated worker, with the single thread’s bits', async () => {
    expect(crossOriginIsolated).toBe(true);
    const worker = new Worker(new URL('./wasm-threads.probe.ts', import.meta.url), { type: 'module' });
    const got = await new Promise<Record<string, unknown>>((resolve, reject) => {
      worker.onmessage = (e) => resolve(e.data);
      worker.onerror = (e) => reject(new Error(e.message));
      worker.postMessage({ threads: 3 });
    });
    worker.terminate();
    expect(got).toMatchObject({ isolated: true, shared: true, threads: 3, note: '', ready: true, equal: true, packedEqual: true });
    expect(got.workerRows).toBeGreaterThan(0);
    // Chrome has relaxed SIMD: the FMA build runs where the hardware fuses, and its product's bits are then its own
    expect(got.unfusedDiffers).toBe(got.fma);
    console.log(`[page] packed multiply-adds fused: ${String(got.fma)}`);
  });

  it('run on one thread on the page’s main thread, which may not block, and say why', () => {
    const k = WasmKernels.load({ threads: 2 });
    if (typeof k === 'string') throw new Error(k);
    expect([k.threads, k.shared, k.threadsNote]).toEqual([1, true, "this thread may not block (a page's main thread)"]);
  });
});
