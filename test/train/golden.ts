/**
 * Training steps against PyTorch (scripts/golden/tiny_train.py, torch 1.13 float64): a few inner steps of
 * the planner's inner link on qwen3-tiny, and a few outer steps of a 2-round sequential system (planner
 * qwen3-tiny → critic llama-tiny → solver qwen2-tiny) with frozen inner links. Our trainer runs the same
 * samples in the same order with the same hyper-parameters; the link weights after each step, the
 * losses, the pre-clip gradient norms and the first step's gradients are compared. Shared by the CPU and
 * GPU tests.
 */
import { readFileSync } from 'node:fs';
import { AdamW } from '../../src/autograd/ops/optim';
import { InnerLink, OuterLink } from '../../src/mas/links';
import { getStyle } from '../../src/mas/styles';
import { readLinkFile } from '../../src/mas/upstream';
import { loadDecoderFromDir } from '../../src/model';
import type { Backend } from '../../src/tensor/backend';
import { CpuBackend } from '../../src/tensor/cpu';
import type { Tensor } from '../../src/tensor/tensor';
import { innerPairs, innerSampleStep } from '../../src/train/inner';
import { outerSampleStep, stageKey, type OuterAgent, type OuterSample, type OuterStage } from '../../src/train/outer';
import { lrFactor } from '../../src/train/schedule';
import { f64 } from '../golden/check';

type B64 = string;
interface Probe { rows?: number[]; data: B64; wsum: number; sumsq: number }
const G = JSON.parse(readFileSync('test/golden/tiny-train.json', 'utf8')) as {
  inner: {
    link_file: string;
    hyper: {
      w_cos: number;
      w_mse: number;
      lr: number;
      eps: number;
      weight_decay: number;
      max_grad_norm: number;
      warmup: number;
      total: number;
    };
    samples: { ids: number[]; loss_mask: number[] }[];
    grad0: Record<string, B64>;
    steps: { batch: number[]; lr: number; loss: number; grad_norm: number; state: Record<string, B64> }[];
  };
  outer: {
    inner_links: Record<string, string>;
    outer_links: Record<string, { file: string; d_in: number; d_out: number }>;
    hyper: {
      rounds: number;
      max_latent_tokens: number;
      lr: number;
      eps: number;
      max_grad_norm: number;
      warmup: number;
      total: number;
      non_last_loss_weight: number;
    };
    samples: Record<'P' | 'TP' | 'F0' | 'F1' | 'C0' | 'C1' | 'TC' | 'S0' | 'S1' | 'TS', number[]>[];
    shapes: Record<string, Record<string, number[]>>;
    config1: {
      grad0: Record<string, Record<string, Probe>>;
      steps: { lr: number; loss: number; grad_norm: number; ce: number[][]; state: Record<string, Record<string, Probe>> }[];
    };
    config2: { loss: number; grad_norm: number; ce: number[][]; grad: Record<string, Record<string, Probe>> };
  };
};
export const TRAIN_GOLDEN = G;

async function values(t: Tensor): Promise<Float64Array> {
  return t.backend instanceof CpuBackend ? Float64Array.from(t.backend.data(t)) : Float64Array.from(await t.read());
}

/** Largest |got − want| / max |want| over a set of named arrays. */
export function maxRel(got: Map<string, ArrayLike<number>>, want: Record<string, ArrayLike<number>>): number {
  let worst = 0;
  for (const [k, w] of Object.entries(want)) {
    const g = got.get(k)!;
    let peak = 0;
    let err = 0;
    for (let i = 0; i < w.length; i++) {
      peak = Math.max(peak, Math.abs(w[i]));
      err = Math.max(err, Math.abs(g[i] - w[i]));
    }
    worst = Math.max(worst, err / (peak || 1));
  }
  return worst;
}

export interface StepReport { loss: number; gradNorm: number; lr: number; stateErr: number; gradErr?: number }

