/**
 * The CPU backend's fast matmul, attention and gated delta rule: the WebAssembly SIMD kernels of wasm-wat.ts over a
 * heap in their own memory, loaded the same way in Node and the page (bytes inlined in wasm-bytes.ts, compiled
 * synchronously, which a worker or Node allows at any size). The plain TypeScript of cpu.ts stays the reference:
 * `matmul` returns false for what the kernels do not take (f64 tensors, f16 weights, B not stored [N, K]), and the
 * caller runs the reference then.
 *
 * Weights are read in their storage dtype, never widened. Over a shared memory (Node; a cross-origin isolated page)
 * the CPU backend stores half and quantized weights in the heap itself (`weightArray`: typed arrays over the shared
 * buffer, which a grow does not detach), so they are held once; elsewhere such a B is copied into the heap on its
 * first product and stays there while its array lives (half and quantized tensors are frozen weights on the CPU
 * backend: made by fromValues/fromBytes and never written in place). An f32 B may be a parameter that changes
 * between calls, so it is copied in for each call, like the activations.
 *
 * With threads (wasm-threads.ts, shared memory only) each kernel call's output rows are split among workers that run
 * the same module over the same memory; a row is computed by one thread with the same code, so the results are the
 * single-threaded path's bits.
 */
import { f16BitsToF32, rowBytes } from '../../formats/dtype';
import type { CpuArray, FloatArray } from '../kernel';
import type { Activation } from '../activation/cpu';
import type { AttnDims } from '../attention/cpu';
import type { DeltaDims } from '../deltarule/cpu';
import type { MatmulPlan } from './plan';
import {
  CPU_KERNELS_SHARED_WASM_BASE64, CPU_KERNELS_WASM_BASE64, FMA_PROBE_WASM_BASE64, PACKED_KERNELS_FMA_WASM_BASE64,
  PACKED_KERNELS_SHARED_FMA_WASM_BASE64, PACKED_KERNELS_SHARED_WASM_BASE64, PACKED_KERNELS_WASM_BASE64,
} from './wasm-bytes';
import { ThreadPool, nodeModule, sharedMemoryUnavailable } from './wasm-threads';
import { isQuant } from '../../formats/dtype';
import {
  ATTN_DIMS_BYTES, F16_TABLE, GLU_MODES, HEAP_BASE, PACKED_DTYPES, RMSNORM_DIMS_BYTES, WASM_DTYPES, type WasmDType, X_ORDER,
  attnRowsBytes, packBytes, packedK, quantRowBytes, xRowBytes,
} from './wasm-wat';

type DeltaRule = (q: number, k: number, v: number, a: number, b: number, S: number, o: number, u: number, T: number, nk: number,
  nv: number, dk: number, dv: number, m: number) => void;
type Gemm = (w: number, ld: number, K: number, x: number, M: number, y: number, ldy: number, n0: number, n1: number, bias: number,
  pk: number) => void;

const PAGE = 65536;
/** Below this many multiply-adds a call runs on the caller alone: waking the workers costs about as much. */
const PARALLEL_MIN_MACS = 1 << 17;
const ALIGN = 64;
/** x rows staged per kernel call: a block that stays in L2 while every weight row passes over it. */
const X_BLOCK_BYTES = 1 << 20;

/**
 * Products of at least this many x rows (per staged block) take the packed kernel (`gemm_<dt>_packed`).
 * Measured on bf16 rows (3072×1024, one thread): 0.66× the unpacked kernel's speed at 2 rows, 0.9× at 4 (the
 * widening is paid per 4 weight rows whatever M), 1.14× at 8, 1.3× at 128.
 */
const PACKED_MIN_ROWS = 8;

/** The exports the threads may run, by index: a GEMM per weight dtype, the packed ones, attention's rows, glu and rmsnorm. */
const KERNELS: readonly string[] = [
  ...WASM_DTYPES.map((d) => `gemm_${d}`), ...PACKED_DTYPES.map((d) => `gemm_${d}_packed`), 'attn_rows', 'glu', 'rmsnorm',
];

/** x row `src` (value stride `ask`) staged for the float kernels: each whole group of eight in X_ORDER. */
function stageFloats(a: Float32Array, src: number, ask: number, K: number, xs: Float32Array) {
  const whole = K - (K % 8);
  for (let g = 0; g < whole; g += 8) for (let j = 0; j < 8; j++) xs[g + j] = a[src + (g + X_ORDER[j]) * ask];
  for (let k = whole; k < K; k++) xs[k] = a[src + k * ask];
}

