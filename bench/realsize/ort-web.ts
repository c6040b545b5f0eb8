/**
 * transformers.js on onnxruntime-web's WebAssembly EP in Node (`tjs-wasm` in bench:realsize): what transformers.js runs
 * in a browser without WebGPU, and the peer with the instruction set of ours' CPU backend (WebAssembly SIMD with
 * threads) rather than onnxruntime-node's native AVX-512 kernels. transformers.js picks its ONNX Runtime when it is
 * first imported (the node build takes onnxruntime-node unless one is installed under Symbol.for('onnxruntime')), and
 * our tokenizer imports it: `useOrtWeb` must run before that, so this file is the entry point of the processes that
 * run it:
 *
 *   node --import tsx bench/realsize/ort-web.ts ONNX_ROOT NAME IDS NEW [THREADS]
 * prints {"ids": [...], "logits": [...]} (greedy ids after the prompt IDS, comma-separated; the prompt's last logits:
 * the test's check), and `ort-web.ts --child tjs-wasm MODEL …` is bench:realsize's child for the engine (its
 * arguments as bench/realsize.ts --child takes them), started after onnxruntime-web is in place.
 */
import { createRequire } from 'node:module';
import { readFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';

/** The onnxruntime-web that transformers.js depends on (its own copy, not necessarily the top-level one). */
function ortWebPath(): string {
  const req = createRequire(resolve('node_modules/@huggingface/transformers/package.json'));
  return req.resolve('onnxruntime-web');
}

/**
 * Installs onnxruntime-web (its Node build: the WebAssembly EP, `threads` threads) as transformers.js' runtime, its
 * .wasm files loaded from node_modules rather than the CDN transformers.js points the web build at. Installing it
 * after transformers.js was imported does nothing: `assertOrtWeb` checks, once transformers.js is loaded.
 */
export async function useOrtWeb(threads: number): Promise<void> {
  const key = Symbol.for('onnxruntime');
  const g = globalThis as Record<symbol, unknown>;
  if (g[key]) return;
  const path = ortWebPath();
  const ort = (await import(pathToFileURL(path).href)) as { env: { wasm: { numThreads?: number; wasmPaths?: string } } };
  ort.env.wasm.numThreads = threads;
  ort.env.wasm.wasmPaths = `${pathToFileURL(dirname(path)).href}/`;
  g[key] = ort;
}

/** Throws unless transformers.js (its `env`) runs onnxruntime-web: it was imported before `useOrtWeb` otherwise. */
export function assertOrtWeb(env: { backends: { onnx: unknown } }): void {
  const onnx = env.backends.onnx as { versions?: { web?: string } } | undefined;
  if (!onnx?.versions?.web) {
    throw new Error('transformers.js was imported before useOrtWeb installed onnxruntime-web: it runs onnxruntime-node');
  }
}

/**
 * Options for transformers.js' from_pretrained of the export `root`/`name` on the installed runtime: its default EP
 * (wasm), f32 weights, and the export's external data files by path. transformers.js in Node hands ONNX Runtime the
 * model's path and leaves the external data for onnxruntime-node to find beside it; onnxruntime-web reads only what it
 * is given (Node's fs reads a path), so the files are named here, as the export's config counts them (`model.onnx_data`,
 * `_1`, … as transformers.js names them).
 */
export function ortWebLoad(root: string, name: string) {
  const config = JSON.parse(readFileSync(join(root, name, 'config.json'), 'utf8')) as Record<string, unknown>;
  // a count for every file of the export, or a count per file name (transformers.js reads both forms)
  const format = (config['transformers.js_config'] as { use_external_data_format?: unknown } | undefined)?.use_external_data_format;
  const perFile = typeof format === 'object' && format !== null ? format as Record<string, unknown> : null;
  const chunks = Number((perFile ? perFile['model.onnx'] ?? perFile.model : format) ?? 0);
  if (!Number.isInteger(chunks) || chunks < 0) {
    throw new Error(`${join(root, name, 'config.json')}: use_external_data_format ${JSON.stringify(format)} is not a file count`);
  }
  const files = Array.from({ length: chunks }, (_, i) => `model.onnx_data${i === 0 ? '' : `_${i}`}`);
  const externalData = files.map((f) => ({ path: f, data: resolve(root, name, 'onnx', f) }));
  return { device: 'auto', dtype: 'fp32', ...(files.length ? { session_options: { externalData } } : {}) } as const;
}

async function main(argv: string[]): Promise<void> {
  if (argv[0] === '--child') {
    await useOrtWeb(Number(argv[6]));
    const { child } = await import('../realsize');
    return child(argv.slice(1));
  }
  const [root, name, idList, newTokens, threads = '1'] = argv;
  if (!root || !name || !idList || !newTokens) throw new Error('usage: ort-web.ts ONNX_ROOT NAME IDS NEW [THREADS]');
  await useOrtWeb(Number(threads));
  const { AutoModelForCausalLM, Tensor, env } = await import('@huggingface/transformers');
  const { runTheirsOnce } = await import('../../src/ui/realsize-run');
  assertOrtWeb(env);
  env.allowRemoteModels = false;
  env.localModelPath = `${resolve(root)}/`;
  const ids = idList.split(',').map(Number);
  const load = () => AutoModelForCausalLM.from_pretrained(name, ortWebLoad(root, name));
  const r = await runTheirsOnce(load, ids, Number(newTokens));
  const model = await load();
  const big = BigInt64Array.from(ids, BigInt);
  const out = (await model({ input_ids: new Tensor('int64', big, [1, ids.length]),
    attention_mask: new Tensor('int64', big.map(() => 1n), [1, ids.length]) })) as { logits: { data: Float32Array; dims: number[] } };
  const vocab = out.logits.dims.at(-1)!;
  await model.dispose();
  process.stdout.write(`${JSON.stringify({ ids: r.ids, logits: Array.from(out.logits.data.subarray(out.logits.data.length - vocab)) })}\n`);
}

if (process.argv[1] && resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  main(process.argv.slice(2)).then(() => process.exit(0), (e) => {
    console.error(e);
    process.exit(1);
  });
}
