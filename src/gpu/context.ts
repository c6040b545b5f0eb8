/**
 * GpuContext: one device and everything the kernels need to use it well.
 * - dispatches are batched into one command encoder and submitted together (flush);
 * - uniforms for a whole batch live in one arena buffer, written once just before submit;
 * - buffers come from the pool and recycle only after submit;
 * - one readback path (read) that flushes, copies to a mappable buffer and maps it;
 * - validation errors, compile errors and device loss surface as named errors at the next sync point;
 * - counters of the work issued (dispatches, submits, readbacks, and the bytes bound per dispatch, split into
 *   weights and activations) for the engine's figures that hold on any machine.
 */
import {
  BindingLimitExceeded, DeviceLost, GpuOutOfMemory, GpuValidationError, InvalidArgument, ShaderCompileError, UnsupportedFeature,
} from '../errors';
import { type AcquireOptions, type AdapterReport, type WantedFeature, acquireDevice, isSoftwareAdapter } from './device';
import { override } from '../util/override';
import { DEFAULT_MAX_BATCH, type GpuCounters } from './counters';

export { DEFAULT_MAX_BATCH, type GpuCounters } from './counters';
import { BufferPool } from './pool';
import { PipelineCache } from './pipelines';
import { type SubgroupProbe, probeSubgroups } from './subgroups';

/** Packs uniform fields: every field is one 4-byte scalar, in the order of the WGSL struct. */
export class Uniforms {
  private words: number[] = [];
  private kinds: ('u' | 'i' | 'f')[] = [];
  u32(v: number) { this.words.push(v); this.kinds.push('u'); return this; }
  i32(v: number) { this.words.push(v); this.kinds.push('i'); return this; }
  f32(v: number) { this.words.push(v); this.kinds.push('f'); return this; }
  get byteLength() { return Math.max(16, Math.ceil((this.words.length * 4) / 16) * 16); }
  writeTo(view: DataView, offset: number) {
    this.words.forEach((w, i) => {
      const k = this.kinds[i];
      if (k === 'f') view.setFloat32(offset + 4 * i, w, true);
      else if (k === 'i') view.setInt32(offset + 4 * i, w, true);
      else view.setUint32(offset + 4 * i, w >>> 0, true);
    });
  }
}

export interface Dispatch {
  /** Pipeline cache key: op, dtype, variant, workgroup size, e.g. `rmsnorm_f32_wg64`. */
  key: string;
  wgsl: () => string;
  /** Bound at @group(0) @binding(0) as `var<uniform>`; storage buffers follow from binding 1. */
  uniforms?: Uniforms;
  bindings: GPUBufferBinding[];
  workgroups: readonly [number, number?, number?];
  /**
   * For the counters: the most bytes the kernel reads of each binding when that is less than the binding (a gather
   * reads its rows of a bound table); absent entries count the whole binding.
   */
  reads?: readonly (number | undefined)[];
}

export interface ContextOptions extends AcquireOptions {
  /** Pretend the storage-binding limit is this small (tests exercise weight splitting with it). */
  bindingLimit?: number;
  /** Turn buffer reuse off (debug: use-after-release shows up as garbage instead of silent reuse). */
  noBufferReuse?: boolean;
  /** Pretend fewer workgroups per grid dimension (tests exercise grid folding with it). */
  maxWorkgroupsPerDimension?: number;
  /**
   * Submit automatically after this many dispatches in one batch (default DEFAULT_MAX_BATCH; RMAS_MAX_BATCH, the
   * environment in Node or globalThis.RMAS_MAX_BATCH in a page, overrides).
   */
  maxBatch?: number;
  /**
   * How the decode GEMVs are cut (kernels/fused/gemv-wgsl.ts, gemvGeometry). 'wide': 32 lanes per weight row, 8 rows
   * per 256-invocation workgroup, the norm statistics in every workgroup. 'narrow': a row's lanes sized to its words
   * and to the subgroup width, 16 rows per workgroup, the norm computed once per step by a prologue dispatch.
   * 'auto' (the default): narrow on software rasterisers (SwiftShader, lavapipe), wide elsewhere, until a GPU
   * measures the narrow cut. RMAS_GEMV=wide|narrow (environment in Node, globalThis.RMAS_GEMV in a page) overrides.
   */
  gemv?: GemvSizing;
}

