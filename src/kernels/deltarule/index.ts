/**
 * deltarule: the gated delta rule, the recurrent core of Qwen3.5's Gated DeltaNet layers (cpu.ts has the formulas),
 * over q, k [T, nk, dk] (L2-normalised; q scaled), v [T, nv, dv], g [T, nv] (log decay), β [T, nv] and optionally
 * the state before the first position, [nv, dk, dv]. Value head h reads key head ⌊h / (nv / nk)⌋. The forward returns
 * o, the final state and u = v − Sᵀk (for the backward); three backward passes (columns, rows, gates) give dv, dβ, dg
 * and per-value-head parts of dq and dk. f32 throughout; dk and dv at most 256 (one thread's column or row).
 */
import { ShapeMismatch } from '../../errors';
import { GpuContext, Uniforms } from '../../gpu/context';
import {
  type CudaRef, type FloatArray, type GpuRef, type KernelDef, type Meta, binding, expectDType, expectDim, expectRank, expectSameShape,
} from '../kernel';
import { type DeltaDims, deltaRuleBackwardCols, deltaRuleBackwardGates, deltaRuleBackwardRows, deltaRuleForward } from './cpu';
import { deltaRuleColsWgsl, deltaRuleForwardWgsl, deltaRuleGatesWgsl, deltaRuleRowsWgsl } from './wgsl';

export { type DeltaDims, deltaRuleBackwardCols, deltaRuleBackwardGates, deltaRuleBackwardRows, deltaRuleForward } from './cpu';

/** The largest dk and dv: one GPU thread holds a column (dk) or a row (dv) of a head's state in registers. */
export const DELTA_MAX_DIM = 256;
const WG = 64;

/** Validates q, k [T, nk, dk], v [T, nv, dv], g, β [T, nv] and state [nv, dk, dv]; returns the sizes. */
export function deltaDims(op: string, q: Meta, k: Meta, v: Meta, g: Meta, beta: Meta, state?: Meta): DeltaDims {
  for (const [n, m] of [['q', q], ['k', k], ['v', v], ['g', g], ['beta', beta], ['state', state]] as const) {
    if (m) expectDType(op, n, m, 'f32');
  }
  expectRank(op, 'q', q, 3);
  expectRank(op, 'v', v, 3);
  expectSameShape(op, q, k, 'q', 'k');
  const [T, nk, dk] = q.shape;
  const [Tv, nv, dv] = v.shape;
  expectDim(op, 'v', Tv, T, 'positions');
  if (nk < 1 || nv % nk !== 0) {
    throw new ShapeMismatch(
      `${op}: ${nv} value heads cannot share ${nk} key heads; nv must be a multiple of nk ≥ 1 (q, k [T, nk, dk], v [T, nv, dv])`,
    );
  }
  for (const [n, d] of [['dk', dk], ['dv', dv]] as const) {
    if (d < 1 || d > DELTA_MAX_DIM) {
      throw new ShapeMismatch(
        `${op}: ${n} ${d} is outside 1..${DELTA_MAX_DIM}; one GPU thread holds a state column (dk) or row (dv) of that size`,
      );
    }
  }
  for (const [n, m] of [['g', g], ['beta', beta]] as const) {
    expectRank(op, n, m, 2);
    expectSameShape(op, m, { shape: [T, nv], dtype: 'f32' }, n, '[T, nv]');
  }
  if (state) expectSameShape(op, state, { shape: [nv, dk, dv], dtype: 'f32' }, 'state', '[nv, dk, dv]');
  return { T, nk, nv, dk, dv };
}

const dimsOf = (op: string, ms: readonly Meta[], stateAt: number) => deltaDims(op, ms[0], ms[1], ms[2], ms[3], ms[4], ms[stateAt]);
const f = (a: unknown) => a as FloatArray;
const uniforms = (n: number, d: DeltaDims) => new Uniforms().u32(n).u32(d.T).u32(d.nk).u32(d.nv).u32(d.nv / d.nk);
const cudaInts = (d: DeltaDims) => [d.T, d.nk, d.nv, d.dk, d.dv];
const ptrs = (refs: readonly (CudaRef | undefined)[]) => refs.map((r) => (r ? r.ptr : 0n));

