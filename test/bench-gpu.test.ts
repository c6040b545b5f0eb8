// `npm run bench:gpu -- --quick --json` on this machine's adapter (lavapipe): the report's fields, and the counted work
// against references that hold on any adapter: the weight bytes a decode step reads counted by hand from the shapes,
// the same dispatches counted twice (generate's decode steps, the harness's counted step), at most 8 per layer.
// Timing is not a test: figures are only checked to be finite and positive.
import { spawnSync } from 'node:child_process';
import { expect, it } from 'vitest';
import type { GpuBenchReport } from '../bench/gpu-report';
import { BATCH, BATCH_NOT_BUILT } from '../bench/gpu-measure';
import { stepSubmits } from '../src/gpu/counters';

const positive = (v: number | null | undefined) => typeof v === 'number' && Number.isFinite(v) && v > 0;

/** Bytes of one Qwen3 decode step's weights by hand: q4_0 projections 18 bytes per 32 values, bf16 norms, the tied table. */
function referenceStepBytes(m: Record<string, number | string>, dtype: 'q4_0' | 'bf16') {
  const [d, H, Hkv, D, I, L, V] = ['hidden', 'heads', 'kv_heads', 'head_dim', 'intermediate', 'layers', 'vocab'].map((k) => m[k] as number);
  const projValues = d * (H * D + 2 * Hkv * D) + H * D * d + 3 * d * I;
  const proj = dtype === 'q4_0' ? (projValues / 32) * 18 : 2 * projValues;
  const norms = 2 * (2 * d + 2 * D);
  const stack = L * (proj + norms) + 2 * d; // the layers and the final norm
  const table = 2 * V * d;
  // a decode step: every layer, the embedding row looked up, the whole table again as the tied LM head
  return { step: stack + 2 * d + table, latent: stack, row: 2 * d };
}

it('npm run bench:gpu -- --quick --json reports decode, latent, batch, GEMV and peer figures with the work counted exactly', () => {
  const t0 = performance.now();
  const r = spawnSync(process.execPath, ['--import', 'tsx', 'bench/gpu.ts', '--quick', '--json'], { encoding: 'utf8', timeout: 110_000 });
  expect(r.status, `${r.stdout.slice(-2000)}\n${r.stderr.slice(-3000)}`).toBe(0);
  const rep = JSON.parse(r.stdout) as GpuBenchReport;
  expect(rep.model).toMatchObject({ hidden: 512, heads: 4, kv_heads: 2, head_dim: 128, intermediate: 1536, layers: 2, vocab: 256 });
  expect(rep.options).toMatchObject({ quick: true, layers: 2, backends: ['webgpu', 'cuda'] });
  const L = rep.model.layers as number;

  const gpu = rep.backends.find((b) => b.backend === 'webgpu')!;
  expect(gpu.unavailable).toBeNull();
  // lavapipe: the warning is printed and no bandwidth is claimed for it
  expect(gpu.cpu_adapter).toBe(true);
  expect(gpu.nominal_gbps).toBeNull();
  expect(r.stderr).toMatch(/^warning: this is a CPU adapter .* say nothing about GPU speed$/m);
  expect(r.stderr).toMatch(/^nominal bandwidth unknown for this adapter$/m);
  expect([gpu.errors, gpu.skipped]).toEqual([[], []]);
  expect(gpu.decode!.map((d) => d.dtype)).toEqual(['q4_0', 'bf16']);

  for (const d of gpu.decode!) {
    const ref = referenceStepBytes(rep.model, d.dtype);
    expect(d.step_weight_bytes, d.dtype).toBe(ref.step);
    // every weight read once per token: generate's decode steps and the bare step count the hand-counted bytes
    expect(d.per_token.weight_bytes).toBe(ref.step);
    expect(d.step.weight_bytes).toBe(ref.step);
    // a latent step reads the layers and the final norm: no table row, no LM head (the link's f32 params are activations)
    expect(d.latent.weight_bytes).toBe(ref.latent);
    expect([d.per_token.submits, d.per_token.readbacks, d.step.readbacks]).toEqual([stepSubmits(d.per_token.dispatches!), 1, 0]);
    expect(d.fused_layers).toBe(L);
    // two counts of the same work agree; at most 8 dispatches per layer and 4 outside the layers
    // (embedding gather, final norm, LM head, argmax)
    expect(d.step.dispatches).toBe(d.per_token.dispatches);
    expect(Number.isInteger(d.dispatches_per_layer)).toBe(true);
    expect(d.dispatches_per_layer!).toBeLessThanOrEqual(8);
    const outside = d.per_token.dispatches! - L * d.dispatches_per_layer!;
    expect(outside).toBeGreaterThanOrEqual(1);
    expect(outside).toBeLessThanOrEqual(4);
    // the inner link adds at most 4 dispatches to the layers and the final norm
    expect(d.latent.dispatches!).toBeLessThanOrEqual(L * d.dispatches_per_layer! + 1 + 4);
    for (const v of [d.prefill_tokens_per_s, d.decode_tokens_per_s, d.step.ms, d.latent.ms, d.latent.ratio_to_decode_step])
      expect(positive(v), String(v)).toBe(true);
    expect(d.step.weight_gbps).toBeCloseTo(ref.step / d.step.ms / 1e6, 9);
    expect(d.latent.ratio_to_decode_step).toBeCloseTo(d.latent.ms / d.step.ms, 12);

    const b = d.batch;
    expect(b.batch).toBe(BATCH);
    if (b.skipped !== undefined) {
      expect(b.skipped).toBe(BATCH_NOT_BUILT);
    } else {
      expect(positive(b.tokens_per_s) && positive(b.ms_per_step)).toBe(true);
      expect(b.tokens_per_s!).toBeCloseTo((1000 * BATCH) / b.ms_per_step!, 6);
      // one batched step reads each weight once, and the 16 rows of the table it looks up
      expect(b.weight_bytes_per_step).toBe(ref.step + (BATCH - 1) * ref.row);
      expect(b.dispatches_per_step!).toBeLessThanOrEqual(8 * L + 4);
    }
  }
  expect(gpu.gemv!.map((g) => [g.dtype, g.rows, g.cols, g.copies, g.fraction_of_nominal])).toEqual([
    ['q4_0', 1536, 512, 2, null],
    ['bf16', 1536, 512, 2, null],
  ]);
  for (const g of gpu.gemv!) expect(positive(g.gbps) && positive(g.ms_per_gemv)).toBe(true);

  // no NVIDIA driver here: the CUDA backend says why and the run goes on
  const cuda = rep.backends.find((b) => b.backend === 'cuda')!;
  if (cuda.unavailable !== null) expect(cuda.unavailable).toMatch(/^CudaUnavailable: /);
  else expect(cuda.decode!.length).toBe(2);

  const p = rep.peer!;
  expect(p.skipped, p.skipped).toBeUndefined();
  expect(p.greedy_ids_equal).toBe(true);
  expect(p.decode_ratio).toBeCloseTo(p.ours_decode_tokens_per_s! / p.theirs_decode_tokens_per_s!, 9);
  expect(positive(p.decode_ratio_f32) && positive(p.prefill_ratio)).toBe(true);
  console.log(
    `bench:gpu --quick: ${rep.seconds.toFixed(1)} s in the command, ${((performance.now() - t0) / 1000).toFixed(1)} s with its start`,
  );
}, 120_000);
