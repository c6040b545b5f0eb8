/**
 * One timed run of one engine at a real size, the same code in Node (bench/realsize.ts, a child process per run) and
 * in the page (peer.html's window.rmasPeer.realsize; ours in a worker of its own, src/ui/realsize-worker.ts):
 * load, greedy generate with EOS off (prefill, then decode), for ours then latent steps after the same prompt.
 * Cold: nothing runs before the timed generate, so shader or kernel compilation is in the prefill of every engine.
 */
import type { PreTrainedModel } from '@huggingface/transformers';
import { noGrad } from '../autograd';
import { type Decoder, generate } from '../model';
import { stepWeightBytes } from '../model/weights';
import type { Backend } from '../tensor/backend';
import { tidy } from '../tensor/scope';
import { transformersJsRunner } from './peer-run';

export interface RealsizeRun {
  ids: number[];
  loadS: number;
  prefillTokS: number;
  decodeTokS: number | null;
  /** Seconds per latent step (ours only). */
  latentStepS: number | null;
  weightBytesPerToken: number | null;
  /** The most GPU buffer bytes alive at once during the run, where the host can tell. */
  gpuPeakBytes: number | null;
}

/**
 * Ours: `load` (timed), generate `newTokens` ids, then `latent` latent steps on a fresh cache after the same prompt:
 * one decoder forward of an embedding row, as a latent thought runs, without the inner link's two d×d matmuls.
 */
export async function runOursOnce(
  load: () => Promise<Decoder>,
  backend: Backend,
  ids: number[],
  newTokens: number,
  latent: number,
): Promise<RealsizeRun> {
  const t0 = performance.now();
  const m = await load();
  const loadS = (performance.now() - t0) / 1000;
  try {
    const r = await generate(m, { inputIds: ids, maxNewTokens: newTokens, sampling: { greedy: true }, eosTokenIds: [] });
    let latentStepS: number | null = null;
    if (latent > 0) {
      const cache = m.newCache(ids.length + latent);
      const idsT = backend.fromValues(ids, [ids.length], 'i32');
      // the prompt's forward, then its last row (read back: the clock starts with the GPU idle) as the first input
      const hidden = noGrad(() => tidy(() => m.forward({ inputIds: idsT, cache }).hidden));
      const all = await hidden.read();
      hidden.dispose();
      const d = m.config.hidden;
      let h = backend.fromValues(all.subarray(all.length - d), [1, d]);
      const t1 = performance.now();
      for (let i = 0; i < latent; i++) {
        const next = noGrad(() => tidy(() => m.forward({ inputsEmbeds: h, cache }).hidden));
        h.dispose();
        h = next;
      }
      await h.read();
      latentStepS = (performance.now() - t1) / 1000 / latent;
      h.dispose();
      idsT.dispose();
      cache.dispose();
    }
    return {
      ids: r.tokens, loadS, prefillTokS: r.prefillTokensPerSec, decodeTokS: newTokens > 1 ? r.decodeTokensPerSec : null,
      latentStepS, weightBytesPerToken: stepWeightBytes(m.weights), gpuPeakBytes: null,
    };
  } finally {
    m.dispose();
  }
}

/** transformers.js: `load` (timed), then generate `newTokens` ids, timed as peer-run's runner times them. */
export async function runTheirsOnce(load: () => Promise<PreTrainedModel>, ids: number[], newTokens: number): Promise<RealsizeRun> {
  const t0 = performance.now();
  const runner = transformersJsRunner(await load());
  const loadS = (performance.now() - t0) / 1000;
  try {
    // the runner decodes 1 + tokens ids: the first from the prefill
    const r = await runner.run(ids, newTokens - 1);
    return {
      ids: r.ids, loadS, prefillTokS: r.prefillTokensPerSec, decodeTokS: newTokens > 1 ? r.decodeTokensPerSec : null,
      latentStepS: null, weightBytesPerToken: null, gpuPeakBytes: null,
    };
  } finally {
    await runner.dispose();
  }
}

/**
 * Counts the bytes of GPU buffers alive in this realm (every device: ours and ONNX Runtime's alike) by wrapping
 * GPUDevice.createBuffer and GPUBuffer.destroy; null where the realm has no WebGPU classes (Node's Dawn has them
 * only once its globals are installed, and onnxruntime-node's own Dawn is out of reach).
 */
export function trackGpuBuffers(): { live(): number; peak(): number; reset(): void } | null {
  const g = globalThis as { GPUDevice?: { prototype: GPUDevice }; GPUBuffer?: { prototype: GPUBuffer } };
  if (!g.GPUDevice || !g.GPUBuffer) return null;
  let live = 0;
  let peak = 0;
  const sizes = new WeakMap<GPUBuffer, number>();
  const create = g.GPUDevice.prototype.createBuffer;
  const destroy = g.GPUBuffer.prototype.destroy;
  g.GPUDevice.prototype.createBuffer = function (this: GPUDevice, d: GPUBufferDescriptor) {
    const b = create.call(this, d);
    sizes.set(b, d.size);
    live += d.size;
    peak = Math.max(peak, live);
    return b;
  };
  g.GPUBuffer.prototype.destroy = function (this: GPUBuffer) {
    live -= sizes.get(this) ?? 0;
    sizes.delete(this);
    return destroy.call(this);
  };
  return { live: () => live, peak: () => peak, reset: () => void (peak = live) };
}
