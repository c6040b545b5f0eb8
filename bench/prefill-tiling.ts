/**
 * `npx tsx bench/prefill-tiling.ts [--models qwen3-tiny,qwen3-w1024] [--hosts node,browser] [--cuts tiled,auto]
 *   [--rounds 3] [--tokens 2] [--prompt TEXT]`
 * Prefill (the weight products at T > 1) in each GEMM cut against transformers.js on the same adapter, the cuts
 * taken in turn within each round (RMAS_GEMM: tiled = the 64×64 kernel, auto/direct/shared = kernels/matmul/gemm-wgsl.ts).
 * - node: Dawn on lavapipe for ours, onnxruntime-node's WebGPU EP for theirs (bench/peer-node.ts); the runners are
 *   opened once and every cut warmed before the timed rounds;
 * - browser: peer.html in headless Chromium (SwiftShader), one untimed and one timed run per engine and cut per round.
 * A model `qwen3-w<H>` is the wider random Qwen3 of scripts/peer/make_wide.py: made under .cache/peer-src when missing
 * and linked as models/tiny/qwen3-w<H> while the bench runs (the peer export and the page read models from there).
 * Prints per host, model, weights and cut: prefill tokens/s (ours, theirs; medians and ranges over rounds), the ratio
 * ours/theirs taken within each round, and the dispatches of one prefill (Node's counters, to the first sampled id).
 */
import { spawnSync } from 'node:child_process';
import { existsSync, lstatSync, symlinkSync, unlinkSync } from 'node:fs';
import { loadavg } from 'node:os';
import { join, relative } from 'node:path';
import { parseArgs } from 'node:util';
import { lavapipeEnv } from '../scripts/lavapipe-env.js';

const env = lavapipeEnv();
if (env !== process.env) {
  const r = spawnSync(process.execPath, [...process.execArgv, ...process.argv.slice(1)], { stdio: 'inherit', env });
  process.exit(r.status ?? 1);
}

const { PEER_DEFAULTS } = await import('../src/ui/peer-run');
type Timed = import('../src/ui/peer-run').Timed;
const { ensurePeerExports, PYTHON, TINY_ROOT } = await import('./peer-export');

const { values: args } = parseArgs({
  options: {
    models: { type: 'string', default: 'qwen3-tiny,qwen3-w1024' },
    hosts: { type: 'string', default: 'node,browser' },
    cuts: { type: 'string', default: 'tiled,auto' },
    rounds: { type: 'string', default: '3' },
    tokens: { type: 'string', default: '2' },
    prompt: { type: 'string', default: PEER_DEFAULTS.prompt },
  },
});
const models = args.models!.split(',').filter(Boolean);
const hosts = args.hosts!.split(',').filter(Boolean);
const cuts = args.cuts!.split(',').filter(Boolean);
const rounds = Number(args.rounds);
const tokens = Number(args.tokens);
const prompt = args.prompt!;
const ROOT = join(TINY_ROOT, '..', '..');

/** models/tiny/qwen3-w<H> -> .cache/peer-src/qwen3-w<H>, made when missing; returns the links to remove afterwards. */
function linkWide(): string[] {
  const links: string[] = [];
  for (const m of models) {
    const w = /^qwen3-w(\d+)$/.exec(m);
    if (!w) continue;
    const src = join(ROOT, '.cache/peer-src', m);
    if (!existsSync(join(src, 'model.safetensors'))) {
      const r = spawnSync(PYTHON, [join(ROOT, 'scripts/peer/make_wide.py'), '--hidden', w[1]!], { stdio: 'inherit' });
      if (r.status !== 0) throw new Error(`make_wide.py --hidden ${w[1]} failed`);
    }
    const link = join(TINY_ROOT, m);
    if (!existsSync(link)) {
      symlinkSync(relative(TINY_ROOT, src), link);
      links.push(link);
    } else if (!lstatSync(link).isSymbolicLink()) {
      throw new Error(`${link} exists and is not the bench's link`);
    }
  }
  return links;
}

interface Sample { host: string; model: string; weights: string; cut: string; ours: number; theirs: number }
const samples: Sample[] = [];
const dispatches = new Map<string, number>();
const setCut = (cut: string) => { (globalThis as { RMAS_GEMM?: string }).RMAS_GEMM = cut; };

async function nodeRuns() {
  const { nodeHost } = await import('./peer-node');
  const host = await nodeHost();
  try {
    for (const model of models) {
      const ids = await host.promptIds(model, prompt);
      const runners = await host.open(model);
      try {
        for (const cut of cuts) {
          setCut(cut);
          for (const r of runners) await r.run(ids, tokens); // compiles this cut's pipelines
        }
        for (let round = 0; round < rounds; round++) {
          for (const cut of round % 2 ? [...cuts].reverse() : cuts) {
            setCut(cut);
            const timed: Timed[] = [];
            for (const r of runners) timed.push(await r.run(ids, tokens));
            const theirs = timed[timed.length - 1]!.prefillTokensPerSec;
            runners.slice(0, -1).forEach((r, i) =>
              samples.push({ host: host.adapter, model, weights: r.weights, cut, ours: timed[i]!.prefillTokensPerSec, theirs }));
            console.error(`${host.adapter} ${model} round ${round + 1} ${cut}: ` +
              timed.map((t, i) => `${runners[i]!.key} ${t.prefillTokensPerSec.toFixed(2)}`).join(', '));
          }
        }
      } finally {
        for (const r of runners) await r.dispose();
      }
    }
  } finally {
    host.close();
  }
}