export type GemvSizing = 'auto' | 'wide' | 'narrow';

/** The GEMV sizing asked for: the option, else RMAS_GEMV, else 'auto'. */
function askedGemv(opt: GemvSizing | undefined): GemvSizing {
  const v = opt ?? override('RMAS_GEMV') ?? 'auto';
  if (v === 'auto' || v === 'wide' || v === 'narrow') return v;
  throw new Error(`RMAS_GEMV=${v}: expected auto, wide or narrow`);
}

/** The batch size asked for: the option, else RMAS_MAX_BATCH, else DEFAULT_MAX_BATCH. */
function askedMaxBatch(opt: number | undefined): number {
  const v = opt ?? override('RMAS_MAX_BATCH') ?? DEFAULT_MAX_BATCH;
  const n = Number(v);
  if (!Number.isInteger(n) || n < 1) throw new InvalidArgument(`maxBatch / RMAS_MAX_BATCH=${v}: expected a positive integer`);
  return n;
}

const ARENA_BYTES = 64 * 1024;

/**
 * Bind groups kept for reuse. Making one cost 25 µs of JavaScript a dispatch in Node (Dawn through the `webgpu`
 * package; setting it and dispatching, 3 µs), which a real GPU's decode of ~170 dispatches a token would wait on. A
 * decode step repeats its dispatches over the same pool buffers and uniform offsets, so its bind groups repeat.
 */
const BIND_GROUP_CACHE = 4096;

export class GpuContext {
  readonly pool: BufferPool;
  readonly pipelines: PipelineCache;
  readonly bindingLimit: number;
  private encoder: GPUCommandEncoder | null = null;
  private pass: GPUComputePassEncoder | null = null;
  private arena: GPUBuffer | null = null;
  private arenaData = new ArrayBuffer(ARENA_BYTES);
  private arenaCursor = 0;
  private batched = 0;
  private lostError: DeviceLost | null = null;
  private firstError: Error | null = null;
  private lastKeys: string[] = [];
  private readonly maxBatch: number;
  private readonly uniformAlign: number;
  /** Dispatches encoded since creation (benchmarks and tests read it). */
  dispatchCount = 0;
  private submitCount = 0;
  private readbackCount = 0;
  private weightBound = 0;
  private activationBound = 0;
  private workgroupCount = 0;
  private invocationCount = 0;
  /** Buffers holding model weights (markWeight); a buffer leaves the set when it goes back to the pool. */
  private readonly weights = new WeakSet<GPUBuffer>();
  /** Bind groups by pipeline key and resources (buffer ids, offsets, sizes), least recently used first. */
  private readonly bindGroups = new Map<string, GPUBindGroup>();
  private readonly bufferIds = new WeakMap<GPUBuffer, number>();
  private nextBufferId = 0;
  private readonly layouts = new WeakMap<GPUComputePipeline, GPUBindGroupLayout>();
  /** Bind groups made since creation (a dispatch whose resources repeat an earlier one's makes none). */
  bindGroupsMade = 0;

  /**
   * Kernels may reduce through subgroups (kernels/reduce-wgsl.ts): the device has 'subgroups' and lays them out as
   * the reductions assume (gpu/subgroups.ts); otherwise they reduce in workgroup memory.
   */
  readonly subgroupReduce: boolean;
  /** The narrowest subgroup this device may give a pipeline where kernels reduce through subgroups; else 0. */
  readonly subgroupMin: number;
  /** The decode GEMVs take the narrow cut (ContextOptions.gemv). */
  readonly gemvNarrow: boolean;