/** g | β | state copied into one temporary buffer (wgsl.ts: keeps each pass within 8 storage bindings). */
function packGates(ctx: GpuContext, op: string, g: GpuRef, beta: GpuRef, state?: GpuRef) {
  const n = g.meta.shape[0] * g.meta.shape[1];
  const sn = state ? state.meta.shape.reduce((a, b) => a * b, 1) : 0;
  const size = Math.max(4, (2 * n + sn) * 4);
  const buffer = ctx.createBuffer(size, GpuContext.STORAGE, 'gated-delta-gates');
  const parts: [GpuRef | undefined, number, number][] = [[g, 0, n], [beta, n, n], [state, 2 * n, sn]];
  for (const [ref, at, count] of parts) {
    if (!ref || !count) continue;
    const b = binding(ref, op);
    ctx.copy(b.buffer, b.offset ?? 0, buffer, at * 4, count * 4);
  }
  // released after encoding: the pool hands it out again only after this batch is submitted
  return { binding: { buffer, offset: 0, size }, release: () => ctx.releaseBuffer(buffer) };
}

/** Inputs q, k, v, g, β and optionally state; outputs o [T, nv, dv], the final state [nv, dk, dv], u [T, nv, dv]. */
export const gatedDeltaRuleKernel: KernelDef<void> = {
  name: 'gated_delta_rule',
  outputs(ins) {
    const d = dimsOf('gated_delta_rule', ins, 5);
    return [
      { shape: [d.T, d.nv, d.dv], dtype: 'f32' }, { shape: [d.nv, d.dk, d.dv], dtype: 'f32' }, { shape: [d.T, d.nv, d.dv], dtype: 'f32' },
    ];
  },
  cpu([q, k, v, g, beta, state], [o, st, u], _a, { inputs, wasm }) {
    const d = dimsOf('gated_delta_rule', inputs, 5);
    if (wasm?.deltaRule(f(q), f(k), f(v), f(g), f(beta), state ? f(state) : null, f(o), f(st), f(u), d)) return;
    deltaRuleForward(f(q), f(k), f(v), f(g), f(beta), state ? f(state) : null, f(o), f(st), f(u), d);
  },
  webgpu(ctx, ins, [o, st, u]) {
    const op = 'gated_delta_rule';
    const d = dimsOf(op, ins.map((r) => r.meta), 5);
    const state = ins[5];
    const n = d.nv * d.dv;
    if (!n) return;
    if (!d.T) {
      const sb = binding(st, op);
      if (state) {
        const src = binding(state, op);
        ctx.copy(src.buffer, src.offset ?? 0, sb.buffer, sb.offset ?? 0, n * d.dk * 4);
      } else ctx.clear(sb.buffer, sb.offset, n * d.dk * 4);
      return;
    }
    const gs = packGates(ctx, op, ins[3], ins[4], state);
    ctx.dispatch({
      key: `gated_delta_rule_${state ? 'state' : 'zeros'}_dk${d.dk}_dv${d.dv}_wg${WG}`,
      wgsl: () => deltaRuleForwardWgsl(WG, d.dk, d.dv, !!state),
      uniforms: uniforms(n, d),
      bindings: [binding(ins[0], op), binding(ins[1], op), binding(ins[2], op), gs.binding, ...[o, st, u].map((r) => binding(r, op))],
      workgroups: ctx.grid(Math.ceil(n / WG)),
    });
    gs.release();
  },
  cuda(ctx, ins, outs) {
    const d = dimsOf('gated_delta_rule', ins.map((r) => r.meta), 5);
    if (d.nv * d.dk * d.dv > 0) ctx.launch('gated_delta_rule', ptrs([...ins.slice(0, 5), ins[5], ...outs]), cudaInts(d));
  },
};

