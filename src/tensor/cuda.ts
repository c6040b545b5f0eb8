/**
 * The CUDA backend (Node): tensors in device memory from the addon's stream-ordered pool, kernels run through
 * their `cuda` hooks, which launch native kernels registered by name (native/cuda/src/registry.h). Everything is
 * queued on the device's stream, so frees and reuse are ordered after the work that reads the memory; read() waits.
 * One backend per device: a process may open several (a system placed one role per GPU); each selects its
 * device before it calls the addon, and copyFrom moves a tensor from another device's backend directly.
 * Not exported from tensor/index.ts: it loads a .node file, which browsers cannot.
 */
import { CudaUnavailable, GpuOutOfMemory, InvalidArgument, UnsupportedFeature } from '../errors';
import { type DType, byteSize } from '../formats/dtype';
import { decode, encode } from '../formats/encode';
import { type CudaAddon, addonPath, cudaUnavailableReason, isCudaError, loadCudaAddon } from '../gpu/cuda-addon';
import type { CudaLauncher, CudaRef, HalfGemm, KernelDef, Meta } from '../kernels/kernel';
import type { Backend } from './backend';
import { VIEW_ALIGN } from './backend';
import { checkBytes, checkReshape, checkShape, checkValues, checkView, sameBackend } from './check';
import { type Storage, Tensor } from './tensor';

export interface CudaOptions {
  /** CUDA device index (default 0). */
  device?: number;
  /** How products with f16/bf16 weights carry the f32 operand (default: RMAS_CUDA_HALF_GEMM, else 'round'). */
  halfGemm?: HalfGemm;
}

/** The HalfGemm of RMAS_CUDA_HALF_GEMM ('round' when unset). */
export function halfGemmFromEnv(): HalfGemm {
  const v = process.env.RMAS_CUDA_HALF_GEMM;
  if (v === undefined || v === '') return 'round';
  if (v === 'round' || v === 'split') return v;
  throw new InvalidArgument(`RMAS_CUDA_HALF_GEMM must be 'round' or 'split', got ${JSON.stringify(v)}`);
}

/** cudaErrorMemoryAllocation */
const CUDA_OOM = 2;

/** The device the addon calls go to now (the addon's current device; -1 before the first init). */
let selected = -1;
/** The backend of each open device: create() returns the same one for a device. */
const opened = new Map<number, CudaBackend>();

export class CudaBackend implements Backend {
  readonly kind = 'cuda' as const;
  readonly name: string;
  readonly capability: { major: number; minor: number };
  /** How products with f16/bf16 weights carry the f32 operand (HalfGemm); may be changed between runs. */
  halfGemm: HalfGemm = halfGemmFromEnv();

  private constructor(
    readonly addon: CudaAddon,
    readonly device: number,
    deviceName: string,
    capability: { major: number; minor: number },
  ) {
    this.capability = capability;
    this.name = `cuda (${deviceName}, sm_${capability.major}${capability.minor})`;
  }

  /** Opens device `device`; throws CudaUnavailable (addon not built, no driver, no such device) with what to do. */
  static async create(opts: CudaOptions = {}): Promise<CudaBackend> {
    const device = opts.device ?? 0;
    const open = opened.get(device);
    if (open) {
      if (opts.halfGemm) open.halfGemm = opts.halfGemm;
      return open;
    }
    const addon = loadCudaAddon();
    if (typeof addon.use !== 'function') {
      throw new CudaUnavailable(
        `the CUDA addon at ${addonPath()} predates multi-device support (no use()); rebuild it with \`npm run build:cuda -- --force\``,
      );
    }
    const reason = cudaUnavailableReason(addon.probe(), device);
    if (reason) throw new CudaUnavailable(reason);
    let info;
    try {
      info = addon.init(device);
    } catch (e) {
      throw new CudaUnavailable(`CUDA device ${device} could not be opened: ${(e as Error).message}`);
    }
    selected = device;
    const be = new CudaBackend(addon, device, info.name, { major: info.major, minor: info.minor });
    if (opts.halfGemm) be.halfGemm = opts.halfGemm;
    opened.set(device, be);
    return be;
  }

  get halfGemmRounds(): boolean {
    return this.halfGemm === 'round';
  }

  /** Points the addon's calls at this backend's device (a no-op while it already is). */
  private bind(): void {
    if (selected === this.device) return;
    this.addon.use(this.device);
    selected = this.device;
  }

  private malloc(bytes: number, what: string): bigint {
    try {
      return this.addon.malloc(Math.max(bytes, 4));
    } catch (e) {
      if (isCudaError(e) && e.code === CUDA_OOM) {
        const m = this.addon.memInfo();
        throw new GpuOutOfMemory(`${what}: ${bytes} bytes do not fit on ${this.name} (${m.free} of ${m.total} bytes free); ` +
          'use a shorter sequence or smaller batch, or a larger GPU');
      }
      throw e;
    }
  }

  private wrap(ptr: bigint, shape: readonly number[], dtype: DType, refs = { n: 1, base: ptr }): Tensor {
    return new Tensor(this, [...shape], dtype, { kind: 'cuda', ptr, refs });
  }

  private ref(t: Tensor): CudaRef {
    const s = t.storage;
    if (s.kind !== 'cuda') throw new InvalidArgument(`${t} is not a CUDA tensor`);
    return { meta: { shape: t.shape, dtype: t.dtype }, ptr: s.ptr };
  }