async function nodeDispatches() {
  const { WebGpuBackend } = await import('../src/tensor/webgpu');
  const { loadDecoderFromDir, generate } = await import('../src/model');
  const { loadTokenizerFromDir } = await import('../src/tokenizer');
  const backend = await WebGpuBackend.create();
  try {
    for (const model of models) {
      const dir = join(TINY_ROOT, model);
      const ids = (await loadTokenizerFromDir(dir)).encode(prompt);
      const dec = await loadDecoderFromDir(dir, backend);
      for (const cut of cuts) {
        setCut(cut);
        const before = backend.ctx.counters();
        await generate(dec, { inputIds: ids, maxNewTokens: 1, sampling: { greedy: true }, eosTokenIds: [] });
        const after = backend.ctx.counters();
        dispatches.set(`${model} ${cut}`, after.dispatches - before.dispatches);
        dispatches.set(`${model} ${cut} wg`, after.workgroups - before.workgroups);
        dispatches.set(`${model} ${cut} inv`, after.invocations - before.invocations);
        dispatches.set(`${model} ${cut} ids`, ids.length);
      }
      dec.weights.dispose();
    }
  } finally {
    backend.ctx.device.destroy();
  }
}

async function browserRuns() {
  const { openPeerPage } = await import('./peer-page');
  const page = await openPeerPage({ log: (l) => console.error(l) });
  try {
    for (const model of models) {
      for (let round = 0; round < rounds; round++) {
        for (const cut of round % 2 ? [...cuts].reverse() : cuts) {
          await page.page.evaluate((c) => { (globalThis as { RMAS_GEMM?: string }).RMAS_GEMM = c; }, cut);
          const rep = await page.run({ models: [model], tokens, reps: 1, prompt });
          const theirs = rep.rows.find((r) => r.engine === 'transformers.js')!.prefillTokensPerSec;
          for (const r of rep.rows.filter((x) => x.engine === 'ours')) {
            samples.push({ host: rep.adapter, model, weights: r.weights, cut, ours: r.prefillTokensPerSec, theirs });
          }
          if (rep.checks.some((c) => !c.equal)) console.error(`${rep.adapter} ${model} ${cut}: greedy ids differ`);
          console.error(`${rep.adapter} ${model} round ${round + 1} ${cut}: ` +
            rep.rows.map((r) => `${r.engine} ${r.weights} ${r.prefillTokensPerSec.toFixed(2)}`).join(', '));
        }
      }
    }
  } finally {
    await page.close();
  }
}

const med = (xs: number[]) => {
  const s = [...xs].sort((a, b) => a - b);
  const m = s.length >> 1;
  return s.length % 2 ? s[m]! : (s[m - 1]! + s[m]!) / 2;
};
const span = (xs: number[], d: number) => `${med(xs).toFixed(d)} [${Math.min(...xs).toFixed(d)}–${Math.max(...xs).toFixed(d)}]`;

const load0 = loadavg()[0]!;
const links = linkWide();
try {
  ensurePeerExports(models, (l) => console.error(l));
  if (hosts.includes('node')) { await nodeDispatches(); await nodeRuns(); }
  if (hosts.includes('browser')) await browserRuns();
} finally {
  for (const l of links) unlinkSync(l);
}
console.log(`prompt ${JSON.stringify(prompt)}, ${rounds} rounds, cuts taken in turn; load average ${load0.toFixed(1)} at the start, ` +
  `${loadavg()[0]!.toFixed(1)} at the end (1 min)`);
console.log('| adapter | model | weights | cut | ours prefill tok/s | theirs | ours/theirs | dispatches / workgroups / invocations |');
console.log('|---|---|---|---|---:|---:|---:|---:|');
const keys = [...new Set(samples.map((s) => `${s.host}\t${s.model}\t${s.weights}\t${s.cut}`))];
for (const k of keys) {
  const [host, model, weights, cut] = k.split('\t');
  const ss = samples.filter((s) => `${s.host}\t${s.model}\t${s.weights}\t${s.cut}` === k);
  const d = dispatches.get(`${model} ${cut}`);
  const cell = d === undefined ? '' : `${d} / ${dispatches.get(`${model} ${cut} wg`)} / ${dispatches.get(`${model} ${cut} inv`)}`;
  console.log(`| ${host} | ${model} (${dispatches.get(`${model} ${cut} ids`) ?? '?'} ids) | ${weights} | ${cut} | ` +
    `${span(ss.map((s) => s.ours), 2)} | ${span(ss.map((s) => s.theirs), 2)} | ${span(ss.map((s) => s.ours / s.theirs), 2)}× | ${cell} |`);
}
