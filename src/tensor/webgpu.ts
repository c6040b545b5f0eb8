/**
 * The WebGPU backend: tensors in GPU buffers from the context's pool, kernels dispatched through
 * their WGSL builders. Tensors larger than one storage binding are split along dim 0 into chunks
 * (how 1-9B model weights fit devices with 128 MiB-2 GiB binding limits); kernels that accept
 * split operands walk the chunks, the others throw BindingLimitExceeded.
 */
import { BindingLimitExceeded, InvalidArgument } from '../errors';
import { type DType, byteSize } from '../formats/dtype';
import { decode, encode } from '../formats/encode';
import { type ContextOptions, GpuContext, type GpuCounters } from '../gpu/context';
import type { GpuChunk, GpuRef, KernelDef, Meta } from '../kernels/kernel';
import type { Backend } from './backend';
import { checkBytes, checkReshape, checkShape, checkValues, checkView, sameBackend } from './check';
import { VIEW_ALIGN } from './backend';
import { type Storage, Tensor } from './tensor';

export class WebGpuBackend implements Backend {
  readonly kind = 'webgpu' as const;
  readonly name: string;

  constructor(readonly ctx: GpuContext) {
    const r = ctx.report;
    this.name = `webgpu (${[r.vendor, r.architecture, r.description].filter(Boolean).join(' ') || 'unknown adapter'})`;
  }

  counters(): GpuCounters {
    return this.ctx.counters();
  }

  markWeight(t: Tensor) {
    const s = t.storage;
    if (s.kind === 'webgpu') for (const c of s.chunks) this.ctx.markWeight(c.buffer);
  }

  /** Allocates storage for `shape`, split along dim 0 when one binding cannot hold it. */
  private alloc(shape: readonly number[], dtype: DType): GpuChunk[] {
    const total = byteSize(dtype, shape);
    const limit = this.ctx.bindingLimit;
    if (total <= limit) {
      const buffer = this.ctx.createBuffer(Math.max(total, 4), GpuContext.STORAGE);
      return [{ buffer, offset: 0, size: Math.ceil(Math.max(total, 4) / 4) * 4, rows: shape[0] ?? 1 }];
    }
    const sliceBytes = shape.length > 1 ? byteSize(dtype, shape.slice(1)) : 0;
    const perChunk = sliceBytes ? Math.floor(limit / sliceBytes) : 0;
    if (perChunk < 1) {
      throw new BindingLimitExceeded(
        `a ${dtype} tensor of shape [${shape}] (${total} bytes) cannot be split along dim 0 to fit this device's ${limit}-byte storage-binding limit`,
      );
    }
    const chunks: GpuChunk[] = [];
    for (let r = 0; r < shape[0]; r += perChunk) {
      const rows = Math.min(perChunk, shape[0] - r);
      const size = Math.ceil((rows * sliceBytes) / 4) * 4;
      chunks.push({ buffer: this.ctx.createBuffer(size, GpuContext.STORAGE), offset: 0, size, rows });
    }
    return chunks;
  }

  private wrap(chunks: GpuChunk[], shape: readonly number[], dtype: DType, refs = { n: 1 }): Tensor {
    return new Tensor(this, [...shape], dtype, { kind: 'webgpu', chunks, refs });
  }

  private ref(t: Tensor): GpuRef {
    const s = t.storage;
    if (s.kind !== 'webgpu') throw new InvalidArgument(`${t} is not a WebGPU tensor`);
    return { meta: { shape: t.shape, dtype: t.dtype }, chunks: s.chunks };
  }

  fromValues(values: ArrayLike<number>, shape: readonly number[], dtype: DType = 'f32'): Tensor {
    checkValues(values, shape);
    return this.fromBytes(encode(dtype, values, shape), shape, dtype);
  }

  fromBytes(bytes: Uint8Array, shape: readonly number[], dtype: DType): Tensor {
    checkBytes(bytes, shape, dtype);
    const chunks = this.alloc(shape, dtype);
    const sliceBytes = chunks.length > 1 ? byteSize(dtype, shape.slice(1)) : 0;
    let at = 0;
    for (const c of chunks) {
      const len = chunks.length > 1 ? c.rows * sliceBytes : bytes.byteLength;
      if (len) this.ctx.write(c.buffer, c.offset, bytes.subarray(at, at + len));
      at += len;
    }
    return this.wrap(chunks, shape, dtype);
  }