  private constructor(readonly device: GPUDevice, readonly report: AdapterReport, opts: ContextOptions, subgroups: SubgroupProbe | null) {
    this.subgroupReduce = !!subgroups?.contiguous;
    this.subgroupMin = this.subgroupReduce ? report.subgroupMinSize : 0;
    const gemv = askedGemv(opts.gemv);
    this.gemvNarrow = gemv === 'narrow' || (gemv === 'auto' && isSoftwareAdapter(report));
    if (opts.maxWorkgroupsPerDimension) {
      report.limits.maxComputeWorkgroupsPerDimension = Math.min(
        report.limits.maxComputeWorkgroupsPerDimension,
        opts.maxWorkgroupsPerDimension,
      );
    }
    this.pool = new BufferPool(device, !opts.noBufferReuse);
    this.pipelines = new PipelineCache(device);
    this.bindingLimit = Math.min(report.limits.maxStorageBufferBindingSize, report.limits.maxBufferSize, opts.bindingLimit ?? Infinity);
    this.maxBatch = askedMaxBatch(opts.maxBatch);
    this.uniformAlign = Math.max(16, report.limits.minUniformBufferOffsetAlignment);
    device.lost.then((info) => {
      this.lostError = new DeviceLost(
        `the GPU device was lost (${info.reason}${info.message ? ': ' + info.message : ''}). ` +
          'Everything on it is gone: reload the page or create a new context, then reload models and checkpoints (stored data is intact).',
      );
    });
    const onError = (ev: Event) => {
      const err = (ev as GPUUncapturedErrorEvent).error;
      if (this.firstError) return;
      const where = this.lastKeys.length ? ` (recent kernels: ${this.lastKeys.join(', ')})` : '';
      this.firstError = err?.constructor?.name === "GPUOutOfMemoryError"
        ? new GpuOutOfMemory(`the GPU ran out of memory${where}; free tensors, use a quantized model, or shorten the sequence`)
        : new GpuValidationError(`${err.message}${where}`);
    };
    if (typeof device.addEventListener === 'function') device.addEventListener('uncapturederror', onError);
    else (device as { onuncapturederror: unknown }).onuncapturederror = onError;
  }

  static async create(opts: ContextOptions = {}): Promise<GpuContext> {
    const { device, report } = await acquireDevice(opts);
    return new GpuContext(device, report, opts, report.features.subgroups ? await probeSubgroups(device) : null);
  }

  get lost(): boolean {
    return this.lostError !== null;
  }

  hasFeature(f: WantedFeature): boolean {
    return this.report.features[f];
  }

  requireFeature(f: WantedFeature, what: string) {
    if (!this.hasFeature(f)) {
      throw new UnsupportedFeature(
        `${what} needs the '${f}' WebGPU feature, which this adapter lacks; use an f32 variant or another device`,
      );
    }
  }

  assertAlive() {
    if (this.lostError) throw this.lostError;
  }

  /** Throws BindingLimitExceeded when one binding would be larger than the device allows. */
  checkBinding(bytes: number, what: string) {
    if (bytes > this.bindingLimit) {
      throw new BindingLimitExceeded(
        `${what} needs a ${bytes}-byte binding but this device allows ${this.bindingLimit} bytes per storage binding; ` +
          'split the tensor across bindings (weights are split by rows on upload) or use a device with larger limits',
      );
    }
  }

  createBuffer(bytes: number, usage: GPUBufferUsageFlags, label?: string): GPUBuffer {
    this.assertAlive();
    if (bytes > this.report.limits.maxBufferSize) {
      throw new BindingLimitExceeded(
        `${label ?? 'a buffer'} of ${bytes} bytes exceeds this device's maxBufferSize (${this.report.limits.maxBufferSize})`,
      );
    }
    return this.pool.acquire(bytes, usage, label);
  }

  /** High-water mark of the pool's bytes (live, awaiting submit, idle) since creation or resetPeak(). */
  get peakBytes(): number {
    return this.pool.peakBytes;
  }

  /**
   * Submits pending work, destroys the pool's idle buffers and starts a new high-water mark from the
   * bytes still live, so that a benchmark's peak is its own and not what earlier work left cached.
   */
  resetPeak() {
    this.flush();
    this.pool.trim();
    this.pool.resetPeak();
  }

  releaseBuffer(buf: GPUBuffer) {
    this.weights.delete(buf);
    if (!this.lostError) this.pool.release(buf);
  }

