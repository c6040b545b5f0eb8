/**
 * Ours at a real size in the page, in a module worker as the app's engine runs (workers/engine.worker.ts): a WebGPU
 * device of its own, the model from a URL, one run of src/ui/realsize-run.ts, the device destroyed after. peer.html
 * starts one per run (window.rmasPeer.realsize), so that every run loads cold and leaves nothing behind.
 */
import { expose } from 'comlink';
import { loadDecoderFromUrl } from '../model';
import { WebGpuBackend } from '../tensor/webgpu';
import { type RealsizeRun, runOursOnce, trackGpuBuffers } from './realsize-run';

const gpuBytes = trackGpuBuffers();

export interface RealsizeWorkerApi {
  run(req: { modelUrl: string; ids: number[]; newTokens: number; latent: number }): Promise<RealsizeRun & { adapter: string }>;
}

const api: RealsizeWorkerApi = {
  async run(req) {
    const backend = await WebGpuBackend.create();
    try {
      const r = await runOursOnce(() => loadDecoderFromUrl(req.modelUrl, backend), backend, req.ids, req.newTokens, req.latent);
      const a = backend.ctx.report;
      return { ...r, gpuPeakBytes: gpuBytes?.peak() ?? backend.ctx.peakBytes, adapter: a.architecture || a.description || a.vendor };
    } finally {
      backend.ctx.destroy();
    }
  },
};
expose(api);