/**
 * x row `src` (value stride `ask`) staged as row m of `rows` for the packed kernels (wasm-wat.ts packedGemmFunc): in
 * a pair of rows, by groups of four after the other row's; an odd block's last row alone; zeros up to packedK(K).
 */
function stagePacked(a: Float32Array, src: number, ask: number, K: number, m: number, rows: number, xs: Float32Array) {
  const lone = m === rows - 1 && rows % 2 === 1;
  const step = lone ? 4 : 8;
  let at = 2 * packedK(K) * (m >> 1) + (lone ? 0 : 4 * (m & 1));
  // the whole groups without a bound test per value (a contiguous row: 4.5 -> 1.5 ns a value), then the padded tail
  const whole = K & ~3;
  if (ask === 1) {
    for (let k = 0, s = src; k < whole; k += 4, s += 4, at += step) {
      xs[at] = a[s];
      xs[at + 1] = a[s + 1];
      xs[at + 2] = a[s + 2];
      xs[at + 3] = a[s + 3];
    }
  } else {
    for (let k = 0; k < whole; k += 4, at += step) for (let j = 0; j < 4; j++) xs[at + j] = a[src + (k + j) * ask];
  }
  if (whole < K) for (let j = 0; j < 4; j++) xs[at + j] = whole + j < K ? a[src + (whole + j) * ask] : 0;
}

/** First-fit allocator over the module's memory, growing it as needed; addresses are ALIGN-aligned. */
class Heap {
  private top = HEAP_BASE;
  /** Free blocks [addr, size], sorted by address, never adjacent. */
  private free: [number, number][] = [];

  /** Every buffer object the memory has handed out (a shared memory's grows give a new one; the old stay valid). */
  private readonly buffers = new WeakSet<ArrayBufferLike>();

  constructor(readonly memory: WebAssembly.Memory) {}

  /** The memory's buffer now. */
  buffer(): ArrayBufferLike {
    const b = this.memory.buffer;
    this.buffers.add(b);
    return b;
  }

  /** Whether `a` is a view of this heap (its byteOffset is then its address). */
  owns(a: ArrayBufferView): boolean {
    return this.buffers.has(a.buffer);
  }

  /** An address of `size` bytes, or -1 when the memory cannot grow that far (4 GiB in all). */
  alloc(size: number): number {
    size = Math.max(ALIGN, Math.ceil(size / ALIGN) * ALIGN);
    const i = this.free.findIndex(([, s]) => s >= size);
    if (i >= 0) {
      const [addr, s] = this.free[i];
      if (s === size) this.free.splice(i, 1);
      else this.free[i] = [addr + size, s - size];
      return addr;
    }
    const need = this.top + size - this.memory.buffer.byteLength;
    if (need > 0) {
      try {
        this.memory.grow(Math.ceil(need / PAGE));
      } catch {
        return -1;
      }
    }
    this.top += size;
    return this.top - size;
  }

  release(addr: number, size: number) {
    size = Math.max(ALIGN, Math.ceil(size / ALIGN) * ALIGN);
    let i = this.free.findIndex(([a]) => a > addr);
    if (i < 0) i = this.free.length;
    this.free.splice(i, 0, [addr, size]);
    // merge with the next block, then the previous one
    if (i + 1 < this.free.length && addr + size === this.free[i + 1][0]) {
      this.free[i][1] += this.free[i + 1][1];
      this.free.splice(i + 1, 1);
    }
    if (i > 0 && this.free[i - 1][0] + this.free[i - 1][1] === addr) {
      this.free[i - 1][1] += this.free[i][1];
      this.free.splice(i, 1);
      i--;
    }
    // a free block at the top gives its bytes back to the bump pointer
    const last = this.free[this.free.length - 1];
    if (last && last[0] + last[1] === this.top) {
      this.top = last[0];
      this.free.pop();
    }
  }

  bytes(addr: number, n: number) {
    return new Uint8Array(this.buffer(), addr, n);
  }

  f32(addr: number, n: number) {
    return new Float32Array(this.buffer(), addr, n);
  }
}

function base64Bytes(s: string): Uint8Array<ArrayBuffer> {
  const bin = atob(s);
  const out = new Uint8Array(bin.length);
  for (let i = 0; i < bin.length; i++) out[i] = bin.charCodeAt(i);
  return out;
}