  zeros(shape: readonly number[], dtype: DType = 'f32'): Tensor {
    checkShape(shape);
    const chunks = this.alloc(shape, dtype);
    for (const c of chunks) this.ctx.clear(c.buffer, c.offset, c.size);
    return this.wrap(chunks, shape, dtype);
  }

  async readBytes(t: Tensor): Promise<Uint8Array> {
    const { chunks } = this.ref(t);
    const total = byteSize(t.dtype, t.shape);
    const out = new Uint8Array(total);
    const sliceBytes = chunks.length > 1 ? byteSize(t.dtype, t.shape.slice(1)) : total;
    let at = 0;
    for (const c of chunks) {
      const len = chunks.length > 1 ? c.rows * sliceBytes : total;
      if (len) out.set(new Uint8Array(await this.ctx.read(c.buffer, c.offset, len)), at);
      at += len;
    }
    return out;
  }

  async read(t: Tensor): Promise<Float32Array> {
    return decode(t.dtype, await this.readBytes(t), t.shape);
  }

  run<A>(def: KernelDef<A>, inputs: readonly Tensor[], attrs: A): Tensor[] {
    sameBackend(def.name, this, inputs);
    const inRefs = inputs.map((t) => this.ref(t));
    const outMeta: Meta[] = def.outputs(inRefs.map((r) => r.meta), attrs);
    const outChunks = outMeta.map((m) => this.alloc(m.shape, m.dtype));
    const outRefs = outMeta.map((meta, i) => ({ meta, chunks: outChunks[i] }));
    try {
      def.webgpu(this.ctx, inRefs, outRefs, attrs);
    } catch (e) {
      for (const cs of outChunks) for (const c of cs) this.ctx.releaseBuffer(c.buffer);
      throw e;
    }
    return outRefs.map((r) => this.wrap(r.chunks, r.meta.shape, r.meta.dtype));
  }

  reshape(t: Tensor, shape: readonly number[]): Tensor {
    checkReshape(t, shape);
    const s = t.storage;
    if (s.kind !== 'webgpu') throw new InvalidArgument(`${t} is not a WebGPU tensor`);
    if (s.chunks.length > 1 && shape[0] !== t.shape[0]) {
      throw new BindingLimitExceeded(
        `reshape: ${t} is split across ${s.chunks.length} bindings along dim 0, so dim 0 must stay ${t.shape[0]}`,
      );
    }
    s.refs.n++;
    // a chunk counts its rows along dim 0: a whole tensor's one chunk takes the new dim 0 (kernels that walk chunks,
    // such as embedding's gather, read it)
    const chunks = s.chunks.length === 1 ? [{ ...s.chunks[0], rows: shape[0] ?? 1 }] : s.chunks;
    return this.wrap(chunks, shape, t.dtype, s.refs);
  }

  view(t: Tensor, offset: number, shape: readonly number[]): Tensor {
    checkView(t, offset, shape);
    const s = t.storage;
    if (s.kind !== 'webgpu') throw new InvalidArgument(`${t} is not a WebGPU tensor`);
    if (s.chunks.length !== 1) throw new BindingLimitExceeded(`view: ${t} is split across ${s.chunks.length} bindings; views need one`);
    // bindings start at multiples of 256 bytes: VIEW_ALIGN f32 or i32 elements, twice as many f16 ones
    const bytes = t.dtype === 'f16' ? 2 : 4;
    const align = (VIEW_ALIGN * 4) / bytes;
    if (offset % align)
      throw new InvalidArgument(`view: offset ${offset} is not a multiple of ${align} elements (256-byte binding alignment)`);
    const n = shape.reduce((a, b) => a * b, 1);
    const c = s.chunks[0];
    s.refs.n++;
    const size = Math.max(4, Math.ceil((n * bytes) / 4) * 4);
    return this.wrap([{ buffer: c.buffer, offset: c.offset + offset * bytes, size, rows: shape[0] ?? 1 }], shape, t.dtype, s.refs);
  }

  release(s: Storage) {
    if (s.kind !== 'webgpu') return;
    if (--s.refs.n > 0) return;
    for (const c of s.chunks) this.ctx.releaseBuffer(c.buffer);
  }

  sync(): Promise<void> {
    return this.ctx.sync();
  }

  static async create(opts?: ContextOptions): Promise<WebGpuBackend> {
    return new WebGpuBackend(await GpuContext.create(opts));
  }
}
