/**
 * The report of `npm run bench:gpu` (bench/gpu.ts): its JSON shape, the adapters' nominal memory bandwidth, and the
 * lines printed under each backend's table.
 */
import type { BenchResult } from '../src/kernels/workbench/bench';
import type { DecodeFigures, GemvFigures } from './gpu-measure';

/**
 * Nominal memory bandwidth (GB/s) from the vendors' data sheets, by a pattern on the adapter's or device's name,
 * most specific first. Names as Vulkan/Dawn and CUDA report them ("NVIDIA H100 80GB HBM3", "NVIDIA A100-SXM4-40GB",
 * "NVIDIA GeForce RTX 4090", "Apple M2 Max").
 */
const NOMINAL_GBPS: [RegExp, number][] = [
  [/\bB200\b/i, 8000],
  [/\bH200\b/i, 4800],
  [/\bH100 NVL\b/i, 3900],
  [/\bH100\b.*\bPCIe\b/i, 2000],
  [/\bH100\b/i, 3350],
  [/\bA100\b.*80\s?GB.*PCIe|\bA100\b.*PCIe.*80\s?GB/i, 1935],
  [/\bA100\b.*80\s?GB/i, 2039],
  [/\bA100\b/i, 1555],
  [/\bL40S?\b/i, 864],
  [/\bL4\b/i, 300],
  [/\bA10G\b/i, 600],
  [/\bA10\b/i, 600],
  [/\bT4\b/i, 320],
  [/\bV100\b/i, 900],
  [/RTX A6000/i, 768],
  [/RTX 6000 Ada/i, 960],
  [/RTX 5090/i, 1792],
  [/RTX 4090/i, 1008],
  [/RTX 4080/i, 717],
  [/RTX 3090 Ti/i, 1008],
  [/RTX 3090/i, 936],
  [/RTX 3080/i, 760],
  [/\bMI300X\b/i, 5300],
  [/\bMI250X?\b/i, 3277],
  [/Apple M4 Max/i, 546],
  [/Apple M4 Pro/i, 273],
  [/Apple M4\b/i, 120],
  [/Apple M[123] Ultra/i, 800],
  [/Apple M[123] Max/i, 400],
  [/Apple M3 Pro/i, 150],
  [/Apple M[12] Pro/i, 200],
  [/Apple M[23]\b/i, 100],
  [/Apple M1\b/i, 68],
];

/** GB/s for a named adapter or device, or null when the table does not know it. */
export function nominalBandwidth(name: string): number | null {
  return NOMINAL_GBPS.find(([re]) => re.test(name))?.[1] ?? null;
}

/** CPU adapters (lavapipe, SwiftShader) run WGSL correctly but say nothing about GPU speed. */
export function isCpuAdapterName(name: string, isFallback: boolean): boolean {
  return isFallback || /llvmpipe|lavapipe|swiftshader|softpipe|\bcpu\b/i.test(name);
}

export interface PeerFigures {
  model: string;
  host: 'node';
  skipped?: string;
  adapter?: string;
  /** Ours with the model's own weights (their dtype in `ours_weights`), and ours on the export's f32 weights, as theirs runs. */
  ours_weights?: string;
  ours_decode_tokens_per_s?: number;
  ours_f32_decode_tokens_per_s?: number;
  theirs_decode_tokens_per_s?: number;
  /** Ours over transformers.js (decode tokens/s, medians of interleaved runs), on the same adapter. */
  decode_ratio?: number;
  decode_ratio_f32?: number;
  prefill_ratio?: number;
  greedy_ids_equal?: boolean;
}

export interface BackendReport {
  backend: 'webgpu' | 'cuda';
  /** Why this backend did not run (its named error), or null. */
  unavailable: string | null;
  name?: string;
  cpu_adapter?: boolean;
  features?: Record<string, boolean>;
  nominal_gbps?: number | null;
  decode?: DecodeFigures[];
  gemv?: (GemvFigures & { fraction_of_nominal: number | null })[];
  /** A section that failed: its name and the error (the command then exits 1). */
  errors?: string[];
  /** A section left out for lack of time (--budget-s). */
  skipped?: string[];
  /** The timed rows as the table prints them (left out of the JSON). */
  table_rows?: BenchResult[];
}