/** The kernels' module bytes, over a memory of their own or a shared one (tests compare them with a fresh build). */
export const cpuKernelsBytes = (shared = false): Uint8Array<ArrayBuffer> =>
  base64Bytes(shared ? CPU_KERNELS_SHARED_WASM_BASE64 : CPU_KERNELS_WASM_BASE64);

/** The packed kernels' module bytes, likewise; `fma`: their multiply-adds fused. */
export const packedKernelsBytes = (shared = false, fma = false): Uint8Array<ArrayBuffer> =>
  base64Bytes(shared
    ? (fma ? PACKED_KERNELS_SHARED_FMA_WASM_BASE64 : PACKED_KERNELS_SHARED_WASM_BASE64)
    : (fma ? PACKED_KERNELS_FMA_WASM_BASE64 : PACKED_KERNELS_WASM_BASE64));

let fusedHere: boolean | undefined;

/**
 * Whether this engine runs relaxed SIMD and fuses `f32x4.relaxed_madd` (the probe of FMA_PROBE_WAT), asked once per
 * realm. Chrome has had relaxed SIMD since 114 and Node since 22; Node 20's V8 has it behind
 * --experimental-wasm-relaxed-simd, which Node then sets (v8.setFlagsFromString: it only adds instructions that
 * modules may use) before asking again. An engine that runs relaxed_madd as a multiply then an add (hardware without
 * FMA) gains nothing from it, so the answer is no there too.
 */
export function fusedMultiplyAdd(): boolean {
  if (fusedHere !== undefined) return fusedHere;
  const probe = base64Bytes(FMA_PROBE_WASM_BASE64);
  if (!WebAssembly.validate(probe)) {
    nodeModule<{ setFlagsFromString(f: string): void }>('node:v8')?.setFlagsFromString('--experimental-wasm-relaxed-simd');
  }
  try {
    const f = new WebAssembly.Instance(new WebAssembly.Module(probe)).exports.fma_probe as (a: number, b: number, c: number) => number;
    const a = 1 + 2 ** -13;
    fusedHere = f(a, a, -(1 + 2 ** -12)) === 2 ** -26;
  } catch {
    fusedHere = false;
  }
  return fusedHere;
}

/** How the kernels run: their thread count, and whether their heap is shared (weights then live in it). */
export interface WasmOptions {
  /** Threads for each call, the caller included (default 1); more than 1 needs a shared memory and workers. */
  threads?: number;
  /**
   * Fuse the packed kernels' multiply-adds where the engine and hardware can (fusedMultiplyAdd; default true): one
   * rounding per multiply-add instead of two, so prompts' products differ from the unfused build's in their last bits.
   */
  fma?: boolean;
  /** Products with fewer multiply-adds run on the caller alone (default PARALLEL_MIN_MACS; tests pass 0). */
  minParallelMacs?: number;
}

interface Resident {
  addr: number;
  size: number;
}

/** The WebAssembly SIMD kernels: y = x·Wᵀ (+ bias), and attention's two products per query row. */
export class WasmKernels {
  private readonly heap: Heap;
  /** The GEMM exports by name (KERNELS). */
  private readonly gemm: Record<string, Gemm>;
  private readonly readBytes: (addr: number, n: number) => number;
  private readonly stageInts: (x: number, K: number, q: number) => void;
  private readonly attnRows: Gemm;
  private readonly gluFn: Gemm;
  private readonly rmsnormFn: Gemm;
  private readonly deltaRuleFn: DeltaRule;
  private readonly resident = new WeakMap<object, Resident>();
  private readonly reclaim = new FinalizationRegistry<Resident>((r) => this.heap.release(r.addr, r.size));
  /** The workers, where more than one thread runs. */
  readonly pool: ThreadPool | null;
  /** Why fewer threads run than were asked for ('' when as many run). */
  readonly threadsNote: string;
  /** Whether the packed kernels' multiply-adds are fused (the FMA build: WasmOptions.fma). */
  readonly fma: boolean;

  private readonly minParallelMacs: number;

