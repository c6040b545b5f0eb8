/**
 * The CPU backend: the reference every GPU kernel is checked against, and the fallback where a
 * browser has no WebGPU. With precision 'f64' float tensors are held in Float64Array, which is what
 * finite-difference gradient checks need.
 */
import { InvalidArgument } from '../errors';
import { type DType, byteSize } from '../formats/dtype';
import { decode, encode } from '../formats/encode';
import type { CpuArray, KernelDef, Meta } from '../kernels/kernel';
import { WasmKernels } from '../kernels/matmul/wasm';
import { hardwareThreads } from '../kernels/matmul/wasm-threads';
import type { Backend } from './backend';
import { checkBytes, checkReshape, checkShape, checkValues, checkView, sameBackend } from './check';
import { type Storage, Tensor } from './tensor';

/** Which matmul kernels an f32 CPU backend runs: the WebAssembly SIMD ones, or the TypeScript reference. */
export type CpuKernels = 'wasm' | 'ts';

/**
 * The kernels a CPU backend runs when its caller names none: RMAS_CPU_KERNELS (Node), else 'wasm'. 'ts' reproduces
 * runs recorded on the TypeScript reference bit for bit (the tiny systems but the recursion one were built on it: the SIMD kernels
 * sum in another order, and AdamW's first steps, which move every weight by about lr whatever its gradient's size,
 * turn such rounding into other weights).
 */
export function defaultCpuKernels(): CpuKernels {
  const v = (globalThis as { process?: { env?: Record<string, string | undefined> } }).process?.env?.RMAS_CPU_KERNELS;
  if (v === undefined || v === '') return 'wasm';
  if (v !== 'wasm' && v !== 'ts') throw new InvalidArgument(`RMAS_CPU_KERNELS=${v}: expected wasm or ts`);
  return v;
}

/** Most threads a CPU backend starts by default: the GEMVs are bound by memory well before this many cores. */
const MAX_DEFAULT_THREADS = 16;

/**
 * The threads a CPU backend's kernels run on when its caller names none: RMAS_CPU_THREADS (Node), else the
 * hardware's (os.availableParallelism, navigator.hardwareConcurrency), at most 16. 1 runs every product on the
 * calling thread, as before threads; results are the same bits at any count (each output row is one thread's).
 */
export function defaultCpuThreads(): number {
  const v = (globalThis as { process?: { env?: Record<string, string | undefined> } }).process?.env?.RMAS_CPU_THREADS;
  if (v === undefined || v === '') return Math.min(MAX_DEFAULT_THREADS, hardwareThreads());
  const n = Number(v);
  if (!Number.isInteger(n) || n < 1 || n > 256) {
    throw new InvalidArgument(`RMAS_CPU_THREADS=${v}: expected a whole number of threads, 1 to 256`);
  }
  return n;
}

const loaded = new Map<number, WasmKernels | string>();
/** The WebAssembly kernels on `threads` threads, loaded once per realm and count, or why they cannot run here. */
function wasmKernels(threads: number): WasmKernels | string {
  let k = loaded.get(threads);
  if (k === undefined) loaded.set(threads, (k = WasmKernels.load({ threads })));
  return k;
}

export class CpuBackend implements Backend {
  readonly kind = 'cpu' as const;
  readonly name: string;
  /** The WebAssembly SIMD kernels this backend's matmuls run on; absent: the TypeScript reference. */
  readonly wasm?: WasmKernels;

  /**
   * `kernels` (f32 only; f64 is always the reference) defaults to defaultCpuKernels(); 'wasm' runs where WebAssembly
   * SIMD loads, and the name says which path runs and why the reference runs where 'wasm' was asked for. `threads`
   * (the WebAssembly kernels only) defaults to defaultCpuThreads(); the name gives the count where it is above 1, and
   * why one thread runs where more were asked for and cannot start here (a page that is not cross-origin isolated).
   */
  /**
   * The f32 backend on the TypeScript reference kernels: what the GPU backends' kernels are checked against. The
   * default kernels round x to 16 bits in products with quantized weights (kernels/matmul/wasm-wat.ts), which is
   * within their bound but outside an f32 comparison's.
   */
  static reference(): CpuBackend {
    return new CpuBackend('f32', { kernels: 'ts' });
  }

  constructor(readonly precision: 'f32' | 'f64' = 'f32', opts: { kernels?: CpuKernels; threads?: number } = {}) {
    let path = '';
    if (precision === 'f32' && (opts.kernels ?? defaultCpuKernels()) === 'wasm') {
      const threads = opts.threads ?? defaultCpuThreads();
      if (!Number.isInteger(threads) || threads < 1) {
        throw new InvalidArgument(`CpuBackend: threads ${threads}: expected a whole number ≥ 1`);
      }
      const k = wasmKernels(threads);
      if (typeof k === 'string') path = `, TypeScript kernels: ${k}`;
      else {
        this.wasm = k;
        path = k.fma ? ', wasm simd, fma' : ', wasm simd';
        if (k.threads > 1) path += `, ${k.threads} threads`;
        else if (k.threadsNote) path += `, 1 thread: ${k.threadsNote}`;
      }
    }
    this.name = `cpu (${precision}${path})`;
  }

  /** Heap arrays made by zeros, by how many live tensors are over them (the array itself, reshapes and views). */
  private readonly heapTensors = new WeakMap<Float32Array, number>();
  /** A view's heap array (the WeakMap's value keeps it from being collected while the view lives). */
  private readonly viewOf = new WeakMap<CpuArray, Float32Array>();

