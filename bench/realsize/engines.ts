/**
 * The engines of `npm run bench:realsize` (bench/realsize.ts), kept apart from the code that runs them so that
 * bench:gpu's plan (gpu-plan.ts) and the tests can name them without loading an engine.
 */
import type { QuantDType } from '../../src/formats/dtype';

export const ENGINES = [
  'ours-cpu', 'ours-cpu-q8_0', 'ours-cpu-q4_0', 'ours-webgpu', 'torch', 'tjs-cpu', 'tjs-wasm', 'tjs-webgpu', 'ours-page',
  'tjs-page',
] as const;
export type Engine = (typeof ENGINES)[number];

/**
 * The weight dtype an engine quantizes the projections to on load (`ours-cpu-q8_0`, `ours-cpu-q4_0`: the same
 * checkpoint, loaded with `quantize`), or null. Their ids are their own (quantized weights pick other tokens), so
 * they are compared with ours-cpu for speed only: what the bytes they save buy per token.
 */
export function quantOf(e: Engine): QuantDType | null {
  return e === 'ours-cpu-q8_0' ? 'q8_0' : e === 'ours-cpu-q4_0' ? 'q4_0' : null;
}

/** The engines that run on the WebGPU adapter Dawn finds in Node (a GPU where there is one). */
export const NODE_GPU_ENGINES: readonly Engine[] = ['ours-webgpu', 'tjs-webgpu'];

/** Each of ours' engines and the peers it is compared with (the same adapter, or the CPU). */
export const PEERS_OF: Partial<Record<Engine, Engine[]>> = {
  'ours-cpu': ['torch', 'tjs-cpu', 'tjs-wasm'], 'ours-webgpu': ['tjs-webgpu'], 'ours-page': ['tjs-page'],
  'ours-cpu-q8_0': ['ours-cpu'], 'ours-cpu-q4_0': ['ours-cpu'],
};

/** The families each peer covers (scripts/peer/torch_decode.py; scripts/peer/onnx_decoder.py's export). */
const TORCH_FAMILIES = ['qwen3', 'llama', 'gemma3_text', 'qwen3_5_text'];
const ONNX_FAMILIES = ['qwen3', 'llama', 'qwen2', 'gemma3_text'];

export const isTjs = (e: Engine): boolean => e === 'tjs-cpu' || e === 'tjs-wasm' || e === 'tjs-webgpu' || e === 'tjs-page';

/** Whether `engine` can run a model of `modelType` (the peers cover some families only). */
export function covers(engine: Engine, modelType: string): boolean {
  if (engine === 'torch') return TORCH_FAMILIES.includes(modelType);
  if (isTjs(engine)) return ONNX_FAMILIES.includes(modelType);
  return true;
}

/** `--engines a,b`: the names, each checked. */
export function parseEngines(list: string): Engine[] {
  const out = list.split(',').map((s) => s.trim()).filter(Boolean) as Engine[];
  for (const e of out) if (!ENGINES.includes(e)) throw new Error(`--engines: ${e} is not one of ${ENGINES.join(', ')}`);
  if (!out.length) throw new Error('--engines: name at least one engine');
  return out;
}