/** Inputs q, k, g, β, u, do (the gradient of o); outputs dv and bpart = dδ ⊙ u, both [T, nv, dv]. */
export const gatedDeltaRuleBwdColsKernel: KernelDef<void> = {
  name: 'gated_delta_rule_bwd_cols',
  outputs(ins) {
    const d = colsDims(ins);
    return [{ shape: [d.T, d.nv, d.dv], dtype: 'f32' }, { shape: [d.T, d.nv, d.dv], dtype: 'f32' }];
  },
  cpu([q, k, g, beta, u, dout], [dv, bpart], _a, { inputs }) {
    deltaRuleBackwardCols(f(q), f(k), f(g), f(beta), f(u), f(dout), f(dv), f(bpart), colsDims(inputs));
  },
  webgpu(ctx, ins, outs) {
    const op = 'gated_delta_rule_bwd_cols';
    const d = colsDims(ins.map((r) => r.meta));
    const n = d.nv * d.dv;
    if (!n || !d.T) return;
    const gs = packGates(ctx, op, ins[2], ins[3]);
    ctx.dispatch({
      key: `gated_delta_rule_bwd_cols_dk${d.dk}_dv${d.dv}_wg${WG}`,
      wgsl: () => deltaRuleColsWgsl(WG, d.dk, d.dv),
      uniforms: uniforms(n, d),
      bindings: [binding(ins[0], op), binding(ins[1], op), gs.binding, ...[ins[4], ins[5], ...outs].map((r) => binding(r, op))],
      workgroups: ctx.grid(Math.ceil(n / WG)),
    });
    gs.release();
  },
  cuda(ctx, ins, outs) {
    const d = colsDims(ins.map((r) => r.meta));
    if (d.T * d.nv * d.dv > 0) ctx.launch('gated_delta_rule_bwd_cols', ptrs([...ins, ...outs]), cudaInts(d));
  },
};

/** q, k, g, β, u, do: u and do stand where v and o are. */
function colsDims(ms: readonly Meta[]): DeltaDims {
  const op = 'gated_delta_rule_bwd_cols';
  const d = deltaDims(op, ms[0], ms[1], ms[4], ms[2], ms[3]);
  expectSameShape(op, ms[5], ms[4], 'do', 'u');
  expectDType(op, 'do', ms[5], 'f32');
  return d;
}

/** q, k, g, β, u, dv, do and optionally state (u stands where v is). */
function rowsDims(ms: readonly Meta[]): DeltaDims {
  const op = 'gated_delta_rule_bwd_rows';
  const d = deltaDims(op, ms[0], ms[1], ms[4], ms[2], ms[3], ms[7]);
  for (const [n, m] of [['dv', ms[5]], ['do', ms[6]]] as const) {
    expectDType(op, n, m, 'f32');
    expectSameShape(op, m, ms[4], n, 'u');
  }
  return d;
}

/**
 * Inputs q, k, g, β, u, dv, do and optionally state; outputs value head h's parts of dq and dk, [T, nk, dk, r]
 * (r = nv / nk, h = kh·r + ρ at [.., ρ]): summed over the last dim they are dq and dk.
 */
