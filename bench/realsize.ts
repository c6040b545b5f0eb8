/**
 * `npm run bench:realsize`: the engine at the sizes users load, beside PyTorch on the CPU, in one run. Random weights
 * at the released configs (bench/realsize/models.ts, made once under .cache/realsize/), the real tokenizers; per model
 * and engine, in child processes run in turn (rep 1 of every engine, then rep 2, …), medians and spreads of:
 *   load seconds, peak RSS, prefill tokens/s at each prompt length, decode tokens/s, latent steps/s (one decoder
 *   forward of an embedding row on the cache, as a latent thought runs, without the inner link's two d×d matmuls) and
 *   the latent/decode step-time ratio, weight bytes read per decoded token and the share of the machine's memory
 *   bandwidth that is (the bench measures it: one thread copying 512 MiB).
 * Engines: ours on the CPU backend (`ours-cpu`), ours on WebGPU in Node (`ours-webgpu`: Dawn, lavapipe here), and
 * PyTorch on the CPU (`torch`: scripts/peer/torch_decode.py, Debian's python3-torch, float32 compute with
 * --torch_threads threads). Greedy ids must equal ours on the CPU before a peer's times count.
 *
 *   npm run bench:realsize -- [--models Qwen3-0.6B,…] [--engines ours-cpu,ours-webgpu,torch] [--prompts 128,512]
 *       [--new 16] [--latent 16] [--reps 3] [--torch_threads N] [--doc SECTION]
 * prints the table and appends a JSON line per row to bench/results/realsize.jsonl; --doc also writes the table into
 * docs/performance.md between its `<!-- realsize:SECTION:begin -->` and `…:end -->` markers. On a software WebGPU
 * adapter (lavapipe) a token takes seconds at these sizes and the defaults take hours: pass fewer prompts and tokens
 * for a first look (the table records what was run).
 */
import { execFileSync, spawnSync } from 'node:child_process';
import { appendFileSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { availableParallelism } from 'node:os';
import { join, resolve } from 'node:path';
import { parseArgs } from 'node:util';
import { noGrad } from '../src/autograd';
import { generate } from '../src/model/generate';
import { loadDecoderFromDir } from '../src/model';
import { stepWeightBytes } from '../src/model/weights';
import type { Backend } from '../src/tensor/backend';
import { CpuBackend } from '../src/tensor/cpu';
import { tidy } from '../src/tensor/scope';
import { loadTokenizerFromDir } from '../src/tokenizer';
import { lavapipeEnv } from '../scripts/lavapipe-env.js';
import { REALSIZE_MODELS, makeRealsizeModel, realsizeModel } from './realsize/models';

const ENGINES = ['ours-cpu', 'ours-webgpu', 'torch'] as const;
type Engine = (typeof ENGINES)[number];

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
  if (engine === 'ours-cpu') return new CpuBackend('f32');
  const { WebGpuBackend } = await import('../src/tensor/webgpu');
  return WebGpuBackend.create();
}

/** Ours, in this process: load, generate greedy (prefill, decode), then latent steps after the same prompt. */
async function measureOurs(engine: Engine, model: string, dir: string, ids: number[], newTokens: number, latent: number): Promise<Sample> {
  const backend = await backendOf(engine);
  const t0 = performance.now();
  const m = await loadDecoderFromDir(dir, backend);
  const loadS = (performance.now() - t0) / 1000;
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
  const sample: Sample = {
    engine, model, prompt: ids.length, ids: r.tokens, loadS, rssMiB: process.resourceUsage().maxRSS / 1024,
    prefillTokS: r.prefillTokensPerSec, decodeTokS: newTokens > 1 ? r.decodeTokensPerSec : null, latentStepS,
    weightBytesPerToken: stepWeightBytes(m.weights), threads: 1,
  };
  m.dispose();
  return sample;
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

/** One thread copying 512 MiB, best of 5: bytes read per second. */
export function memoryBandwidth(): number {
  const n = 512 * 2 ** 20;
  const a = Buffer.alloc(n, 1);
  const b = Buffer.alloc(n);
  let best = Infinity;
  for (let i = 0; i < 5; i++) {
    const t = performance.now();
    a.copy(b);
    best = Math.min(best, performance.now() - t);
  }
  return n / (best / 1000);
}

const median = (xs: number[]) => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length ? (s.length % 2 ? s[(s.length - 1) / 2]! : (s[s.length / 2 - 1]! + s[s.length / 2]!) / 2) : NaN;
};
const spread = (xs: number[]) => (xs.length > 1 ? `±${(((Math.max(...xs) - Math.min(...xs)) / 2 / median(xs)) * 100).toFixed(0)}%` : '');
const fmt = (xs: (number | null)[], digits = 2) => {
  const v = xs.filter((x): x is number => x !== null && Number.isFinite(x));
  return v.length ? `${median(v).toFixed(digits)}${spread(v) ? ` ${spread(v)}` : ''}` : '—';
};