  fromValues(values: ArrayLike<number>, shape: readonly number[], dtype: DType = 'f32'): Tensor {
    checkValues(values, shape);
    return this.fromBytes(encode(dtype, values, shape), shape, dtype);
  }

  fromBytes(bytes: Uint8Array, shape: readonly number[], dtype: DType): Tensor {
    const want = checkBytes(bytes, shape, dtype);
    this.bind();
    const ptr = this.malloc(want, `fromBytes ${dtype} [${shape}]`);
    if (want) this.addon.upload(ptr, bytes);
    return this.wrap(ptr, shape, dtype);
  }

  zeros(shape: readonly number[], dtype: DType = 'f32'): Tensor {
    checkShape(shape);
    const bytes = byteSize(dtype, shape);
    this.bind();
    const ptr = this.malloc(bytes, `zeros ${dtype} [${shape}]`);
    this.addon.memset(ptr, Math.max(bytes, 4));
    return this.wrap(ptr, shape, dtype);
  }

  async readBytes(t: Tensor): Promise<Uint8Array> {
    return this.readBytesSync(t);
  }

  /** The bytes of t (download waits for the device's stream). */
  readBytesSync(t: Tensor): Uint8Array {
    const { ptr } = this.ref(t);
    this.bind();
    return this.addon.download(ptr, byteSize(t.dtype, t.shape));
  }

  /** A tensor of another device's backend, copied device to device (copyPeer orders both streams around it). */
  copyFrom(t: Tensor): Tensor | null {
    const src = t.backend;
    if (!(src instanceof CudaBackend) || src.addon !== this.addon || src === this) return null;
    const { ptr } = src.ref(t);
    const bytes = byteSize(t.dtype, t.shape);
    this.bind();
    const dst = this.malloc(bytes, `copy of ${t} from device ${src.device}`);
    this.addon.copyPeer(dst, this.device, ptr, src.device, bytes);
    return this.wrap(dst, t.shape, t.dtype);
  }

  async read(t: Tensor): Promise<Float32Array> {
    return decode(t.dtype, await this.readBytes(t), t.shape);
  }

  run<A>(def: KernelDef<A>, inputs: readonly Tensor[], attrs: A): Tensor[] {
    sameBackend(def.name, this, inputs);
    if (!def.cuda) {
      throw new UnsupportedFeature(
        `${def.name}: this op has no CUDA kernel yet (its kernel folder lacks a cuda hook); run with --backend webgpu or cpu`,
      );
    }
    this.bind();
    const inRefs = inputs.map((t) => this.ref(t));
    const outMeta: Meta[] = def.outputs(inRefs.map((r) => r.meta), attrs);
    const outRefs: CudaRef[] = [];
    const temps: bigint[] = [];
    const launcher: CudaLauncher = {
      launch: (kernel, ptrs, ints = [], floats = []) => this.addon.launch(kernel, ptrs, ints, floats),
      temp: (bytes) => {
        const p = this.malloc(bytes, `${def.name} scratch`);
        temps.push(p);
        return p;
      },
      capability: this.capability,
      halfGemm: this.halfGemm,
    };
    try {
      for (const meta of outMeta)
        outRefs.push({ meta, ptr: this.malloc(byteSize(meta.dtype, meta.shape), `${def.name} output [${meta.shape}]`) });
      def.cuda(launcher, inRefs, outRefs, attrs);
    } catch (e) {
      for (const r of outRefs) this.addon.free(r.ptr);
      throw e;
    } finally {
      // stream-ordered: the memory returns to the pool after the hook's kernels have run
      for (const p of temps) this.addon.free(p);
    }
    return outRefs.map((r) => this.wrap(r.ptr, r.meta.shape, r.meta.dtype));
  }

  reshape(t: Tensor, shape: readonly number[]): Tensor {
    checkReshape(t, shape);
    const s = t.storage;
    if (s.kind !== 'cuda') throw new InvalidArgument(`${t} is not a CUDA tensor`);
    s.refs.n++;
    return this.wrap(s.ptr, shape, t.dtype, s.refs);
  }

  view(t: Tensor, offset: number, shape: readonly number[]): Tensor {
    checkView(t, offset, shape);
    const s = t.storage;
    if (s.kind !== 'cuda') throw new InvalidArgument(`${t} is not a CUDA tensor`);
    // the same alignment as WebGPU, so that code written for either backend runs on both (and vector loads stay aligned)
    if (offset % VIEW_ALIGN)
      throw new InvalidArgument(`view: offset ${offset} is not a multiple of ${VIEW_ALIGN} elements (256-byte alignment)`);
    s.refs.n++;
    return this.wrap(s.ptr + BigInt(offset * 4), shape, t.dtype, s.refs);
  }

  release(s: Storage) {
    if (s.kind !== 'cuda') return;
    if (--s.refs.n > 0) return;
    this.bind(); // the free is queued on the stream of the device that owns the memory
    this.addon.free(s.refs.base);
  }

  async sync(): Promise<void> {
    this.bind();
    this.addon.sync();
  }

  /** Device memory: free/total from the driver, and what the allocation pool holds (and has held at most). */
  memInfo() {
    this.bind();
    return this.addon.memInfo();
  }

  /** Restarts memInfo().poolUsedHigh from what is in use now, to measure the peak of what follows. */
  resetMemoryPeak() {
    this.bind();
    this.addon.resetPeak();
  }
}