/** Inner loop: returns, per step, our loss/norm and the relative error of the weights (and step-0 grads). */
export async function runInnerGolden(backend: Backend): Promise<StepReport[]> {
  const h = G.inner.hyper;
  const model = await loadDecoderFromDir('models/tiny/qwen3-tiny', backend);
  const link = InnerLink.fromStateDict(backend, await readLinkFile(G.inner.link_file), { name: 'planner inner' });
  const opt = new AdamW([link.params], { eps: h.eps, weightDecay: h.weight_decay, maxGradNorm: h.max_grad_norm });
  const out: StepReport[] = [];
  try {
    for (const [k, step] of G.inner.steps.entries()) {
      const batch = step.batch.map((i) => ({ ids: G.inner.samples[i].ids, lossMask: G.inner.samples[i].loss_mask }));
      const N = batch.reduce((n, e) => n + innerPairs(e), 0);
      opt.zeroGrad();
      let loss = 0;
      for (const ex of batch) {
        const l = await innerSampleStep(model, link, ex, { cos: h.w_cos, mse: h.w_mse }, N);
        loss += (await values(l))[0];
        l.dispose();
      }
      opt.gather();
      let gradErr: number | undefined;
      if (k === 0) {
        const grads = new Map([...(await link.params.export('grad'))].map(([n, v]) => [n, Float64Array.from(v)]));
        gradErr = maxRel(grads, Object.fromEntries(Object.entries(G.inner.grad0).map(([n, b]) => [n, f64(b)])));
      }
      const lr = h.lr * lrFactor('cosine', k, h.warmup, h.total);
      const gn = opt.step(lr);
      const gradNorm = (await values(gn))[0];
      gn.dispose();
      const state = new Map([...(await link.stateDict())].map(([n, t]) => [n, t.data]));
      out.push({
        loss,
        gradNorm,
        lr,
        stateErr: maxRel(state, Object.fromEntries(Object.entries(step.state).map(([n, b]) => [n, f64(b)]))),
        ...(gradErr !== undefined ? { gradErr } : {}),
      });
    }
    return out;
  } finally {
    link.dispose();
    model.dispose();
  }
}

/** Our values summarised the way the golden file stores outer tensors (vectors whole; matrices: rows 0 and r−1, wsum, sumsq). */
export function probeError(got: Map<string, { shape: readonly number[]; data: ArrayLike<number> }>, want: Record<string, Probe>): number {
  let worst = 0;
  const rel = (a: number, b: number, scale: number) => Math.abs(a - b) / Math.max(scale, 1e-12);
  for (const [k, p] of Object.entries(want)) {
    const t = got.get(k)!;
    const d = t.data;
    const ref = f64(p.data);
    const picked: number[] = [];
    if (t.shape.length === 1) picked.push(...Array.from(d));
    else {
      const [r, c] = t.shape;
      for (const row of [0, r - 1]) for (let j = 0; j < c; j++) picked.push(d[row * c + j]);
    }
    let peak = 0;
    for (const x of ref) peak = Math.max(peak, Math.abs(x));
    for (let i = 0; i < ref.length; i++) worst = Math.max(worst, rel(picked[i], ref[i], peak));
    let wsum = 0;
    let sumsq = 0;
    for (let i = 0; i < d.length; i++) {
      wsum += d[i] * Math.sin(0.37 * i + 0.1);
      sumsq += d[i] * d[i];
    }
    // wsum and sumsq are sums over the whole tensor: judge them against its overall size (√sumsq · √n)
    const size = Math.sqrt(p.sumsq) * Math.sqrt(d.length);
    worst = Math.max(worst, rel(wsum, p.wsum, size), rel(sumsq, p.sumsq, p.sumsq));
  }
  return worst;
}

export interface OuterSetup {
  agents: Map<string, OuterAgent>;
  outer: Map<string, OuterLink>;
  samples: OuterSample[];
  dispose(): void;
}