  private constructor(instances: WebAssembly.Instance[], memory: WebAssembly.Memory, pool: ThreadPool | null, note: string,
    opts: WasmOptions, fma: boolean) {
    this.pool = pool;
    this.fma = fma;
    this.minParallelMacs = opts.minParallelMacs ?? PARALLEL_MIN_MACS;
    this.threadsNote = note;
    this.heap = new Heap(memory);
    const table = new Float32Array(memory.buffer, F16_TABLE, 65536);
    for (let h = 0; h < 65536; h++) table[h] = f16BitsToF32(h);
    const ex = Object.assign({}, ...instances.map((i) => i.exports)) as Record<string, unknown>;
    this.readBytes = ex.read_bytes as (addr: number, n: number) => number;
    this.stageInts = ex.stage_ints as (x: number, K: number, q: number) => void;
    this.attnRows = ex.attn_rows as Gemm;
    this.gluFn = ex.glu as Gemm;
    this.rmsnormFn = ex.rmsnorm as Gemm;
    this.deltaRuleFn = ex.delta_rule as DeltaRule;
    this.gemm = Object.fromEntries(KERNELS.map((n) => [n, ex[n] as Gemm]));
  }

  /**
   * The kernels, or why they cannot run here (no WebAssembly SIMD, or compiling failed). Their memory is shared
   * wherever SharedArrayBuffer is (Node; a cross-origin isolated page), also for one thread, so that weights can live
   * in the heap; where it is not, or worker threads cannot start, they run on one thread and `threadsNote` says why.
   */
  static load(opts: WasmOptions = {}): WasmKernels | string {
    if (typeof WebAssembly !== 'object') return 'no WebAssembly';
    const threads = Math.max(1, Math.floor(opts.threads ?? 1));
    const initial = Math.ceil(HEAP_BASE / PAGE) + 1;
    const fma = opts.fma !== false && fusedMultiplyAdd();
    let note = sharedMemoryUnavailable();
    if (!note) {
      try {
        const memory = new WebAssembly.Memory({ initial, maximum: 65536, shared: true });
        const modules = [cpuKernelsBytes(true), packedKernelsBytes(true, fma)].map((b) => new WebAssembly.Module(b));
        const instances = modules.map((m) => new WebAssembly.Instance(m, { env: { memory } }));
        let pool: ThreadPool | null = null;
        if (threads > 1) {
          const p = ThreadPool.start(threads, { modules, memory, exports: [...KERNELS] });
          if (typeof p === 'string') note = p;
          else pool = p;
        }
        return new WasmKernels(instances, memory, pool, threads > 1 ? note : '', opts, fma);
      } catch (e) {
        note = `no shared WebAssembly memory (${e instanceof Error ? e.message : String(e)})`;
      }
    }
    const bytes = [cpuKernelsBytes(), packedKernelsBytes(false, fma)];
    if (!bytes.every((b) => WebAssembly.validate(b))) return 'no WebAssembly SIMD';
    try {
      const memory = new WebAssembly.Memory({ initial, maximum: 65536 });
      const instances = bytes.map((b) => new WebAssembly.Instance(new WebAssembly.Module(b), { env: { memory } }));
      return new WasmKernels(instances, memory, null, threads > 1 ? note : '', opts, fma);
    } catch (e) {
      return `WebAssembly kernels failed to load (${e instanceof Error ? e.message : String(e)})`;
    }
  }

  /** Threads each call runs on (the caller included). */
  get threads(): number {
    return this.pool?.threads ?? 1;
  }

  /** Whether the heap is a shared memory (weights can then live in it: `weightArray`). */
  get shared(): boolean {
    return typeof SharedArrayBuffer === 'function' && this.heap.memory.buffer instanceof SharedArrayBuffer;
  }

  /**
   * An array of `bytes` bytes in the heap for a frozen half or quantized weight (Uint16Array for bf16, else
   * Uint8Array), which the kernels then read in place: the weight is held once. Its bytes are not cleared (a block
   * given back earlier holds its last owner's): the caller writes every one. Null where the heap is not
   * shared (a grow would detach the array) or cannot hold it. Its bytes return to the heap when the array is
   * collected: the CPU backend makes no views of these dtypes (checkView), and reshapes share the array itself.
   */
  weightArray(bytes: number, dtype: string): Uint16Array | Uint8Array | null {
    if (!this.shared || !WasmKernels.takes(dtype) || dtype === 'f32' || bytes === 0) return null;
    return this.heapArray(bytes, (buf, addr) =>
      (dtype === 'bf16' ? new Uint16Array(buf, addr, bytes / 2) : new Uint8Array(buf, addr, bytes)));
  }

  /**
   * A zeroed Float32Array of `n` values in the heap, which the kernels then read and write in place (a KV cache:
   * attention reads its rows where they are, instead of a copy of every row at every step). Null where the heap is not
   * shared or cannot hold it. Its bytes return to the heap at `free`, or when the array is collected.
   */
  floatArray(n: number): Float32Array | null {
    if (!this.shared || n === 0) return null;
    return this.heapArray(4 * n, (buf, addr) => new Float32Array(buf, addr, n))?.fill(0) ?? null;
  }