export interface GpuBenchReport {
  model: Record<string, number | string>;
  options: { quick: boolean; layers: number; prompt: number; tokens: number; backends: string[] };
  backends: BackendReport[];
  peer: PeerFigures | null;
  seconds: number;
}

const f = (v: number | null | undefined, digits = 3) =>
  v === null || v === undefined || !Number.isFinite(v) ? '-' : v >= 100 ? v.toFixed(0) : v.toPrecision(digits);
const pct = (v: number | null) => (v === null ? '' : ` (${(100 * v).toFixed(1)}% of nominal)`);

/** The lines under a backend's table: bandwidth, per dtype the decode figures, batch, GEMV. */
export function summaryLines(r: BackendReport): string[] {
  const nominal = r.nominal_gbps ?? null;
  const out = [nominal === null ? 'nominal bandwidth unknown for this adapter' : `nominal bandwidth ${nominal} GB/s`];
  for (const d of r.decode ?? []) {
    const frac = nominal === null ? null : d.step.weight_gbps / nominal;
    const disp = d.per_token.dispatches === null ? 'dispatches not counted on this backend'
      : `${f(d.per_token.dispatches, 4)} dispatches per token, ${f(d.dispatches_per_layer, 3)} per layer (${d.fused_layers} layers fused)`;
    out.push(
      `${d.dtype}: decode ${f(d.decode_tokens_per_s)} tokens/s (generate), step ${f(d.step.ms)} ms = ${f(d.step.weight_gbps)} GB/s of weights${pct(frac)}; ${disp}`,
    );
    out.push(`${d.dtype}: latent step ${f(d.latent.ms)} ms = ${d.latent.ratio_to_decode_step.toFixed(2)}× a decode step` +
      (d.latent.dispatches === null ? '' : ` (${d.latent.dispatches} dispatches vs ${d.step.dispatches})`));
    const b = d.batch;
    out.push(
      b.skipped
        ? `${d.dtype}: batch ${b.batch}: skipped: ${b.skipped}`
        : `${d.dtype}: batch ${b.batch}: ${f(b.tokens_per_s)} tokens/s, ${f(b.ms_per_step)} ms per step` +
            `, ${b.speedup_over_batch_1!.toFixed(2)}× batch 1's tokens/s` +
            (b.dispatches_per_step == null ? '' : `, ${b.dispatches_per_step} dispatches per step`),
    );
  }
  for (const g of r.gemv ?? []) {
    out.push(`gemv ${g.dtype} [${g.rows}, ${g.cols}]: ${f(g.gbps)} GB/s${pct(g.fraction_of_nominal)}, ${f(g.ms_per_gemv)} ms each`);
  }
  for (const e of r.skipped ?? []) out.push(`skipped: ${e}`);
  for (const e of r.errors ?? []) out.push(`error: ${e}`);
  return out;
}

export function peerLine(p: PeerFigures): string {
  if (p.skipped) return `peer (transformers.js, Node, ${p.model}): skipped: ${p.skipped}`;
  return (
    `peer (transformers.js, Node, ${p.model}, ${p.adapter}): decode ours (${p.ours_weights}) ${f(p.ours_decode_tokens_per_s)} tokens/s, ` +
    `ours (f32) ${f(p.ours_f32_decode_tokens_per_s)}, theirs (f32) ${f(p.theirs_decode_tokens_per_s)}: ours/theirs ${p.decode_ratio!.toFixed(2)}× ` +
    `(f32 ${p.decode_ratio_f32!.toFixed(2)}×, prefill ${p.prefill_ratio!.toFixed(2)}×); greedy ids ${p.greedy_ids_equal ? 'identical' : 'DIFFER'}`
  );
}