async function child(args: string[]): Promise<void> {
  const [engine, model, prompt, newTokens, latent] = args;
  const m = realsizeModel(model!);
  const dir = await makeRealsizeModel(m);
  const ids = await promptIds(dir, Number(prompt));
  const s = await measureOurs(engine as Engine, model!, dir, ids, Number(newTokens), Number(latent));
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
      doc: { type: 'string' },
      child: { type: 'boolean', default: false },
    },
    allowPositionals: true,
    strict: true,
  });
  const engines = a.engines!.split(',') as Engine[];
  for (const e of engines) if (!ENGINES.includes(e)) throw new Error(`--engines: ${e} is not one of ${ENGINES.join(', ')}`);
  const models = a.models!.split(',').map(realsizeModel);
  const prompts = a.prompts!.split(',').map(Number);
  const [newTokens, latent, reps, threads] = [Number(a.new), Number(a.latent), Number(a.reps), Number(a.torch_threads)];
  // Dawn in the children finds Mesa's lavapipe where there is no GPU (the variables change nothing on a GPU machine)
  Object.assign(process.env, lavapipeEnv());
  const bandwidth = memoryBandwidth();
  process.stderr.write(`memory bandwidth (one thread copying 512 MiB): ${(bandwidth / 1e9).toFixed(1)} GB/s\n`);
  const samples: Sample[] = [];
  for (const m of models) {
    process.stderr.write(`${m.name}: making or reusing ${await makeRealsizeModel(m)}\n`);
    const dir = await makeRealsizeModel(m);
    for (const prompt of prompts) {
      const ids = await promptIds(dir, prompt);
      for (let rep = 0; rep < reps; rep++) {
        for (const engine of engines) {
          let s: Sample;
          if (engine === 'torch') {
            if (!['qwen3', 'llama', 'gemma3_text'].includes(String(m.config.model_type))) continue;
            s = measureTorch(m.name, dir, ids, newTokens, threads);
          } else {
            const r = spawnSync(process.execPath, [
              '--import', 'tsx', resolve('bench/realsize.ts'), '--child', engine, m.name, String(prompt), String(newTokens), String(latent),
            ], { encoding: 'utf8', maxBuffer: 1 << 24, stdio: ['ignore', 'pipe', 'inherit'] });
            if (r.status !== 0) throw new Error(`${engine} on ${m.name} failed (exit ${r.status})`);
            s = JSON.parse(r.stdout.trim().split('\n').at(-1)!) as Sample;
          }
          samples.push(s);
          process.stderr.write(`  ${engine} prompt ${prompt} rep ${rep + 1}: prefill ${s.prefillTokS.toFixed(2)} tok/s, decode ` +
            `${s.decodeTokS?.toFixed(2) ?? '—'} tok/s, ids ${s.ids.join(' ')}\n`);
        }
      }
    }
  }
  const rows: string[] = [];
  const lines: string[] = [];
  const stamp = new Date().toISOString();
  for (const m of models) {
    for (const prompt of prompts) {
      const ref = samples.find((s) => s.model === m.name && s.prompt === prompt && s.engine === 'ours-cpu')?.ids ??
        samples.find((s) => s.model === m.name && s.prompt === prompt && s.engine !== 'torch')?.ids;
      for (const engine of engines) {
        const ss = samples.filter((s) => s.model === m.name && s.prompt === prompt && s.engine === engine);
        if (!ss.length) continue;
        const same = ref ? ss.every((s) => s.ids.join() === ref.join()) : null;
        const dec = ss.map((s) => s.decodeTokS);
        const wb = ss[0]!.weightBytesPerToken;
        const share = wb && median(dec.filter((x): x is number => x !== null)) * wb / bandwidth;
        const lat = ss.map((s) => s.latentStepS);
        const ratio = lat.every((x) => x !== null) && dec.every((x) => x !== null)
          ? fmt(ss.map((s) => s.latentStepS! * s.decodeTokS!)) : '—';
        const cells = [
          m.name, engine, String(prompt), fmt(ss.map((s) => s.loadS), 1), fmt(ss.map((s) => s.rssMiB), 0),
          same === false ? `${fmt(ss.map((s) => s.prefillTokS))} (ids differ)` : fmt(ss.map((s) => s.prefillTokS)),
          fmt(dec), fmt(lat.map((x) => (x === null ? null : 1 / x))), ratio,
          wb ? `${(wb / 2 ** 20).toFixed(0)} MiB` : '—', share ? `${(100 * share).toFixed(1)}%` : '—',
        ];
        rows.push(`| ${cells.join(' | ')} |`);
        lines.push(JSON.stringify({
          stamp, model: m.name, engine, prompt, new: newTokens, reps: ss.length, threads: ss[0]!.threads,
          load_s: median(ss.map((s) => s.loadS)),
          prefill_tok_s: median(ss.map((s) => s.prefillTokS)), decode_tok_s: median(dec.filter((x): x is number => x !== null)),
          latent_steps_s: lat[0] === null ? null : median(lat.map((x) => 1 / x!)), weight_bytes_per_token: wb, bandwidth,
          ids_match: same,
        }));
      }
    }
  }
  const table = [
    `Run ${stamp.slice(0, 10)}: \`npm run bench:realsize -- --models ${models.map((m) => m.name).join(',')} --engines ` +
      `${engines.join(',')} --prompts ${prompts.join(',')} --new ${newTokens} --latent ${latent} --reps ${reps} ` +
      `--torch_threads ${threads}\`; ` +
      `memory bandwidth ${(bandwidth / 1e9).toFixed(1)} GB/s (one thread). Medians ± half the range over the reps.`,
    '',
    '| model | engine | prompt | load s | RSS MiB | prefill tok/s | decode tok/s | latent steps/s | latent/decode step time | ' +
      'weight bytes / token | of bandwidth |',
    '|---|---|---|---|---|---|---|---|---|---|---|',
    ...rows,
  ].join('\n');
  process.stdout.write(`${table}\n`);
  mkdirSync('bench/results', { recursive: true });
  appendFileSync('bench/results/realsize.jsonl', `${lines.join('\n')}\n`);
  if (a.doc !== undefined) {
    const doc = readFileSync('docs/performance.md', 'utf8');
    const [open, close] = [`<!-- realsize:${a.doc}:begin -->`, `<!-- realsize:${a.doc}:end -->`];
    const i = doc.indexOf(open);
    const j = doc.indexOf(close);
    if (i < 0 || j < i) throw new Error(`docs/performance.md has no ${open} … ${close} section`);
    writeFileSync('docs/performance.md', `${doc.slice(0, i + open.length)}\n${table}\n${doc.slice(j)}`);
  }
}

const isMain = process.argv[1] && resolve(process.argv[1]) === resolve(join(import.meta.dirname, 'realsize.ts'));
if (isMain) {
  const argv = process.argv.slice(2);
  (argv[0] === '--child' ? child(argv.slice(1)) : main()).catch((e: unknown) => {
    process.stderr.write(`${(e as Error).stack ?? String(e)}\n`);
    process.exit(1);
  });
}