  /** A view made by `view` over `bytes` of the heap, which returns to the heap when the view is collected (or at free). */
  private heapArray<T extends ArrayBufferView>(bytes: number, view: (buf: ArrayBufferLike, addr: number) => T): T | null {
    const addr = this.heap.alloc(bytes);
    if (addr < 0) return null;
    const a = view(this.heap.buffer(), addr);
    this.reclaim.register(a, { addr, size: bytes }, a);
    return a;
  }

  /** Gives floatArray's `a` back to the heap now; nothing may read or write it after. */
  free(a: Float32Array) {
    if (this.reclaim.unregister(a)) this.heap.release(a.byteOffset, a.byteLength);
  }

  /** Whether `a` lives in this heap. */
  holds(a: ArrayBufferView): boolean {
    return this.heap.owns(a);
  }

  /**
   * Read bandwidth of one thread in bytes/s: the best of `reps` passes over a heap block of `bytes` (benchmarks
   * compare the kernels with it); 0 when the heap cannot hold the block.
   */
  readBandwidth(bytes = 256 << 20, reps = 5): number {
    bytes -= bytes % 64;
    const addr = this.heap.alloc(bytes);
    if (addr < 0) return 0;
    try {
      this.heap.bytes(addr, bytes).fill(1);
      let best = Infinity;
      for (let r = 0; r < reps; r++) {
        const t0 = performance.now();
        this.readBytes(addr, bytes);
        best = Math.min(best, performance.now() - t0);
      }
      return bytes / (best / 1000);
    } finally {
      this.heap.release(addr, bytes);
    }
  }

  /** Whether `matmul` takes a weight of this dtype. */
  static takes(dtype: string): dtype is WasmDType {
    return (WASM_DTYPES as readonly string[]).includes(dtype);
  }