  private alloc(shape: readonly number[], dtype: DType): CpuArray {
    const n = shape.reduce((a, b) => a * b, 1);
    switch (dtype) {
      case 'f32':
        return this.precision === 'f64' ? new Float64Array(n) : new Float32Array(n);
      case 'i32':
        return new Int32Array(n);
      case 'f16':
      case 'bf16':
        return new Uint16Array(n);
      default:
        return new Uint8Array(byteSize(dtype, shape));
    }
  }

  private wrap(data: CpuArray, shape: readonly number[], dtype: DType): Tensor {
    const root = this.heapRoot(data);
    if (root) this.heapTensors.set(root, this.heapTensors.get(root)! + 1);
    return new Tensor(this, [...shape], dtype, { kind: 'cpu', data });
  }

  /** The heap array (zeros) that `data` is or is a view of, or null. */
  private heapRoot(data: CpuArray): Float32Array | null {
    const root = (this.viewOf.get(data) ?? data) as Float32Array;
    return this.heapTensors.has(root) ? root : null;
  }

  fromValues(values: ArrayLike<number>, shape: readonly number[], dtype: DType = 'f32'): Tensor {
    const n = checkValues(values, shape);
    if (dtype === 'f32' || dtype === 'i32') {
      const data = this.alloc(shape, dtype) as Float32Array | Float64Array | Int32Array;
      for (let i = 0; i < n; i++) data[i] = values[i];
      return this.wrap(data, shape, dtype);
    }
    return this.fromBytes(encode(dtype, values, shape), shape, dtype);
  }

  fromBytes(bytes: Uint8Array, shape: readonly number[], dtype: DType): Tensor {
    checkBytes(bytes, shape, dtype);
    // a half or quantized tensor is a frozen weight: where the kernels' heap is shared it is stored there, once
    const data = this.wasm?.weightArray(bytes.byteLength, dtype) ?? this.alloc(shape, dtype);
    if (dtype === 'f32' && this.precision === 'f64') {
      data.set(decode('f32', bytes, shape));
    } else {
      new Uint8Array(data.buffer, data.byteOffset, data.byteLength).set(bytes);
    }
    return this.wrap(data, shape, dtype);
  }

  zeros(shape: readonly number[], dtype: DType = 'f32'): Tensor {
    checkShape(shape);
    // a buffer the kernels read across calls (a KV cache, optimizer state): in their heap where it is shared, so
    // that they read it in place; given back when its last tensor is disposed (release) or it is collected
    const n = shape.reduce((a, b) => a * b, 1);
    const inHeap = dtype === 'f32' && this.precision === 'f32' ? this.wasm?.floatArray(n) : null;
    if (inHeap) this.heapTensors.set(inHeap, 0);
    return this.wrap(inHeap ?? this.alloc(shape, dtype), shape, dtype);
  }

  /** The storage array itself (no copy): tests and gradcheck read and write through it. */
  data(t: Tensor): CpuArray {
    const s = t.storage;
    if (s.kind !== 'cpu') throw new InvalidArgument(`${t} is not a CPU tensor`);
    return s.data;
  }

  async read(t: Tensor): Promise<Float32Array> {
    const d = this.data(t);
    if (d instanceof Float32Array) return d.slice();
    if (d instanceof Float64Array || d instanceof Int32Array) return Float32Array.from(d);
    return decode(t.dtype, new Uint8Array(d.buffer, d.byteOffset, d.byteLength), t.shape);
  }

  async readBytes(t: Tensor): Promise<Uint8Array> {
    return this.readBytesSync(t);
  }

  readBytesSync(t: Tensor): Uint8Array {
    const d = this.data(t);
    if (d instanceof Float64Array) return new Uint8Array(Float32Array.from(d).buffer);
    return new Uint8Array(d.buffer, d.byteOffset, d.byteLength).slice();
  }

  /** A tensor of another CPU backend of this precision, copied value for value (f64 stays f64). */
  copyFrom(t: Tensor): Tensor | null {
    if (!(t.backend instanceof CpuBackend) || t.backend.precision !== this.precision) return null;
    return this.wrap(t.backend.data(t).slice(), t.shape, t.dtype);
  }

  run<A>(def: KernelDef<A>, inputs: readonly Tensor[], attrs: A): Tensor[] {
    sameBackend(def.name, this, inputs);
    const inMeta: Meta[] = inputs.map((t) => ({ shape: t.shape, dtype: t.dtype }));
    const outMeta = def.outputs(inMeta, attrs);
    const outs = outMeta.map((m) => this.alloc(m.shape, m.dtype));
    def.cpu(inputs.map((t) => this.data(t)), outs, attrs, { inputs: inMeta, outputs: outMeta, wasm: this.wasm });
    return outs.map((d, i) => this.wrap(d, outMeta[i].shape, outMeta[i].dtype));
  }

  reshape(t: Tensor, shape: readonly number[]): Tensor {
    checkReshape(t, shape);
    return this.wrap(this.data(t), shape, t.dtype);
  }

  view(t: Tensor, offset: number, shape: readonly number[]): Tensor {
    checkView(t, offset, shape);
    const d = this.data(t) as Float32Array | Float64Array | Int32Array | Uint16Array;
    const sub = d.subarray(offset, offset + shape.reduce((a, b) => a * b, 1));
    // a view of a heap array holds its root: the root's bytes stay allocated while the view lives
    const root = this.heapRoot(d);
    if (root) this.viewOf.set(sub, root);
    return this.wrap(sub, shape, t.dtype);
  }

  release(s: Storage) {
    if (s.kind !== 'cpu') return;
    const root = this.heapRoot(s.data);
    if (!root) return;
    const left = this.heapTensors.get(root)! - 1;
    if (left > 0) this.heapTensors.set(root, left);
    else {
      this.heapTensors.delete(root);
      this.wasm!.free(root);
    }
  }

  async sync() {}
}
