/**
 * `npm run bench:realsize`: the engine at the sizes users load, beside PyTorch on the CPU, in one run. Random weights
 * at the released configs (bench/realsize/models.ts, made once under .cache/realsize/), the real tokenizers; per model
 * and engine, in child processes run in turn (rep 1 of every engine, then rep 2, …), medians and spreads of:
 *   load seconds, peak RSS, prefill tokens/s at each prompt length, decode tokens/s, latent steps/s (one decoder
 *   forward of an embedding row on the cache, as a latent thought runs, without the inner link's two d×d matmuls) and
 *   the latent/decode step-time ratio, weight bytes read per decoded token and the share of the machine's memory
 *   bandwidth that is (the bench measures it: the CPU backend's threads reading at once, memoryBandwidth).
 * Engines: ours on the CPU backend (`ours-cpu`; `ours-cpu-q8_0` and `ours-cpu-q4_0` quantize the projections on load
 * and are compared with it), ours on WebGPU in Node (`ours-webgpu`: Dawn, lavapipe here),
 * PyTorch on the CPU (`torch`: scripts/peer/torch_decode.py, Debian's python3-torch, float32 compute with
 * --torch_threads threads), transformers.js on ONNX Runtime in Node (`tjs-cpu`: onnxruntime-node's CPU EP with as
 * many threads; `tjs-wasm`: onnxruntime-web's WebAssembly EP with as many, what transformers.js runs in a browser
 * without WebGPU: bench/realsize/ort-web.ts; `tjs-webgpu`: its WebGPU EP, a Dawn of its own on the same Vulkan
 * driver), and in headless Chromium
 * (SwiftShader) through peer.html (`ours-page`: the engine in a worker; `tjs-page`: transformers.js' WebGPU EP in the
 * page; bench/realsize/page.ts). transformers.js reads an f32 ONNX export of the same weights (.cache/realsize-onnx,
 * built on first use by scripts/peer/export_onnx.py; Qwen3, Llama and Gemma 3 families). Every run is cold: a fresh process
 * or browser loads the model, so compilation lands in every engine's prefill. Greedy ids must equal ours on the CPU
 * (or ours first run) before a peer's times count; ours' rows give ours/peer ratios against the peers on its adapter.
 *
 *   npm run bench:realsize -- [--models Qwen3-0.6B,…] [--engines ours-cpu,ours-webgpu,torch,tjs-cpu,tjs-wasm,…]
 *       [--prompts 128,512] [--new 16] [--latent 16] [--reps 3] [--torch_threads N] [--timeout_s 3600] [--doc SECTION]
 * prints the table and appends a JSON line per row to bench/results/realsize.jsonl; --doc also writes the table into
 * docs/performance.md between its `<!-- realsize:SECTION:begin -->` and `…:end -->` markers. On a software WebGPU
 * adapter (lavapipe) a token takes seconds at these sizes and the defaults take hours: pass fewer prompts and tokens
 * for a first look (the table records what was run).
 */