  /**
   * C = A·Bᵀ (+ bias) over the plan, B stored [N, K] in `dtype`; false when the kernels do not take this product
   * (the caller runs the reference) or the heap cannot hold it.
   */
  matmul(p: MatmulPlan, a: FloatArray, b: CpuArray, dtype: string, bias: FloatArray | null, out: FloatArray): boolean {
    const { batch, M, N, K } = p;
    // B stored [K, N] (a backward product: dX = dY·W, dW = dYᵀ·X) is staged transposed, per batch, where the f32
    // product is at least a few rows of A: the copy costs what one row of the product does
    const staged = !p.b.transB;
    if (!WasmKernels.takes(dtype)) return false;
    if (staged ? dtype !== 'f32' || !(b instanceof Float32Array) || p.b.cols !== N || M < 4 : p.b.cols !== K) return false;
    if (!(a instanceof Float32Array) || !(out instanceof Float32Array) || (bias && !(bias instanceof Float32Array))) return false;
    if (batch * M * N * K === 0) return false;
    const ld = rowBytes(dtype, K);
    const wBytes = b.byteLength;
    const rowsM = Math.max(2, Math.min(M, (Math.floor(X_BLOCK_BYTES / (4 * K)) >> 1) << 1));
    const tmp: Resident[] = [];
    const take = (size: number) => this.scratch(tmp, size);
    try {
      let w: number;
      if (staged) {
        w = take(4 * N * K);
        if (w < 0) return false;
      } else if (dtype === 'f32') {
        w = take(wBytes);
        if (w < 0) return false;
        this.heap.bytes(w, wBytes).set(new Uint8Array(b.buffer, b.byteOffset, wBytes));
      } else {
        w = this.residentAddr(b);
        if (w < 0) return false;
      }
      const xBytes = xRowBytes(dtype, K);
      const quant = isQuant(dtype);
      // the packed kernels' layout pads each row to packedK(K) and an odd block to a pair
      const packs = M >= PACKED_MIN_ROWS;
      const x = take(packs ? Math.max(rowsM * xBytes, 4 * packedK(K) * (rowsM + 1)) : rowsM * xBytes);
      // each thread's scratch: the packed kernels' widened weight rows, or a quantized row's block dots
      const pkStride = packs ? packBytes(K) : quant ? quantRowBytes(K) : 0; // packBytes(K) ≥ quantRowBytes(K)
      const pk = pkStride ? take(pkStride * this.threads) : 0;
      const xf = quant ? take(4 * K) : 0;
      const y = take(4 * rowsM * N);
      const bv = bias ? take(4 * N) : 0;
      if (x < 0 || y < 0 || bv < 0 || xf < 0 || pk < 0) return false;
      if (bias) this.heap.f32(bv, N).set(bias);
      const { sb: asb, sm: asm, sk: ask } = p.a;
      const { sb: csb, sm: csm, sn: csn } = p.c;
      for (let bi = 0; bi < batch; bi++) {
        const wb = staged ? w : w + bi * p.b.sbr * ld;
        if (staged) {
          const wt = this.heap.f32(w, N * K);
          const bf = b as Float32Array;
          for (let k = 0, src = bi * p.b.sbr * N; k < K; k++, src += N) for (let n = 0; n < N; n++) wt[n * K + k] = bf[src + n];
        }
        for (let m0 = 0; m0 < M; m0 += rowsM) {
          const rows = Math.min(rowsM, M - m0);
          const packed = packs && rows >= PACKED_MIN_ROWS;
          const xs = quant && !packed ? null : this.heap.f32(x, packed ? 2 * packedK(K) * Math.ceil(rows / 2) : rows * K);
          for (let m = 0; m < rows; m++) {
            const src = bi * asb + (m0 + m) * asm;
            if (packed) stagePacked(a, src, ask, K, m, rows, xs!);
            else if (!quant) stageFloats(a, src, ask, K, xs!.subarray(m * K, (m + 1) * K));
            else {
              // the row as f32 in the heap, then its integers and scales by the kernels
              const row = this.heap.f32(xf, K);
              if (ask === 1) row.set(a.subarray(src, src + K));
              else for (let k = 0; k < K; k++) row[k] = a[src + k * ask];
              this.stageInts(xf, K, x + m * xBytes);
            }
          }
          const name = packed ? `gemm_${dtype}_packed` : `gemm_${dtype}`;
          const gemm = this.gemm[name];
          this.runRows(name, gemm, [wb, ld, K, x, rows, y, N], N, rowsM * N * K, bv, pk, pkStride);
          const ys = this.heap.f32(y, rows * N);
          for (let m = 0; m < rows; m++) {
            const dst = bi * csb + (m0 + m) * csm;
            if (csn === 1) out.set(ys.subarray(m * N, (m + 1) * N), dst);
            else for (let n = 0; n < N; n++) out[dst + n * csn] = ys[m * N + n];
          }
        }
      }
      return true;
    } finally {
      for (const r of tmp) this.heap.release(r.addr, r.size);
    }
  }

  /**
   * Causal grouped-query attention forward as attention/cpu.ts's attentionForward computes it (o, and the row
   * logsumexp when `lse` is given): its rows in `attn_rows`, split among the threads where the work is worth waking
   * them, the two products' sums in f32 and the softmax in f64 as the reference's; the logsumexp here, from each row's
   * max and sum. False where the kernels do not take it (f64 or half arrays, D not a multiple of 4) or the heap cannot
   * hold the operands: the caller runs the reference then.
   */
  attention(q: FloatArray, k: FloatArray, v: FloatArray, dims: AttnDims, o: FloatArray, lse: FloatArray | null): boolean {
    const { t: T, hq, hkv, d: D, kvLen } = dims;
    if (!(q instanceof Float32Array && k instanceof Float32Array && v instanceof Float32Array && o instanceof Float32Array)) return false;
    if (D % 4 !== 0 || T * hq * D === 0 || kvLen === 0) return false;
    const kvFloats = kvLen * hkv * D;
    const tmp: Resident[] = [];
    const place = (a: Float32Array | null, floats: number) => this.place(tmp, a, floats);
    try {
      const qa = place(q, T * hq * D);
      const ka = place(k, kvFloats);
      const va = place(v, kvFloats);
      const oa = this.outAddr(tmp, o, T * hq * D);
      const rows = T * hq;
      const ms = lse ? this.scratch(tmp, 16 * rows) : 0;
      const stride = Math.ceil(attnRowsBytes(kvLen) / ALIGN) * ALIGN;
      const da = this.scratch(tmp, ATTN_DIMS_BYTES);
      const pk = this.scratch(tmp, stride * this.threads);
      if (qa < 0 || ka < 0 || va < 0 || oa < 0 || ms < 0 || da < 0 || pk < 0) return false;
      this.heap.bytes(da, 24).set(new Uint8Array(Int32Array.of(T, hq, hkv, D, kvLen, dims.window).buffer));
      new DataView(this.heap.buffer()).setFloat64(da + 24, dims.scale, true);
      // the work: about the multiply-adds of the two products, T·hq rows over kvLen − T/2 keys on average, twice D
      const work = 2 * rows * Math.max(1, kvLen - T / 2) * D;
      this.runRows('attn_rows', this.attnRows, [qa, ka, va, oa, da, ms, 0], rows, work, 0, pk, stride);
      if (lse) {
        // row r = h·T + t is lse's [h, t]: its max plus the log of its sum, as the reference takes it
        const m = new Float64Array(this.heap.buffer(), ms, 2 * rows);
        for (let r = 0; r < rows; r++) lse[r] = m[2 * r] + Math.log(m[2 * r + 1]);
      }
      this.copyOut(o, oa, T * hq * D);
      return true;
    } finally {
      for (const r of tmp) this.heap.release(r.addr, r.size);
    }
  }