export const gatedDeltaRuleBwdRowsKernel: KernelDef<void> = {
  name: 'gated_delta_rule_bwd_rows',
  outputs(ins) {
    const d = rowsDims(ins);
    const shape = [d.T, d.nk, d.dk, d.nv / d.nk];
    return [{ shape, dtype: 'f32' }, { shape, dtype: 'f32' }];
  },
  cpu([q, k, g, beta, u, dv, dout, state], [dqp, dkp], _a, { inputs }) {
    deltaRuleBackwardRows(f(q), f(k), f(g), f(beta), f(u), f(dv), f(dout), state ? f(state) : null, f(dqp), f(dkp), rowsDims(inputs));
  },
  webgpu(ctx, ins, outs) {
    const op = 'gated_delta_rule_bwd_rows';
    const d = rowsDims(ins.map((r) => r.meta));
    const state = ins[7];
    const n = d.nv * d.dk;
    if (!n || !d.T) return;
    const gs = packGates(ctx, op, ins[2], ins[3], state);
    ctx.dispatch({
      key: `gated_delta_rule_bwd_rows_${state ? 'state' : 'zeros'}_dk${d.dk}_dv${d.dv}_wg${WG}`,
      wgsl: () => deltaRuleRowsWgsl(WG, d.dk, d.dv, !!state),
      uniforms: uniforms(n, d),
      bindings: [binding(ins[0], op), binding(ins[1], op), gs.binding, ...[ins[4], ins[5], ins[6], ...outs].map((r) => binding(r, op))],
      workgroups: ctx.grid(Math.ceil(n / WG)),
    });
    gs.release();
  },
  cuda(ctx, ins, outs) {
    const d = rowsDims(ins.map((r) => r.meta));
    if (d.T * d.nv * d.dk > 0) ctx.launch('gated_delta_rule_bwd_rows', ptrs([...ins.slice(0, 7), ins[7], ...outs]), cudaInts(d));
  },
};

/** q, v, dv, bpart, dqParts. */
function gatesDims(ms: readonly Meta[]): DeltaDims {
  const op = 'gated_delta_rule_bwd_gates';
  const [q, v, dv, bpart, dqp] = ms;
  expectRank(op, 'q', q, 3);
  expectRank(op, 'v', v, 3);
  const [T, nk, dk] = q.shape;
  const nv = v.shape[1];
  const gate: Meta = { shape: [T, nv], dtype: 'f32' };
  const d = deltaDims(op, q, q, v, gate, gate);
  for (const [n, m] of [['dv', dv], ['bpart', bpart]] as const) {
    expectDType(op, n, m, 'f32');
    expectSameShape(op, m, v, n, 'v');
  }
  expectDType(op, 'dqParts', dqp, 'f32');
  expectSameShape(op, dqp, { shape: [T, nk, dk, nv / nk], dtype: 'f32' }, 'dqParts', '[T, nk, dk, nv / nk]');
  return d;
}

/** Inputs q, v, dv, bpart, dqParts; outputs dg and dβ [T, nv]. */
export const gatedDeltaRuleBwdGatesKernel: KernelDef<void> = {
  name: 'gated_delta_rule_bwd_gates',
  outputs(ins) {
    const d = gatesDims(ins);
    return [{ shape: [d.T, d.nv], dtype: 'f32' }, { shape: [d.T, d.nv], dtype: 'f32' }];
  },
  cpu([q, v, dv, bpart, dqp], [dg, db], _a, { inputs }) {
    deltaRuleBackwardGates(f(q), f(v), f(dv), f(bpart), f(dqp), f(dg), f(db), gatesDims(inputs));
  },
  webgpu(ctx, ins, outs) {
    const op = 'gated_delta_rule_bwd_gates';
    const d = gatesDims(ins.map((r) => r.meta));
    if (!d.T || !d.nv) return;
    ctx.dispatch({
      key: `gated_delta_rule_bwd_gates_dk${d.dk}_dv${d.dv}_wg${WG}`,
      wgsl: () => deltaRuleGatesWgsl(WG, d.dk, d.dv),
      uniforms: uniforms(d.nv, d),
      bindings: [...ins, ...outs].map((r) => binding(r, op)),
      workgroups: ctx.grid(Math.ceil(d.nv / WG)),
    });
  },
  cuda(ctx, ins, outs) {
    const d = gatesDims(ins.map((r) => r.meta));
    if (d.T * d.nv > 0) ctx.launch('gated_delta_rule_bwd_gates', ptrs([...ins, ...outs]), cudaInts(d));
  },
};
