/**
 * RecursiveMAS benchmarks: one latent step of the rollout (inner link + a one-row forward on the KV cache,
 * no LM head) and the message one agent sends another, Outer(Inner(H)) over m = 32 latents at
 * Sequential-Light's critic → solver widths (2048 → 1536). Random weights built in memory, so the same
 * cases run on the bench page.
 *
 * Accounting: a linear [T, a] → [T, b] costs 2·T·a·b FLOPs; LayerNorm and GELU are left out (O(T·d)).
 * Bytes: each link weight (f32) once, plus the input and output rows.
 */
import { noGrad } from '../autograd';
import { forwardCost, randomDecoder, tinyModelConfig } from '../model/model.bench';
import type { Backend } from '../tensor/backend';
import { tidy } from '../tensor/scope';
import type { BenchCase, BenchRun, BenchSize } from '../kernels/workbench/bench';
import { Rng } from '../util/rng';
import { InnerLink, OuterLink, innerLinkParamCount, outerLinkParamCount } from './links';

const PAST = 32;

async function latentStep(backend: Backend): Promise<BenchRun> {
  const c = tinyModelConfig();
  const model = await randomDecoder(c, backend, null);
  const inner = InnerLink.create(backend, c.hidden, { seed: 2 });
  const rng = new Rng(6);
  const cache = model.newCache(PAST + 1);
  noGrad(() =>
    tidy(() => model.forward({ inputsEmbeds: backend.fromValues(rng.normals(PAST * c.hidden), [PAST, c.hidden]), cache }).hidden),
  ).dispose();
  const h = backend.fromValues(rng.normals(c.hidden), [1, c.hidden]);
  const link = 2 * 2 * c.hidden * c.hidden;
  const cost = forwardCost(c, model.weights, { T: 1, past: PAST, logitsRows: 0, ids: false });
  return {
    // as latentRollout: e = Inner(h) is fed as the next input embedding; the cache length is rewound so the
    // same row is overwritten whatever the iteration count
    run: () => {
      cache.length = PAST;
      noGrad(() => tidy(() => model.forward({ inputsEmbeds: inner.forward(h), cache }).hidden)).dispose();
    },
    flops: cost.flops + link,
    bytes: cost.bytes + 4 * innerLinkParamCount(c.hidden),
    tokens: 1,
    dispose: () => (h.dispose(), cache.dispose(), inner.dispose(), model.dispose()),
  };
}

function message(backend: Backend, size: BenchSize): BenchRun {
  const [m, dIn, dOut] = size === 'full' ? [32, 2048, 1536] : [8, 256, 192];
  const inner = InnerLink.create(backend, dIn, { seed: 3 });
  const outer = OuterLink.create(backend, dIn, dOut, { seed: 4 });
  const H = backend.fromValues(new Rng(7).normals(m * dIn), [m, dIn]);
  return {
    run: () => noGrad(() => tidy(() => outer.forward(inner.forward(H)))).dispose(),
    flops: 2 * m * (2 * dIn * dIn) + 2 * m * (dIn * 2 * dOut + 2 * dOut * dOut + dIn * dOut),
    bytes: 4 * (innerLinkParamCount(dIn) + outerLinkParamCount(dIn, dOut) + m * (dIn + dOut)),
    dispose: () => (H.dispose(), inner.dispose(), outer.dispose()),
  };
}

/** The inner link alone on one latent row at Qwen3-1.7B's width (tiny: 256), fused (≤ 3 dispatches) or plain. */
function innerStep(backend: Backend, size: BenchSize, fused: boolean): BenchRun {
  const d = size === 'full' ? 2048 : 256;
  const inner = InnerLink.create(backend, d, { seed: 5 });
  inner.fusedSteps = fused && inner.fusedSteps;
  const h = backend.fromValues(new Rng(8).normals(d), [1, d]);
  return {
    run: () => noGrad(() => tidy(() => inner.forward(h))).dispose(),
    flops: 2 * 2 * d * d,
    bytes: 4 * (innerLinkParamCount(d) + 2 * d),
    tokens: 1,
    dispose: () => (h.dispose(), inner.dispose()),
  };
}

export const benches: BenchCase[] = [
  { name: 'inner link on a latent step, d 2048 (tiny 256)', setup: (b, s) => innerStep(b, s, true) },
  { name: 'inner link on a latent step, d 2048 (tiny 256), plain ops', setup: (b, s) => innerStep(b, s, false) },
  { name: `latent step (qwen3-tiny + inner link, KV ${PAST})`, setup: (b) => latentStep(b) },
  { name: 'link message Outer(Inner(H)) 32 x 2048 -> 1536 (tiny 8 x 256 -> 192)', setup: (b, s) => message(b, s) },
];