  /**
   * The gated delta rule's forward as deltarule/cpu.ts's deltaRuleForward computes it (o, the final state, u), in the
   * kernels (f32 sums, the state walked by rows): exp(g) is taken here, in f64 then rounded, as the reference does.
   * False where the kernels do not take it (f64 arrays, dv not a multiple of 4) or the heap cannot hold the operands.
   */
  deltaRule(q: FloatArray, k: FloatArray, v: FloatArray, g: FloatArray, beta: FloatArray, state: FloatArray | null,
    o: FloatArray, st: FloatArray, u: FloatArray, { T, nk, nv, dk, dv }: DeltaDims): boolean {
    const arrays = [q, k, v, g, beta, o, st, u, ...(state ? [state] : [])];
    if (!arrays.every((a) => a instanceof Float32Array) || dv % 4 !== 0 || nv % nk !== 0) return false;
    const qkN = T * nk * dk;
    const voN = T * nv * dv;
    const gN = T * nv;
    const sN = nv * dk * dv;
    const tmp: Resident[] = [];
    const place = (a: FloatArray | null, floats: number) => this.place(tmp, a as Float32Array | null, floats);
    try {
      const at = [place(q, qkN), place(k, qkN), place(v, voN), place(null, gN), place(beta, gN), place(null, sN),
        place(null, voN), place(null, voN), place(null, 2 * dv)];
      if (at.some((x) => x < 0)) return false;
      const [qa, ka, va, aa, ba, sa, oa, ua, ma] = at as [number, number, number, number, number, number, number, number, number];
      const gates = this.heap.f32(aa, gN);
      for (let i = 0; i < gN; i++) gates[i] = Math.exp(g[i]);
      const s = this.heap.f32(sa, sN);
      if (state) s.set(state.subarray(0, sN));
      else s.fill(0);
      this.deltaRuleFn(qa, ka, va, aa, ba, sa, oa, ua, T, nk, nv, dk, dv, ma);
      o.set(this.heap.f32(oa, voN));
      u.set(this.heap.f32(ua, voN));
      st.set(this.heap.f32(sa, sN));
      return true;
    } finally {
      for (const r of tmp) this.heap.release(r.addr, r.size);
    }
  }

  /**
   * act(gate)·up (the gated MLP's activation) as activation/cpu.ts's gluForward computes it, the same bits, for SiLU and
   * the tanh-approximated GELU on f32 arrays, its values split among the threads. False for any other activation or
   * array type, or where the heap cannot hold the operands: the caller runs the reference then.
   */
  glu(act: Activation, gate: FloatArray, up: FloatArray, out: FloatArray): boolean {
    const mode = (GLU_MODES as readonly string[]).indexOf(act);
    if (mode < 0 || !(gate instanceof Float32Array && up instanceof Float32Array && out instanceof Float32Array)) return false;
    const n = gate.length;
    if (n === 0) return false;
    const tmp: Resident[] = [];
    try {
      const ga = this.place(tmp, gate, n);
      const ua = this.place(tmp, up, n);
      const oa = this.outAddr(tmp, out, n);
      if (ga < 0 || ua < 0 || oa < 0) return false;
      // a value's e^x and divisions weigh about as much as 32 multiply-adds
      this.runRows('glu', this.gluFn, [ga, ua, oa, mode, 0, 0, 0], n, 32 * n);
      this.copyOut(out, oa, n);
      return true;
    } finally {
      for (const r of tmp) this.heap.release(r.addr, r.size);
    }
  }

