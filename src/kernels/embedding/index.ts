/**
 * embedding: rows of a table [V, d] (f32, f16, bf16, q8_0, q4_0) gathered by i32 ids of any shape into
 * [...ids, d] f32, and the scatter-add backward into a [V, d] f32 gradient. Tables and gradients split
 * across bindings along V are walked chunk by chunk.
 * Out-of-range ids: the CPU reference throws InvalidArgument; on the GPU they give zero rows (forward)
 * and no gradient (backward), since a kernel cannot throw.
 */
import { rowBytes, isQuant } from '../../formats/dtype';
import { GpuContext, Uniforms } from '../../gpu/context';
import { type FloatArray, type KernelDef, type Meta, binding, cudaDType, expectDType, expectRank, numelOf } from '../kernel';
import { ShapeMismatch } from '../../errors';
import { bind, chunkStarts, locate, segments } from '../segments';
import { embeddingBackward, embeddingForward } from './cpu';
import { gatherWgsl, linksWgsl, scatterWgsl } from './wgsl';

const WG = 256;

function checkIds(op: string, ids: Meta) {
  expectDType(op, 'ids', ids, 'i32');
}

/** out[..., :] = table[ids[...], :] as f32; inputs [ids, table]. */
export const embeddingKernel: KernelDef<void> = {
  name: 'embedding',
  outputs([ids, table]) {
    checkIds('embedding', ids);
    expectDType('embedding', 'table', table, 'f32', 'f16', 'bf16', 'q8_0', 'q4_0');
    expectRank('embedding', 'table', table, 2);
    return [{ shape: [...ids.shape, table.shape[1]], dtype: 'f32' }];
  },
  cpu([ids, table], [out], _a, { inputs }) {
    const [V, d] = inputs[1].shape;
    embeddingForward(ids as Int32Array, table, inputs[1].dtype, V, d, out as FloatArray);
  },
  webgpu(ctx, [ids, table], [out]) {
    const [V, d] = table.meta.shape;
    const n = numelOf(ids.meta.shape);
    if (n === 0 || d === 0) return;
    const dtype = table.meta.dtype;
    const native = dtype === 'f16' && ctx.hasFeature('shader-f16');
    const ld = isQuant(dtype) ? rowBytes(dtype, d) / 4 : d;
    const perRow = (r: { meta: Meta }, drop: number) => numelOf(r.meta.shape.slice(1, r.meta.shape.length - drop));
    const idStarts = chunkStarts(ids, perRow(ids, 0));
    const outStarts = chunkStarts(out, perRow(out, 1));
    const tStarts = chunkStarts(table, 1);
    for (const [p0, p1] of segments(n, [...idStarts, ...outStarts])) {
      const li = locate(ids, idStarts, p0);
      const lo = locate(out, outStarts, p0);
      table.chunks.forEach((tc, ti) => {
        ctx.dispatch({
          key: `embedding_${dtype}${native ? 'n' : ''}_gather_wg${WG}`,
          wgsl: () => gatherWgsl(dtype, native, WG),
          uniforms: new Uniforms()
            .u32(p1 - p0)
            .u32(d)
            .u32(li.local)
            .u32(lo.local * d)
            .u32(tStarts[ti])
            .u32(tc.rows)
            .u32(V)
            .u32(ti === 0 ? 1 : 0)
            .u32(ld),
          bindings: [bind(li.chunk), bind(tc), bind(lo.chunk)],
          // the table is bound whole but only the looked-up rows are read
          reads: [undefined, (p1 - p0) * (tc.size / Math.max(1, tc.rows))],
          workgroups: ctx.grid(Math.ceil(((p1 - p0) * d) / WG)),
        });
      });
    }
  },
  cuda(ctx, [ids, table], [out]) {
    const [V, d] = table.meta.shape;
    const n = numelOf(ids.meta.shape);
    if (n * d > 0) ctx.launch('embedding', [ids.ptr, table.ptr, out.ptr], [n, V, d, cudaDType(table.meta.dtype)]);
  },
};

/** gTable [V, d] f32 = scatter-add of g [...ids, d] by ids; inputs [ids, g], attrs.V = table rows. */
export const embeddingBackwardKernel: KernelDef<{ V: number }> = {
  name: 'embedding_backward',
  outputs([ids, g], { V }) {
    checkIds('embedding_backward', ids);
    expectDType('embedding_backward', 'g', g, 'f32');
    const lead = g.shape.slice(0, -1);
    if (g.shape.length !== ids.shape.length + 1 || lead.some((s, i) => s !== ids.shape[i])) {
      throw new ShapeMismatch(`embedding_backward: g has shape [${g.shape}], expected [${ids.shape}, d]`);
    }
    return [{ shape: [V, g.shape[g.shape.length - 1]], dtype: 'f32' }];
  },
  cpu([ids, g], [out], { V }, { outputs }) {
    embeddingBackward(ids as Int32Array, g as FloatArray, V, outputs[0].shape[1], out as FloatArray);
  },
  webgpu(ctx, [ids, g], [out], { V }) {
    for (const c of out.chunks) ctx.clear(c.buffer, c.offset, c.size);
    const n = numelOf(ids.meta.shape);
    const d = out.meta.shape[1];
    if (n === 0 || d === 0) return;
    const links = ctx.createBuffer(8 * n, GpuContext.STORAGE, 'embedding-links');
    const idsB = binding(ids, 'embedding_backward (ids)');
    ctx.dispatch({
      key: `embedding_links_i32_wg${WG}`,
      wgsl: () => linksWgsl(WG),
      uniforms: new Uniforms().u32(n),
      bindings: [idsB, { buffer: links, offset: 0, size: 8 * n }],
      workgroups: ctx.grid(Math.ceil(n / WG)),
    });
    const gStarts = chunkStarts(g, numelOf(g.meta.shape.slice(1, -1)));
    const oStarts = chunkStarts(out, 1);
    for (const [p0, p1] of segments(n, gStarts)) {
      const lg = locate(g, gStarts, p0);
      out.chunks.forEach((oc, oi) => {
        ctx.dispatch({
          key: `embedding_scatter_f32_wg${WG}`,
          wgsl: () => scatterWgsl(WG),
          uniforms: new Uniforms().u32(n).u32(d).u32(p0).u32(p1).u32(lg.local * d).u32(oStarts[oi]).u32(oc.rows).u32(V),
          bindings: [idsB, { buffer: links, offset: 0, size: 8 * n }, bind(lg.chunk), bind(oc)],
          workgroups: ctx.grid(Math.ceil(((p1 - p0) * d) / WG)),
        });
      });
    }
    ctx.releaseBuffer(links); // reusable only after this batch is submitted
  },
  cuda(ctx, [ids, g], [out], { V }) {
    const n = numelOf(ids.meta.shape);
    const d = out.meta.shape[1];
    if (V * d === 0) return;
    // i32 scratch: per-id counts [V], bucket offsets [V + 1], positions by bucket [n], then sorted [n]
    const work = ctx.temp(4 * (2 * V + 1 + 2 * n));
    ctx.launch('embedding_backward', [ids.ptr, g.ptr, out.ptr, work], [n, V, d]);
  },
};
