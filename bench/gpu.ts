/**
 * `npm run bench:gpu [-- --quick] [--layers N] [--backend webgpu|cuda|all] [--json] [--budget-s S]`
 * One command for a GPU machine, needing nothing but `npm install`: on WebGPU (Dawn in Node) and on the CUDA backend
 * when its addon is built, a random-weights decoder at Qwen3-1.7B's width (hidden 2048, 16 heads, 8 KV heads,
 * head_dim 128, intermediate 6144, 28 layers; vocab 1024 instead of 151936, so the LM head reads 4 MB where the real
 * one reads 622 MB of bf16) in q4_0 and bf16: decode tokens/s, dispatches per token and per layer, weight GB/s of a
 * decode step against the adapter's nominal bandwidth, a latent step against a decode step, batch 16, a standalone
 * GEMV; then the peer ratio against transformers.js in Node on qwen3-tiny. A table per backend, or one JSON object.
 * --quick: 2 layers at a quarter of the width, for CPU adapters (the test runs it on lavapipe).
 * --realsize: instead, bench:realsize's table on this machine's GPU (bench/realsize/gpu-plan.ts): ours and
 * transformers.js on WebGPU in Node, the released configs, prompts 128 and 512 (--models, --engines, --prompts, --reps,
 * --doc pass through; --quick: Qwen3-0.6B, one short prompt).
 * Dawn takes the machine's Vulkan driver; without a GPU adapter it falls back to the Mesa lavapipe that
 * scripts/setup-system.sh unpacks (VK_ICD_FILENAMES, when set, decides instead).
 */
import { spawnSync } from 'node:child_process';
import { parseArgs } from 'node:util';
import { lavapipeEnv } from '../scripts/lavapipe-env.js';
import { gpuAdapterVisible } from './gpu-probe';

const CHILD = 'RMAS_BENCH_GPU_CHILD';

const { values: args } = parseArgs({
  options: {
    quick: { type: 'boolean', default: false },
    layers: { type: 'string' },
    backend: { type: 'string', default: 'all' },
    json: { type: 'boolean', default: false },
    'no-peer': { type: 'boolean', default: false },
    'budget-s': { type: 'string', default: '280' },
    realsize: { type: 'boolean', default: false },
    models: { type: 'string' },
    engines: { type: 'string' },
    prompts: { type: 'string' },
    reps: { type: 'string' },
    doc: { type: 'string' },
    help: { type: 'boolean', short: 'h' },
  },
});
if (args.help) {
  console.log('usage: npm run bench:gpu -- [--quick] [--layers N] [--backend webgpu|cuda|all] [--json] [--no-peer] [--budget-s 280]');
  console.log('       npm run bench:gpu -- --realsize [--quick] [--models a,b] [--engines ours-webgpu,tjs-webgpu] [--prompts 128,512] ' +
    '[--reps 3] [--doc SECTION]');
  process.exit(0);
}
if (args.realsize) {
  // bench:realsize decides on lavapipe itself, from what Dawn sees
  const { realsizeGpuArgs } = await import('./realsize/gpu-plan');
  const plan = realsizeGpuArgs(args);
  console.log(`bench:gpu --realsize: npm run bench:realsize -- ${plan.join(' ')}`);
  const script = new URL('./realsize.ts', import.meta.url).pathname;
  const r = spawnSync(process.execPath, ['--import', 'tsx', script, ...plan], { stdio: 'inherit' });
  process.exit(r.status ?? 1);
}
if (!['webgpu', 'cuda', 'all'].includes(args.backend!)) throw new Error(`--backend ${args.backend}: expected webgpu, cuda or all`);
// Dawn on lavapipe needs LD_LIBRARY_PATH at process start: when no GPU adapter is visible, run again with it.
if (!process.env[CHILD] && args.backend !== 'cuda') {
  const lvp = lavapipeEnv();
  if (lvp !== process.env && !gpuAdapterVisible()) {
    const r = spawnSync(process.execPath, [...process.execArgv, ...process.argv.slice(1)], {
      stdio: 'inherit',
      env: { ...lvp, [CHILD]: '1' },
    });
    process.exit(r.status ?? 1);
  }
}

const { formatTable } = await import('./harness');
type BenchResult = import('../src/kernels/workbench/bench').BenchResult;
const { SharedLayerWeights, decodeSection, gemvSection, qwen3Config } = await import('./gpu-measure');
type GpuBenchSize = import('./gpu-measure').GpuBenchSize;
type WeightDType = import('./gpu-measure').WeightDType;
const { isCpuAdapterName, nominalBandwidth, peerLine, summaryLines } = await import('./gpu-report');
type BackendReport = import('./gpu-report').BackendReport;
type GpuBenchReport = import('./gpu-report').GpuBenchReport;
type PeerFigures = import('./gpu-report').PeerFigures;
const { CudaUnavailable, WebGpuUnavailable } = await import('../src/errors');
type Backend = import('../src/tensor/backend').Backend;

