/**
 * The shape every kernel folder follows. A kernel knows raw storage only (typed arrays on the CPU,
 * buffer chunks on the GPU); tensor/ wraps it, autograd/ gives it a backward rule.
 *
 * - `outputs` validates inputs (throwing ShapeMismatch / DTypeMismatch) and returns output metadata;
 * - `cpu` is the reference: plain loops over Float32Array or Float64Array (the f64 backend for gradcheck);
 * - `webgpu` encodes dispatches on a GpuContext; outputs come preallocated (uninitialised).
 * Kernels that update state in place (AdamW, say) write into their inputs and declare no outputs.
 */
import { BindingLimitExceeded, DTypeMismatch, ShapeMismatch } from '../errors';
import type { DType } from '../formats/dtype';
import type { GpuContext } from '../gpu/context';
import type { WasmKernels } from './matmul/wasm';

export interface Meta {
  readonly shape: readonly number[];
  readonly dtype: DType;
}

export type FloatArray = Float32Array | Float64Array;
/** CPU storage: f32 -> Float32Array (Float64Array on the f64 backend), f16/bf16 -> Uint16Array bits,
 * q8_0/q4_0 -> Uint8Array in the row layout of formats/dtype.ts, i32 -> Int32Array. */
export type CpuArray = FloatArray | Int32Array | Uint16Array | Uint8Array;

/** A contiguous piece of a GPU tensor: `rows` consecutive indices along dim 0. */
export interface GpuChunk {
  buffer: GPUBuffer;
  offset: number;
  size: number;
  rows: number;
}

export interface GpuRef {
  meta: Meta;
  chunks: GpuChunk[];
}

/** A CUDA tensor as a kernel sees it: the device address of element 0 (contiguous, row-major). */
export interface CudaRef {
  meta: Meta;
  ptr: bigint;
}

/**
 * What a kernel's `cuda` hook can do: launch native kernels that the addon registered by name
 * (native/cuda/src/registry.h) on the backend's stream, and take temporary device memory.
 * ints are shapes, strides, flags and dtype codes (cudaDType); floats are scalars.
 */
export interface CudaLauncher {
  launch(kernel: string, ptrs: readonly bigint[], ints?: readonly number[], floats?: readonly number[]): void;
  /** Device memory for this hook's own intermediates, released (stream-ordered) when the hook returns. */
  temp(bytes: number): bigint;
  /** Compute capability of the device, e.g. { major: 9, minor: 0 } on H100/H200. */
  readonly capability: { major: number; minor: number };
  /** How cuBLASLt products with f16/bf16 weights carry the f32 operand (default 'round'; see HalfGemm). */
  readonly halfGemm?: HalfGemm;
}

/**
 * The f32 operand of a cuBLASLt product with f16/bf16 weights (native/cuda/src/gemm_lt.cu): 'round' converts it
 * to the weight's type (8 significant bits for bf16: upstream's bf16 numerics, the fastest); 'split' carries it
 * as a sum of halves, one product each: 3 bf16 parts hold all of an f32 (f32 results, 3x the tensor-core work),
 * 2 f16 parts 22 bits (2x).
 */
export type HalfGemm = 'round' | 'split';

/** The dtype codes of native/cuda/src/registry.h (enum rmas::DType). */
export const CUDA_DTYPE: Readonly<Record<DType, number>> = { f32: 0, f16: 1, bf16: 2, q8_0: 3, q4_0: 4, i32: 5 };
export const cudaDType = (d: DType): number => CUDA_DTYPE[d];

/** What a kernel's `cpu` hook is told besides its arrays. */
export interface CpuMeta {
  inputs: readonly Meta[];
  outputs: readonly Meta[];
  /** The CPU backend's WebAssembly SIMD kernels (matmul/wasm.ts), absent on the TypeScript path. */
  wasm?: WasmKernels;
}

export interface KernelDef<A> {
  name: string;
  outputs(inputs: readonly Meta[], attrs: A): Meta[];
  /** The reference; `meta.wasm`, where the backend has them, the WebAssembly SIMD kernels a hook may use instead. */
  cpu(inputs: CpuArray[], outputs: CpuArray[], attrs: A, meta: CpuMeta): void;
  webgpu(ctx: GpuContext, inputs: GpuRef[], outputs: GpuRef[], attrs: A): void;
  /**
   * The CUDA implementation (src/tensor/cuda.ts calls it); outputs come preallocated and uninitialised,
   * as on WebGPU. Absent: the cuda backend reports the op as not implemented.
   */
  cuda?(ctx: CudaLauncher, inputs: CudaRef[], outputs: CudaRef[], attrs: A): void;
}

/** The one binding of a tensor that was not split; kernels that cannot walk chunks call this. */
export function binding(ref: GpuRef, what: string): GPUBufferBinding {
  if (ref.chunks.length !== 1) {
    const total = ref.chunks.reduce((s, c) => s + c.size, 0);
    throw new BindingLimitExceeded(
      `${what}: a ${total}-byte tensor of shape [${ref.meta.shape}] was split across ${ref.chunks.length} bindings and this kernel takes it whole; ` +
        'shorten the sequence or batch, or use a device with a larger maxStorageBufferBindingSize',
    );
  }
  const c = ref.chunks[0];
  return { buffer: c.buffer, offset: c.offset, size: c.size };
}

export const isFloatArray = (a: CpuArray): a is FloatArray => a instanceof Float32Array || a instanceof Float64Array;

// --- validation helpers shared by the kernels ---
export const numelOf = (shape: readonly number[]) => shape.reduce((a, b) => a * b, 1);

export function expectDType(op: string, what: string, m: Meta, ...allowed: DType[]) {
  if (!allowed.includes(m.dtype)) {
    throw new DTypeMismatch(`${op}: ${what} has dtype ${m.dtype}, expected ${allowed.join(' or ')}`);
  }
}

export function expectRank(op: string, what: string, m: Meta, ...ranks: number[]) {
  if (!ranks.includes(m.shape.length)) {
    throw new ShapeMismatch(`${op}: ${what} has shape [${m.shape}] (rank ${m.shape.length}), expected rank ${ranks.join(' or ')}`);
  }
}

export function expectSameShape(op: string, a: Meta, b: Meta, an = 'a', bn = 'b') {
  if (a.shape.length !== b.shape.length || a.shape.some((s, i) => s !== b.shape[i])) {
    throw new ShapeMismatch(`${op}: ${an} has shape [${a.shape}] but ${bn} has shape [${b.shape}]; they must match`);
  }
}

export function expectDim(op: string, what: string, got: number, want: number, dimName: string) {
  if (got !== want) throw new ShapeMismatch(`${op}: ${what} has ${dimName} ${got}, expected ${want}`);
}

/** Last-dimension size and number of rows (product of the leading dims). */
export function rowsCols(shape: readonly number[]): [rows: number, cols: number] {
  const cols = shape.length ? shape[shape.length - 1] : 1;
  return [cols ? numelOf(shape) / cols : 0, cols];
}