  /** Counts the bindings of `buf` as weight bytes from now on (until it is released). */
  markWeight(buf: GPUBuffer) {
    this.weights.add(buf);
  }

  /** A snapshot of the counters (see GpuCounters). */
  counters(): GpuCounters {
    return {
      dispatches: this.dispatchCount, submits: this.submitCount, readbacks: this.readbackCount,
      weightBytes: this.weightBound, activationBytes: this.activationBound,
      workgroups: this.workgroupCount, invocations: this.invocationCount,
    };
  }

  /** Usage flags of tensor storage. */
  static readonly STORAGE = 0x80 | 0x08 | 0x04; // STORAGE | COPY_DST | COPY_SRC

  private ensurePass(): GPUComputePassEncoder {
    if (!this.encoder) this.encoder = this.device.createCommandEncoder();
    if (!this.pass) this.pass = this.encoder.beginComputePass();
    return this.pass;
  }

  private endPass() {
    this.pass?.end();
    this.pass = null;
  }

  dispatch(d: Dispatch) {
    this.assertAlive();
    this.lastKeys.push(d.key);
    if (this.lastKeys.length > 4) this.lastKeys.shift();
    const pipeline = this.pipelines.get(d.key, d.wgsl);
    const entries: GPUBindGroupEntry[] = [];
    if (d.uniforms) {
      const size = d.uniforms.byteLength;
      if (this.arenaCursor + size > ARENA_BYTES) this.flush();
      if (!this.arena) this.arena = this.pool.acquire(ARENA_BYTES, 0x40 | 0x08, 'uniform-arena'); // UNIFORM | COPY_DST
      d.uniforms.writeTo(new DataView(this.arenaData), this.arenaCursor);
      entries.push({ binding: 0, resource: { buffer: this.arena, offset: this.arenaCursor, size } });
      this.arenaCursor += Math.ceil(size / this.uniformAlign) * this.uniformAlign;
    }
    d.bindings.forEach((b, i) => {
      const bytes = b.size ?? b.buffer.size - (b.offset ?? 0);
      if (bytes > this.bindingLimit) this.checkBinding(bytes, d.key);
      const read = Math.min(bytes, d.reads?.[i] ?? bytes);
      if (this.weights.has(b.buffer)) this.weightBound += read;
      else this.activationBound += read;
      entries.push({ binding: i + 1, resource: b });
    });
    const bindGroup = this.bindGroup(d.key, pipeline, entries);
    const pass = this.ensurePass();
    pass.setPipeline(pipeline);
    pass.setBindGroup(0, bindGroup);
    const [x, y = 1, z = 1] = d.workgroups;
    if (x > 0 && y > 0 && z > 0) pass.dispatchWorkgroups(x, y, z);
    this.workgroupCount += x * y * z;
    this.invocationCount += x * y * z * this.pipelines.invocations(d.key);
    this.dispatchCount++;
    if (++this.batched >= this.maxBatch) this.flush();
  }

  /** The bind group of `entries` for pipeline `key`: a cached one where every resource is the same, else a new one. */
  private bindGroup(key: string, pipeline: GPUComputePipeline, entries: GPUBindGroupEntry[]): GPUBindGroup {
    for (const e of entries) {
      const r = e.resource as GPUBufferBinding;
      let id = this.bufferIds.get(r.buffer);
      if (id === undefined) this.bufferIds.set(r.buffer, (id = this.nextBufferId++));
      key += `|${e.binding}:${id}:${r.offset ?? 0}:${r.size ?? '*'}`;
    }
    let group = this.bindGroups.get(key);
    if (group) {
      this.bindGroups.delete(key);
    } else {
      let layout = this.layouts.get(pipeline);
      if (!layout) this.layouts.set(pipeline, (layout = pipeline.getBindGroupLayout(0)));
      group = this.device.createBindGroup({ layout, entries });
      this.bindGroupsMade++;
      if (this.bindGroups.size >= BIND_GROUP_CACHE) this.bindGroups.delete(this.bindGroups.keys().next().value!);
    }
    this.bindGroups.set(key, group);
    return group;
  }