const layers = args.layers === undefined ? (args.quick ? 2 : 28) : Number(args.layers);
if (!Number.isInteger(layers) || layers < 1) throw new Error(`--layers ${args.layers}: expected a positive integer`);
const budgetMs = 1000 * Number(args['budget-s']);
if (!(budgetMs > 0)) throw new Error(`--budget-s ${args['budget-s']}: expected a positive number of seconds`);
const size: GpuBenchSize = args.quick
  ? { quick: true, layers, prompt: 16, tokens: 8, timing: { minMs: 5, warmup: 1, maxIters: 3 } }
  : { quick: false, layers, prompt: 128, tokens: 64, timing: { minMs: 300, warmup: 2, maxIters: 1000 } };
const t0 = performance.now();
const left = () => budgetMs - (performance.now() - t0);
const say = (line: string) => (args.json ? process.stderr : process.stdout).write(`${line}\n`);
const errText = (e: unknown) => (e instanceof Error ? `${e.name}: ${e.message.split('\n')[0]}` : String(e));

const config = qwen3Config(size);
const weights = new SharedLayerWeights(config);
const DTYPES: WeightDType[] = ['q4_0', 'bf16'];

/** Every section on one backend; a section that throws is recorded and the next one runs. */
async function sections(backend: Backend, r: BackendReport) {
  const rows: BenchResult[] = (r.table_rows = []);
  const onRow = (row: BenchResult) => {
    rows.push(row);
    if (process.stderr.isTTY) process.stderr.write(`  ${row.name}\n`);
  };
  r.decode = [];
  r.gemv = [];
  r.errors = [];
  r.skipped = [];
  const outOfTime = (what: string, needMs: number) => {
    if (left() >= needMs) return false;
    r.skipped!.push(`${what}: out of time (--budget-s ${args['budget-s']})`);
    return true;
  };
  for (const dtype of DTYPES) {
    if (outOfTime(`${dtype} decode`, 30_000)) continue;
    try {
      r.decode.push(await decodeSection(backend, weights, dtype, size, onRow));
    } catch (e) {
      r.errors.push(`${dtype} decode: ${errText(e)}`);
    }
  }
  for (const dtype of DTYPES) {
    if (outOfTime(`gemv ${dtype}`, 15_000)) continue;
    try {
      const g = await gemvSection(backend, dtype, size, onRow);
      r.gemv.push({ ...g, fraction_of_nominal: r.nominal_gbps ? g.gbps / r.nominal_gbps : null });
    } catch (e) {
      r.errors.push(`gemv ${dtype}: ${errText(e)}`);
    }
  }
}

async function webgpu(): Promise<BackendReport> {
  const { WebGpuBackend } = await import('../src/tensor/webgpu');
  let gpu;
  try {
    gpu = await WebGpuBackend.create();
  } catch (e) {
    if (e instanceof WebGpuUnavailable) return { backend: 'webgpu', unavailable: errText(e) };
    throw e;
  }
  const a = gpu.ctx.report;
  const name = [a.vendor, a.architecture, a.device, a.description].filter(Boolean).join(' | ') || 'unknown adapter';
  const cpu = isCpuAdapterName(name, a.isFallback);
  const r: BackendReport = {
    backend: 'webgpu',
    unavailable: null,
    name,
    cpu_adapter: cpu,
    features: { ...a.features },
    nominal_gbps: cpu ? null : nominalBandwidth(name),
  };
  say(
    `\nwebgpu: ${name}${a.isFallback ? ' (fallback adapter)' : ''}; ${Object.entries(a.features)
      .map(([k, on]) => `${k} ${on ? 'yes' : 'no'}`)
      .join(', ')}`,
  );
  if (cpu)
    say(
      'warning: this is a CPU adapter (Mesa lavapipe or SwiftShader): the figures measure WGSL run on the CPU and say nothing about GPU speed',
    );
  try {
    await sections(gpu, r);
  } finally {
    gpu.ctx.destroy();
  }
  return r;
}

async function cuda(): Promise<BackendReport> {
  const { CudaBackend } = await import('../src/tensor/cuda');
  let be;
  try {
    be = await CudaBackend.create();
  } catch (e) {
    if (e instanceof CudaUnavailable) return { backend: 'cuda', unavailable: errText(e) };
    throw e;
  }
  const cpu = /emulator/i.test(be.name);
  const r: BackendReport = {
    backend: 'cuda',
    unavailable: null,
    name: be.name,
    cpu_adapter: cpu,
    nominal_gbps: cpu ? null : nominalBandwidth(be.name),
  };
  say(`\ncuda: ${be.name} (no fused kernels: the plain path, counters not kept)`);
  if (cpu) say('warning: this is the CUDA emulator (the CPU): its figures say nothing about GPU speed');
  await sections(be, r);
  return r;
}

