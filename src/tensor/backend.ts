import type { DType } from '../formats/dtype';
import type { GpuCounters } from '../gpu/counters';
import type { KernelDef } from '../kernels/kernel';
import type { Storage, Tensor } from './tensor';

/** Element alignment of view offsets (256 bytes of f32: minStorageBufferOffsetAlignment). */
export const VIEW_ALIGN = 64;

/** One op interface, several backends: the CPU reference, WebGPU, and CUDA (Node; src/tensor/cuda.ts). */
export interface Backend {
  readonly kind: 'cpu' | 'webgpu' | 'cuda';
  /** Human-readable description (adapter, precision). */
  readonly name: string;
  /** Encodes `values` into `dtype` (quantizing for q8_0/q4_0) and stores them. */
  fromValues(values: ArrayLike<number>, shape: readonly number[], dtype?: DType): Tensor;
  /** Stores raw storage bytes of `dtype` (see formats/dtype.ts). */
  fromBytes(bytes: Uint8Array, shape: readonly number[], dtype: DType): Tensor;
  zeros(shape: readonly number[], dtype?: DType): Tensor;
  read(t: Tensor): Promise<Float32Array>;
  readBytes(t: Tensor): Promise<Uint8Array>;
  /** Runs a kernel on tensors of this backend and returns its outputs. */
  run<A>(def: KernelDef<A>, inputs: readonly Tensor[], attrs: A): Tensor[];
  reshape(t: Tensor, shape: readonly number[]): Tensor;
  /**
   * A tensor of `shape` over t's storage from element `offset` on (f32/i32, unsplit tensors). Views share
   * storage: how flat parameter buffers expose each parameter. GPU offsets must be multiples of
   * VIEW_ALIGN elements (the 256-byte storage-offset alignment).
   */
  view(t: Tensor, offset: number, shape: readonly number[]): Tensor;
  release(s: Storage): void;
  /** Waits for queued work and raises deferred errors (GPU); a no-op on the CPU. */
  sync(): Promise<void>;
  /**
   * A copy of `t`, a tensor of another backend, made directly (a CUDA peer copy between two devices, an
   * array copy between two CPU backends of one precision), or null when this backend cannot take it
   * directly; moveTensor (tensor/move.ts) then goes through its bytes.
   */
  copyFrom?(t: Tensor): Tensor | null;
  /** The raw storage bytes, at once: backends whose reads need not wait for a queue (cpu, cuda). */
  readBytesSync?(t: Tensor): Uint8Array;
  /** The work issued so far (WebGPU: dispatches, submits, readbacks, bytes bound); absent where none is counted. */
  counters?(): GpuCounters;
  /** Counts `t`'s storage as weights in counters() (model weights, marked on load). */
  markWeight?(t: Tensor): void;
  /** True when products with f16/bf16 weights round the f32 operand to the weight's type (cuda, HalfGemm 'round'). */
  readonly halfGemmRounds?: boolean;
}