  /** Buffer-to-buffer copy in the current batch. Offsets and size must be multiples of 4. */
  copy(src: GPUBuffer, srcOffset: number, dst: GPUBuffer, dstOffset: number, size: number) {
    this.assertAlive();
    this.endPass();
    if (!this.encoder) this.encoder = this.device.createCommandEncoder();
    this.encoder.copyBufferToBuffer(src, srcOffset, dst, dstOffset, size);
  }

  /** Zero-fills a range in the current batch. */
  clear(buf: GPUBuffer, offset = 0, size?: number) {
    this.assertAlive();
    this.endPass();
    if (!this.encoder) this.encoder = this.device.createCommandEncoder();
    this.encoder.clearBuffer(buf, offset, size);
  }

  /** Uploads bytes now (queue timeline): callers own `buf`, so no batched command can be reading it. */
  write(buf: GPUBuffer, offset: number, data: ArrayBufferView) {
    this.assertAlive();
    const bytes = new Uint8Array(data.buffer, data.byteOffset, data.byteLength);
    const padded = bytes.byteLength % 4 ? new Uint8Array(Math.ceil(bytes.byteLength / 4) * 4) : bytes;
    if (padded !== bytes) padded.set(bytes);
    this.device.queue.writeBuffer(buf, offset, padded as Uint8Array<ArrayBuffer>);
  }

  /** Submits everything encoded so far. */
  flush() {
    if (this.lostError) return;
    this.endPass();
    if (this.arena && this.arenaCursor > 0) this.device.queue.writeBuffer(this.arena, 0, this.arenaData, 0, this.arenaCursor);
    if (this.encoder) {
      this.device.queue.submit([this.encoder.finish()]);
      this.submitCount++;
    }
    this.encoder = null;
    if (this.arena) this.pool.release(this.arena);
    this.arena = null;
    this.arenaCursor = 0;
    this.batched = 0;
    this.pool.afterSubmit();
  }

  /** Waits for submitted work and raises the first compile/validation/OOM error or device loss. */
  async sync(): Promise<void> {
    this.flush();
    if (!this.lostError) await this.device.queue.onSubmittedWorkDone();
    await this.raisePending();
  }

  private async raisePending() {
    const checks = this.pipelines.pendingChecks.splice(0);
    const msgs = (await Promise.all(checks)).filter((m): m is string => m !== null);
    this.assertAlive();
    if (msgs.length) throw new ShaderCompileError(msgs.join('\n\n'));
    if (this.firstError) {
      const e = this.firstError;
      this.firstError = null;
      throw e;
    }
  }

  /** The single readback path: copies `size` bytes at `offset` of `buf` to the host. */
  async read(buf: GPUBuffer, offset: number, size: number): Promise<ArrayBuffer> {
    this.assertAlive();
    this.readbackCount++;
    const aligned = Math.ceil(size / 4) * 4;
    const staging = this.device.createBuffer({ size: Math.max(aligned, 4), usage: 0x01 | 0x08 }); // MAP_READ | COPY_DST
    try {
      this.copy(buf, offset, staging, 0, aligned);
      this.flush();
      try {
        await staging.mapAsync(0x0001); // GPUMapMode.READ
      } catch (e) {
        this.assertAlive();
        await this.raisePending();
        throw new GpuValidationError(`readback failed: ${(e as Error).message}`);
      }
      const out = staging.getMappedRange(0, aligned).slice(0, size);
      staging.unmap();
      await this.raisePending();
      return out;
    } finally {
      staging.destroy();
    }
  }

  /** Largest number of workgroups along one dimension; big 1-D grids fold into y. */
  grid(workgroups: number): [number, number] {
    const max = this.report.limits.maxComputeWorkgroupsPerDimension;
    if (workgroups <= max) return [Math.max(workgroups, 1), 1];
    const y = Math.ceil(workgroups / max);
    return [Math.ceil(workgroups / y), y];
  }

  destroy() {
    this.flush();
    this.pool.trim();
    this.device.destroy();
  }
}