/** Ours against transformers.js in Node (onnxruntime-node's WebGPU EP) on qwen3-tiny, as `npm run bench:peer -- --hosts node`. */
async function peer(): Promise<PeerFigures> {
  const model = 'qwen3-tiny';
  const cap = Math.min(120_000, left() - 10_000);
  if (cap < 20_000) return { model, host: 'node', skipped: `out of time (--budget-s ${args['budget-s']})` };
  const { ensurePeerExports } = await import('./peer-export');
  const { nodeHost } = await import('./peer-node');
  const { runPeer } = await import('../src/ui/peer-run');
  let host: Awaited<ReturnType<typeof nodeHost>> | null = null;
  const work = (async () => {
    ensurePeerExports([model], say);
    host = await nodeHost();
    return runPeer(host, { models: [model], tokens: size.quick ? 16 : 64, reps: size.quick ? 1 : 3, prompt: 'Once upon a time' });
  })();
  let timer: ReturnType<typeof setTimeout> | undefined;
  const timeout = new Promise<null>((res) => { timer = setTimeout(() => res(null), cap); });
  try {
    const rep = await Promise.race([work, timeout]);
    if (!rep) return { model, host: 'node', skipped: `did not finish within ${Math.round(cap / 1000)} s` };
    // nodeHost opens ours on the committed weights, then ours on the export's f32 weights, then theirs
    const [ours, oursF32] = rep.rows.filter((x) => x.engine === 'ours');
    const theirs = rep.rows.find((x) => x.engine === 'transformers.js');
    if (!ours || !oursF32 || !theirs) return { model, host: 'node', skipped: 'the peer run produced no timed rows' };
    return {
      model, host: 'node', adapter: rep.adapter, ours_weights: ours.weights, ours_decode_tokens_per_s: ours.decodeTokensPerSec,
      ours_f32_decode_tokens_per_s: oursF32.decodeTokensPerSec, theirs_decode_tokens_per_s: theirs.decodeTokensPerSec,
      decode_ratio: ours.decodeRatio!, decode_ratio_f32: oursF32.decodeRatio!, prefill_ratio: ours.prefillRatio!,
      greedy_ids_equal: rep.checks.every((c) => c.equal),
    };
  } catch (e) {
    return { model, host: 'node', skipped: errText(e) };
  } finally {
    clearTimeout(timer);
    (host as { close(): void } | null)?.close();
  }
}

const report: GpuBenchReport = {
  model: {
    shape: 'Qwen3-1.7B width, random weights (every layer the same values)',
    hidden: config.hidden,
    heads: config.heads,
    kv_heads: config.kvHeads,
    head_dim: config.headDim,
    intermediate: config.intermediate,
    layers: config.layers,
    vocab: config.vocabSize,
    note: `vocab ${config.vocabSize} (Qwen3-1.7B: 151936, whose tied LM head adds 622 MB of bf16 reads per token)${size.quick ? '; --quick: a quarter of the width' : ''}`,
  },
  options: {
    quick: size.quick,
    layers,
    prompt: size.prompt,
    tokens: size.tokens,
    backends: args.backend === 'all' ? ['webgpu', 'cuda'] : [args.backend!],
  },
  backends: [],
  peer: null,
  seconds: 0,
};
say(
  `bench:gpu: ${report.model.shape}; ${layers} layers, hidden ${config.hidden}, ${report.model.note}; prompt ${size.prompt}, ${size.tokens} decode steps`,
);

for (const kind of report.options.backends) {
  const r = kind === 'webgpu' ? await webgpu() : await cuda();
  report.backends.push(r);
  if (r.unavailable) {
    say(`\n${kind}: unavailable: ${r.unavailable}`);
    continue;
  }
  say(formatTable(r.table_rows!));
  for (const line of summaryLines(r)) say(line);
}
const webgpuRan = report.backends.some((b) => b.backend === 'webgpu' && !b.unavailable);
if (!args['no-peer'] && webgpuRan) {
  report.peer = await peer();
  say(`\n${peerLine(report.peer)}`);
}
report.seconds = (performance.now() - t0) / 1000;
say(`\n${report.seconds.toFixed(1)} s`);
if (report.backends.every((b) => b.unavailable)) say('no backend ran: neither a WebGPU adapter nor a usable CUDA device was found');
if (args.json) console.log(JSON.stringify(report, (k, v) => (k === 'table_rows' ? undefined : v), 1));
// a peer run cut off by its time cap may still hold the GPU: leave without waiting for it
process.exit(report.backends.some((b) => b.errors?.length) ? 1 : 0);