/** The golden tiny system; `placement` puts roles on other backends (one role per device), each outer link on its sender's. */
export async function outerSetup(backend: Backend, placement: Readonly<Record<string, Backend>> = {}): Promise<OuterSetup> {
  const models = { planner: 'qwen3-tiny', critic: 'llama-tiny', solver: 'qwen2-tiny' };
  const on = (role: string) => placement[role] ?? backend;
  const agents = new Map<string, OuterAgent>();
  for (const [role, m] of Object.entries(models)) {
    const decoder = await loadDecoderFromDir(`models/tiny/${m}`, on(role));
    const inner = InnerLink.fromStateDict(on(role), await readLinkFile(G.outer.inner_links[role]), { name: `${role} inner` }).freeze();
    agents.set(role, { decoder, inner });
  }
  const sender = new Map(getStyle('sequential_light').links.map((l) => [l.key, l.from]));
  const outer = new Map<string, OuterLink>();
  for (const [key, l] of Object.entries(G.outer.outer_links)) {
    outer.set(key, OuterLink.fromStateDict(on(sender.get(key)!), await readLinkFile(l.file), { name: key, dIn: l.d_in, dOut: l.d_out }));
  }
  const samples: OuterSample[] = G.outer.samples.map((s) => {
    const m = new Map<string, OuterStage>();
    m.set(stageKey(0, 'planner'), { pieces: [s.P], target: s.TP });
    m.set(stageKey(1, 'planner'), { pieces: [s.F0, s.F1], target: s.TP });
    for (const r of [0, 1]) {
      m.set(stageKey(r, 'critic'), { pieces: [s.C0, s.C1], target: s.TC });
      m.set(stageKey(r, 'solver'), { pieces: [s.S0, s.S1], target: s.TS });
    }
    return m;
  });
  return {
    agents, outer, samples,
    dispose: () => {
      for (const a of agents.values()) { a.decoder.dispose(); a.inner.dispose(); }
      for (const l of outer.values()) l.dispose();
    },
  };
}

export interface OuterReport { loss: number; gradNorm: number; ce: number[][]; stateErr: number; gradErr?: number }

/** `steps` optimizer steps on the golden batch; config 2 (non-last weighting) when `finalOnly` is false. */
export async function runOuterGolden(
  backend: Backend,
  finalOnly: boolean,
  steps: number,
  placement: Readonly<Record<string, Backend>> = {},
): Promise<OuterReport[]> {
  const h = G.outer.hyper;
  const s = await outerSetup(backend, placement);
  const keys = ['outer_12', 'outer_23', 'outer_31'];
  const opt = new AdamW(
    keys.map((k) => s.outer.get(k)!.params),
    { eps: h.eps, weightDecay: 0, maxGradNorm: h.max_grad_norm },
  );
  const style = getStyle('sequential_light');
  const out: OuterReport[] = [];
  try {
    for (let k = 0; k < steps; k++) {
      opt.zeroGrad();
      const ce: number[][] = [];
      let loss = 0;
      for (const sample of s.samples) {
        const r = await outerSampleStep(
          style,
          s.agents,
          s.outer,
          sample,
          {
            rounds: h.rounds,
            maxLatentTokens: h.max_latent_tokens,
            superviseFinalOnly: finalOnly,
            nonLastLossWeight: h.non_last_loss_weight,
            maxLength: 4096,
          },
          1 / s.samples.length,
        );
        if (!('loss' in r)) throw new Error(`golden sample skipped: ${r.skip} ${r.detail}`);
        loss += r.loss / s.samples.length;
        ce.push(r.ce);
      }
      opt.gather();
      const wantGrad = finalOnly ? (k === 0 ? G.outer.config1.grad0 : undefined) : G.outer.config2.grad;
      let gradErr: number | undefined;
      if (wantGrad) {
        gradErr = 0;
        for (const key of keys) {
          const p = s.outer.get(key)!.params;
          const g = await p.export('grad');
          const got = new Map(p.entries.map((e) => [e.name, { shape: e.shape, data: g.get(e.name)! }]));
          gradErr = Math.max(gradErr, probeError(got, wantGrad[key]));
        }
      }
      const gn = opt.step(h.lr * lrFactor('cosine', k, h.warmup, h.total));
      const gradNorm = (await values(gn))[0];
      gn.dispose();
      let stateErr = 0;
      if (finalOnly) {
        for (const key of keys)
          stateErr = Math.max(stateErr, probeError(await s.outer.get(key)!.stateDict(), G.outer.config1.steps[k].state[key]));
      }
      out.push({ loss, gradNorm, ce, stateErr, ...(gradErr !== undefined ? { gradErr } : {}) });
    }
    return out;
  } finally {
    s.dispose();
  }
}