import { execFileSync, spawnSync } from 'node:child_process';
import { appendFileSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { availableParallelism, loadavg } from 'node:os';
import { join, resolve } from 'node:path';
import { Worker } from 'node:worker_threads';
import { parseArgs } from 'node:util';
import { loadDecoderFromDir } from '../src/model';
import type { Backend } from '../src/tensor/backend';
import { CpuBackend, defaultCpuThreads } from '../src/tensor/cpu';
import { cpuKernelsBytes } from '../src/kernels/matmul/wasm';
import { loadTokenizerFromDir } from '../src/tokenizer';
import { median } from '../src/util/stats';
import { type RealsizeRun, runOursOnce, runTheirsOnce } from '../src/ui/realsize-run';
import { lavapipeEnv } from '../scripts/lavapipe-env.js';
import { gpuAdapterVisible } from './gpu-probe';
import { PeerExportFailed, ensureOnnxExport } from './peer-export';
import { ENGINES, type Engine, PEERS_OF, covers, isTjs, parseEngines, quantOf } from './realsize/engines';
import { REALSIZE_MODELS, REALSIZE_ROOT, makeRealsizeModel, realsizeModel } from './realsize/models';
import { assertOrtWeb, ortWebLoad } from './realsize/ort-web';

export const ONNX_ROOT = '.cache/realsize-onnx';

/** What one child measures: one engine, one model, one prompt length. */
export interface Sample {
  engine: Engine;
  model: string;
  prompt: number;
  ids: number[];
  loadS: number;
  rssMiB: number | null;
  prefillTokS: number;
  decodeTokS: number | null;
  latentStepS: number | null;
  weightBytesPerToken: number | null;
  /** Peak GPU buffer bytes (ours: the pool's high-water mark; the page: every buffer it created), MiB. */
  gpuMiB?: number | null;
  threads: number;
}

/** The first `n` ids of a long English text in the model's tokenizer (the same prompt for every engine). */
export async function promptIds(dir: string, n: number): Promise<number[]> {
  const tok = await loadTokenizerFromDir(dir);
  const text = readFileSync('docs/method.md', 'utf8');
  const ids = tok.encode(text);
  if (ids.length < n) throw new Error(`the prompt text has ${ids.length} tokens, fewer than ${n}`);
  return ids.slice(0, n);
}

async function backendOf(engine: Engine): Promise<Backend> {
  if (engine === 'ours-cpu' || quantOf(engine)) return new CpuBackend('f32');
  const { WebGpuBackend } = await import('../src/tensor/webgpu');
  return WebGpuBackend.create();
}

const toSample = (engine: Engine, model: string, prompt: number, r: RealsizeRun, rssMiB: number | null, threads: number): Sample => ({
  engine, model, prompt, ids: r.ids, loadS: r.loadS, rssMiB, prefillTokS: r.prefillTokS, decodeTokS: r.decodeTokS,
  latentStepS: r.latentStepS, weightBytesPerToken: r.weightBytesPerToken,
  gpuMiB: r.gpuPeakBytes === null ? null : r.gpuPeakBytes / 2 ** 20, threads,
});

/** Ours, in this process: load, generate greedy (prefill, decode), then latent steps after the same prompt. */
async function measureOurs(engine: Engine, model: string, dir: string, ids: number[], newTokens: number, latent: number): Promise<Sample> {
  const backend = await backendOf(engine);
  const r = await runOursOnce(() => loadDecoderFromDir(dir, backend, { quantize: quantOf(engine) }), backend, ids, newTokens, latent);
  const ctx = (backend as { ctx?: { peakBytes: number } }).ctx;
  const threads = backend instanceof CpuBackend ? (backend.wasm?.threads ?? 1) : 1;
  const rssMiB = process.resourceUsage().maxRSS / 1024;
  return toSample(engine, model, ids.length, { ...r, gpuPeakBytes: ctx ? ctx.peakBytes : null }, rssMiB, threads);
}

/**
 * transformers.js in this process: on onnxruntime-node's CPU EP with `threads` threads or its WebGPU EP, or
 * (`tjs-wasm`) on onnxruntime-web's WebAssembly EP with as many (installed before transformers.js is imported).
 */
async function measureTjs(engine: Engine, model: string, ids: number[], newTokens: number, threads: number): Promise<Sample> {
  const { AutoModelForCausalLM, env } = await import('@huggingface/transformers');
  if (engine === 'tjs-wasm') assertOrtWeb(env);
  env.allowRemoteModels = false;
  env.localModelPath = `${resolve(ONNX_ROOT)}/`;
  const device = engine === 'tjs-webgpu' ? 'webgpu' : 'cpu';
  const opts = engine === 'tjs-wasm' ? ortWebLoad(ONNX_ROOT, model)
    : { device, dtype: 'fp32', ...(device === 'cpu' ? { session_options: { intraOpNumThreads: threads } } : {}) } as const;
  const r = await runTheirsOnce(() => AutoModelForCausalLM.from_pretrained(model, opts), ids, newTokens);
  return toSample(engine, model, ids.length, r, process.resourceUsage().maxRSS / 1024, device === 'cpu' ? threads : 1);
}

function measureTorch(model: string, dir: string, ids: number[], newTokens: number, threads: number): Sample {
  const out = execFileSync('/usr/bin/python3', [
    'scripts/peer/torch_decode.py', dir, '--ids', ids.join(','), '--new', String(newTokens), '--threads', String(threads),
  ], { encoding: 'utf8', maxBuffer: 1 << 24 });
  const r = JSON.parse(out.trim().split('\n').at(-1)!) as {
    ids: number[]; load_s: number; prefill_tokens_per_s: number; decode_tokens_per_s: number | null; threads: number; max_rss_mib: number;
  };
  return {
    engine: 'torch', model, prompt: ids.length, ids: r.ids, loadS: r.load_s, rssMiB: r.max_rss_mib ?? null,
    prefillTokS: r.prefill_tokens_per_s, decodeTokS: r.decode_tokens_per_s, latentStepS: null, weightBytesPerToken: null,
    threads: r.threads,
  };
}

/**
 * The memory's read bandwidth as the CPU backend's threads meet it: `threads` threads (this one and worker_threads over
 * one shared WebAssembly memory) each read a 256 MiB region of their own with the kernels' `read_bytes` (v128 loads),
 * all at once; the best of 5 passes, in bytes per second for all of them together. A decode step reads its weights
 * the same way, so this is the rate its weight bytes are measured against. (A copy, which this bench took before,
 * writes as much as it reads and gave about half the figure.)
 */
export async function memoryBandwidth(threads: number): Promise<number> {
  const region = 256 * 2 ** 20;
  const base = 1 << 20;
  const memory = new WebAssembly.Memory({ initial: (base + threads * region) / 65536, maximum: 65536, shared: true });
  new Uint8Array(memory.buffer).fill(1, base);
  const module = new WebAssembly.Module(cpuKernelsBytes(true));
  const read = (new WebAssembly.Instance(module, { env: { memory } }).exports as { read_bytes(p: number, n: number): number }).read_bytes;
  const code = `const { workerData: d, parentPort } = require('node:worker_threads');
const read = new WebAssembly.Instance(d.module, { env: { memory: d.memory } }).exports.read_bytes;
parentPort.on('message', () => { read(d.at, d.n); parentPort.postMessage(0); });`;
  const workers = Array.from({ length: threads - 1 }, (_, i) =>
    new Worker(code, { eval: true, workerData: { module, memory, at: base + (i + 1) * region, n: region } }));
  const pass = () => Promise.all(workers.map((w) => new Promise((done) => { w.once('message', done); w.postMessage(0); })));
  try {
    await pass(); // started and compiled
    let best = Infinity;
    for (let r = 0; r < 5; r++) {
      const t = performance.now();
      const others = pass();
      read(base, region);
      await others;
      best = Math.min(best, performance.now() - t);
    }
    return (threads * region) / (best / 1000);
  } finally {
    await Promise.all(workers.map((w) => w.terminate()));
  }
}

const spread = (xs: number[]) => (xs.length > 1 ? `±${(((Math.max(...xs) - Math.min(...xs)) / 2 / median(xs)) * 100).toFixed(0)}%` : '');
const fmt = (xs: (number | null)[], digits = 2) => {
  const v = xs.filter((x): x is number => x !== null && Number.isFinite(x));
  return v.length ? `${median(v).toFixed(digits)}${spread(v) ? ` ${spread(v)}` : ''}` : '—';
};

/** The child process's work: one engine, one model, one prompt length; prints its Sample as a JSON line. */
export async function child(args: string[]): Promise<void> {
  const [engine, model, prompt, newTokens, latent, threads] = args as [Engine, string, string, string, string, string];
  const m = realsizeModel(model);
  const dir = await makeRealsizeModel(m);
  const ids = await promptIds(dir, Number(prompt));
  const s = isTjs(engine)
    ? await measureTjs(engine, model, ids, Number(newTokens), Number(threads))
    : await measureOurs(engine, model, dir, ids, Number(newTokens), Number(latent));
  process.stdout.write(`${JSON.stringify(s)}\n`);
  process.exit(0);
}

async function main(): Promise<void> {
  const { values: a } = parseArgs({
    options: {
      models: { type: 'string', default: REALSIZE_MODELS.map((m) => m.name).join(',') },
      engines: { type: 'string', default: ENGINES.join(',') },
      prompts: { type: 'string', default: '128,512' },
      new: { type: 'string', default: '16' },
      latent: { type: 'string', default: '16' },
      reps: { type: 'string', default: '3' },
      torch_threads: { type: 'string', default: String(availableParallelism()) },
      timeout_s: { type: 'string', default: '3600' },
      doc: { type: 'string' },
      child: { type: 'boolean', default: false },
    },
    allowPositionals: true,
    strict: true,
  });
  const engines = parseEngines(a.engines!);
  const models = a.models!.split(',').map(realsizeModel);
  const prompts = a.prompts!.split(',').map(Number);
  const [newTokens, latent, reps, threads] = [Number(a.new), Number(a.latent), Number(a.reps), Number(a.torch_threads)];
  const timeoutMs = 1000 * Number(a.timeout_s);
  // Dawn and onnxruntime-node in the children find Mesa's lavapipe where Dawn sees no GPU (both need the variables at
  // process start); on a GPU machine they would hide the GPU
  if (engines.some((e) => e === 'ours-webgpu' || e === 'tjs-webgpu') && !gpuAdapterVisible()) Object.assign(process.env, lavapipeEnv());
  const cpuThreads = defaultCpuThreads();
  const bandwidth = await memoryBandwidth(cpuThreads);
  const loadStart = loadavg()[0]!;
  process.stderr.write(`memory bandwidth (${cpuThreads} threads reading): ${(bandwidth / 1e9).toFixed(1)} GB/s\n`);
  const say = (line: string) => process.stderr.write(`${line}\n`);
  let server: { url: string; close(): Promise<void> } | null = null;
  const samples: Sample[] = [];
  const skipped: string[] = [];
  try {
    for (const m of models) {
      say(`${m.name}: making or reusing ${await makeRealsizeModel(m)}`);
      const dir = await makeRealsizeModel(m);
      const type = String(m.config.model_type);
      let mine = engines.filter((e) => covers(e, type));
      for (const e of engines) if (!mine.includes(e)) skipped.push(`${e} on ${m.name} (${type}: not a family it covers)`);
      try {
        if (mine.some(isTjs)) ensureOnnxExport(dir, ONNX_ROOT, say);
      } catch (e) {
        // no PyTorch for the export, or it failed: ours and the other peers still run
        if (!(e instanceof PeerExportFailed)) throw e;
        say(e.message);
        for (const t of mine.filter(isTjs)) skipped.push(`${t} on ${m.name} (no ONNX export: ${e.message.split('\n')[0]})`);
        mine = mine.filter((t) => !isTjs(t));
      }
      if (!server && mine.some((e) => e.endsWith('-page'))) {
        const { startPeerServer } = await import('./peer-page');
        server = await startPeerServer();
      }
      for (const prompt of prompts) {
        const ids = await promptIds(dir, prompt);
        for (let rep = 0; rep < reps; rep++) {
          for (const engine of mine) {
            let s: Sample;
            try {
              s = await measure(engine, m.name, dir, ids, newTokens, latent, threads, timeoutMs, server?.url ?? '', say);
            } catch (e) {
              say(`  ${engine} prompt ${prompt} rep ${rep + 1} failed: ${(e as Error).message.split('\n')[0]}`);
              skipped.push(`${engine} on ${m.name} at prompt ${prompt}, rep ${rep + 1}: ${(e as Error).message.split('\n')[0]}`);
              continue;
            }
            samples.push(s);
            say(`  ${engine} prompt ${prompt} rep ${rep + 1}: load ${s.loadS.toFixed(1)} s, prefill ${s.prefillTokS.toFixed(2)} tok/s, ` +
              `decode ${s.decodeTokS?.toFixed(2) ?? '—'} tok/s, ids ${s.ids.join(' ')}`);
          }
        }
      }
    }
  } finally {
    await (server as { close(): Promise<void> } | null)?.close();
  }
  const stamp = new Date().toISOString();
  const { rows, lines } = realsizeRows(samples, { models: models.map((m) => m.name), prompts, engines, bandwidth, stamp, newTokens });
  const table = [
    `Run ${stamp.slice(0, 10)}: \`npm run bench:realsize -- --models ${models.map((m) => m.name).join(',')} --engines ` +
      `${engines.join(',')} --prompts ${prompts.join(',')} --new ${newTokens} --latent ${latent} --reps ${reps} ` +
      `--torch_threads ${threads}\`; memory bandwidth ${(bandwidth / 1e9).toFixed(1)} GB/s (${cpuThreads} threads reading); load average ` +
      `${loadStart.toFixed(1)} at the start, ${loadavg()[0]!.toFixed(1)} at the end (2 cores, shared). Medians ± half the range ` +
      'over the reps; every run cold (a fresh process or browser). RSS: the process\'s peak (the page: the browser\'s ' +
      'processes\' summed Pss); GPU MiB: the most buffer bytes alive at once. vs peer: ours/theirs prefill / decode.',
    '',
    '| model | engine | prompt | load s | RSS MiB | GPU MiB | prefill tok/s | decode tok/s | vs peer (prefill / decode) | ' +
      'latent steps/s | latent/decode step time | weight bytes / token | of bandwidth |',
    '|---|---|---|---|---|---|---|---|---|---|---|---|---|',
    ...rows,
    ...(skipped.length ? ['', `Not run: ${skipped.join('; ')}.`] : []),
  ].join('\n');
  process.stdout.write(`${table}\n`);
  mkdirSync('bench/results', { recursive: true });
  if (lines.length) appendFileSync('bench/results/realsize.jsonl', `${lines.join('\n')}\n`);
  if (a.doc !== undefined) writeDocSection(a.doc, table);
}

/** One run of `engine`: ours and transformers.js in Node in a child process, torch in Python, the page engines in a browser. */
async function measure(
  engine: Engine, model: string, dir: string, ids: number[], newTokens: number, latent: number, threads: number,
  timeoutMs: number, serverUrl: string, log: (line: string) => void,
): Promise<Sample> {
  if (engine === 'torch') return measureTorch(model, dir, ids, newTokens, threads);
  if (engine === 'ours-page' || engine === 'tjs-page') {
    const { pageRun } = await import('./realsize/page');
    const r = await pageRun(serverUrl, {
      engine: engine === 'ours-page' ? 'ours' : 'transformers.js', model, modelUrl: `/${REALSIZE_ROOT}/${model}/`,
      onnxRoot: `/${ONNX_ROOT}/`, ids, newTokens, latent,
    }, { log, timeoutMs });
    return toSample(engine, model, ids.length, r, r.pssPeakBytes / 2 ** 20, 1);
  }
  // tjs-wasm's child starts in ort-web.ts, which installs onnxruntime-web before our tokenizer imports transformers.js
  const entry = engine === 'tjs-wasm' ? 'bench/realsize/ort-web.ts' : 'bench/realsize.ts';
  const r = spawnSync(process.execPath, [
    '--import', 'tsx', resolve(entry), '--child', engine, model, String(ids.length), String(newTokens), String(latent), String(threads),
  ], { encoding: 'utf8', maxBuffer: 1 << 24, stdio: ['ignore', 'pipe', 'inherit'], timeout: timeoutMs });
  if (r.status !== 0) throw new Error(`${engine} on ${model} failed (exit ${r.status}${r.signal ? `, ${r.signal}` : ''})`);
  return JSON.parse(r.stdout.trim().split('\n').at(-1)!) as Sample;
}

/** The table's rows and the JSON lines, one per model, prompt and engine that ran. */
export function realsizeRows(
  samples: readonly Sample[],
  o: { models: string[]; prompts: number[]; engines: Engine[]; bandwidth: number; stamp: string; newTokens: number },
): { rows: string[]; lines: string[] } {
  const rows: string[] = [];
  const lines: string[] = [];
  const num = (xs: (number | null | undefined)[]) => xs.filter((x): x is number => typeof x === 'number' && Number.isFinite(x));
  for (const model of o.models) {
    for (const prompt of o.prompts) {
      const here = samples.filter((s) => s.model === model && s.prompt === prompt);
      const ref = (here.find((s) => s.engine === 'ours-cpu') ?? here.find((s) => s.engine.startsWith('ours') && !quantOf(s.engine)))?.ids;
      const of = (e: Engine) => here.filter((s) => s.engine === e);
      const same = (ss: Sample[]) => (ref ? ss.every((s) => s.ids.join() === ref.join()) : null);
      for (const engine of o.engines) {
        const ss = of(engine);
        if (!ss.length) continue;
        // a quantized engine's ids are its own: compared for speed only
        const ok = quantOf(engine) ? null : same(ss);
        const dec = ss.map((s) => s.decodeTokS);
        const wb = ss[0]!.weightBytesPerToken;
        const share = wb && median(num(dec)) * wb / o.bandwidth;
        const lat = ss.map((s) => s.latentStepS);
        const ratio = lat.every((x) => x !== null) && dec.every((x) => x !== null)
          ? fmt(ss.map((s) => s.latentStepS! * s.decodeTokS!)) : '—';
        const vs = (PEERS_OF[engine] ?? []).filter((p) => of(p).length).map((p) => {
          const ps = of(p);
          if (!quantOf(engine) && same(ps) === false) return `${p}: ids differ`;
          const r = (f: (s: Sample) => number | null) => median(num(ss.map(f))) / median(num(ps.map(f)));
          return `${r((s) => s.prefillTokS).toFixed(2)}× / ${r((s) => s.decodeTokS).toFixed(2)}× ${p}`;
        });
        const cells = [
          model, engine, String(prompt), fmt(ss.map((s) => s.loadS), 1), fmt(ss.map((s) => s.rssMiB), 0),
          fmt(ss.map((s) => s.gpuMiB ?? null), 0),
          ok === false ? `${fmt(ss.map((s) => s.prefillTokS))} (ids differ)` : fmt(ss.map((s) => s.prefillTokS)),
          fmt(dec), vs.join('; ') || '—', fmt(lat.map((x) => (x === null ? null : 1 / x))), ratio,
          wb ? `${(wb / 2 ** 20).toFixed(0)} MiB` : '—', share ? `${(100 * share).toFixed(1)}%` : '—',
        ];
        rows.push(`| ${cells.join(' | ')} |`);
        lines.push(JSON.stringify({
          stamp: o.stamp, model, engine, prompt, new: o.newTokens, reps: ss.length, threads: ss[0]!.threads,
          load_s: median(ss.map((s) => s.loadS)), rss_mib: median(num(ss.map((s) => s.rssMiB))) || null,
          gpu_mib: median(num(ss.map((s) => s.gpuMiB))) || null,
          prefill_tok_s: median(ss.map((s) => s.prefillTokS)), decode_tok_s: median(num(dec)),
          latent_steps_s: lat[0] === null ? null : median(lat.map((x) => 1 / x!)), weight_bytes_per_token: wb,
          bandwidth: o.bandwidth, ids_match: ok,
        }));
      }
    }
  }
  return { rows, lines };
}

/** Writes `table` into docs/performance.md between its `<!-- realsize:SECTION:begin -->` and `…:end -->` markers. */
function writeDocSection(section: string, table: string): void {
  const doc = readFileSync('docs/performance.md', 'utf8');
  const [open, close] = [`<!-- realsize:${section}:begin -->`, `<!-- realsize:${section}:end -->`];
  const i = doc.indexOf(open);
  const j = doc.indexOf(close);
  if (i < 0 || j < i) throw new Error(`docs/performance.md has no ${open} … ${close} section`);
  writeFileSync('docs/performance.md', `${doc.slice(0, i + open.length)}\n${table}\n${doc.slice(j)}`);
}

const isMain = process.argv[1] && resolve(process.argv[1]) === resolve(join(import.meta.dirname, 'realsize.ts'));
if (isMain) {
  const argv = process.argv.slice(2);
  (argv[0] === '--child' ? child(argv.slice(1)) : main()).catch((e: unknown) => {
    process.stderr.write(`${(e as Error).stack ?? String(e)}\n`);
    process.exit(1);
  });
}