  /**
   * RMSNorm over rows of `cols` values as rmsnorm/cpu.ts's rmsnormForward computes it, the same bits, its rows split
   * among the threads. `w` holds f32 values (an f32 weight, or a half one widened by floatValues). False for f64
   * arrays or where the heap cannot hold the operands: the caller runs the reference then.
   */
  rmsnorm(x: FloatArray, w: FloatArray, cols: number, eps: number, offset: number, out: FloatArray): boolean {
    if (!(x instanceof Float32Array && out instanceof Float32Array) || cols === 0 || x.length === 0) return false;
    const rows = x.length / cols;
    const tmp: Resident[] = [];
    try {
      const xa = this.place(tmp, x, x.length);
      const wa = w instanceof Float32Array ? this.place(tmp, w, cols) : this.scratch(tmp, 4 * cols);
      const oa = this.outAddr(tmp, out, x.length);
      const da = this.scratch(tmp, RMSNORM_DIMS_BYTES);
      if (xa < 0 || wa < 0 || oa < 0 || da < 0) return false;
      if (!(w instanceof Float32Array)) this.heap.f32(wa, cols).set(w.subarray(0, cols));
      const dv = new DataView(this.heap.buffer());
      dv.setFloat64(da, eps, true);
      dv.setFloat64(da + 8, offset, true);
      // a value's share of the sum and its scaling weigh about as much as 4 multiply-adds
      this.runRows('rmsnorm', this.rmsnormFn, [xa, wa, oa, cols, da, 0, 0], rows, 4 * x.length);
      this.copyOut(out, oa, x.length);
      return true;
    } finally {
      for (const r of tmp) this.heap.release(r.addr, r.size);
    }
  }

  /**
   * Export `name` (`fn` here, one of KERNELS) over its rows [0, rows) with its first seven arguments `args`: split among
   * the threads where `work`, about its multiply-adds, is worth waking them, else on the caller alone.
   */
  private runRows(name: string, fn: Gemm, args: number[], rows: number, work: number, bias = 0, pk = 0, pkStride = 0) {
    if (this.pool && work >= this.minParallelMacs) this.pool.run(KERNELS.indexOf(name), fn, args, 0, rows, bias, pk, pkStride);
    else fn(args[0]!, args[1]!, args[2]!, args[3]!, args[4]!, args[5]!, args[6]!, 0, rows, bias, pk);
  }

  /** `size` bytes of the heap for one call, recorded in `tmp` for the caller to release; -1 when it cannot grow. */
  private scratch(tmp: Resident[], size: number): number {
    const addr = this.heap.alloc(size);
    if (addr >= 0) tmp.push({ addr, size });
    return addr;
  }

  /**
   * The heap address of `floats` values of `a` for one call: `a`'s own where it lives in the heap, else a scratch copy
   * (recorded in `tmp`); scratch of that size where `a` is null; -1 when the heap cannot grow.
   */
  private place(tmp: Resident[], a: Float32Array | null, floats: number): number {
    if (a && this.heap.owns(a)) return a.byteOffset;
    const addr = this.scratch(tmp, 4 * floats);
    if (addr >= 0 && a) this.heap.f32(addr, floats).set(a.subarray(0, floats));
    return addr;
  }

  /** The heap address an output of `floats` values is written at: its own where it lives in the heap, else scratch. */
  private outAddr(tmp: Resident[], out: Float32Array, floats: number): number {
    return this.heap.owns(out) ? out.byteOffset : this.scratch(tmp, 4 * floats);
  }

  /** `out`'s first `floats` values from `addr` (outAddr's), unless the kernel wrote them there in place. */
  private copyOut(out: Float32Array, addr: number, floats: number) {
    if (!this.heap.owns(out)) out.set(this.heap.f32(addr, floats));
  }

  /** Heap address of a frozen weight's bytes, copied in on first use; -1 when the heap cannot hold it. */
  private residentAddr(b: CpuArray): number {
    if (this.heap.owns(b)) return b.byteOffset;
    const r = this.resident.get(b);
    if (r) return r.addr;
    const size = b.byteLength;
    const addr = this.heap.alloc(size);
    if (addr < 0) return -1;
    this.heap.bytes(addr, size).set(new Uint8Array(b.buffer, b.byteOffset, size));
    const entry = { addr, size };
    this.resident.set(b, entry);
    this.reclaim.register(b, entry);
    return addr;
  }
}
