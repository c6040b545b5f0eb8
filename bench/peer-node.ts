/**
 * The peer comparison in Node, the second adapter: ours on Dawn (the `webgpu` package), transformers.js on
 * onnxruntime-node's WebGPU execution provider, which links a Dawn of its own; both find the same Vulkan driver
 * (VK_ICD_FILENAMES, Mesa lavapipe here), so the process must start with scripts/lavapipe-env.js applied.
 */
import { AutoModelForCausalLM, env as tjsEnv } from '@huggingface/transformers';
import { join } from 'node:path';
import { loadDecoderFromDir } from '../src/model';
import { WebGpuBackend } from '../src/tensor/webgpu';
import { loadTokenizerFromDir } from '../src/tokenizer';
import { type PeerHost, adapterLabel, loadTheirs, openRunners, oursRunner } from '../src/ui/peer-run';
import { PEER_ROOT, TINY_ROOT } from './peer-export';

export async function nodeHost(): Promise<PeerHost & { close(): void }> {
  tjsEnv.allowRemoteModels = false;
  tjsEnv.localModelPath = `${PEER_ROOT}/`;
  const backend = await WebGpuBackend.create();
  const r = backend.ctx.report;
  return {
    adapter: adapterLabel('Node', r),
    isFallbackAdapter: r.isFallback,
    runtime: `Node ${process.versions.node}; ours: Dawn (webgpu package), transformers.js: onnxruntime-node's own Dawn`,
    async promptIds(model, prompt) {
      return (await loadTokenizerFromDir(join(TINY_ROOT, model))).encode(prompt);
    },
    async open(model) {
      return openRunners([
        async () => oursRunner(await loadDecoderFromDir(join(TINY_ROOT, model), backend), 'committed'),
        async () => oursRunner(await loadDecoderFromDir(join(PEER_ROOT, model), backend), 'export'),
        () =>
          loadTheirs(
            () => AutoModelForCausalLM.from_pretrained(model, { device: 'webgpu', dtype: 'fp32' }),
            `${PEER_ROOT}/${model} on onnxruntime-node's WebGPU EP`,
          ),
      ]);
    },
    close: () => backend.ctx.device.destroy(),
  };
}
