/**
 * Tensor: shape, dtype and storage on one backend. Row-major, contiguous. Memory is explicit:
 * dispose() returns GPU buffers to the pool; autograd's Tape disposes the intermediates it recorded.
 */
import { TensorDisposed } from '../errors';
import type { DType } from '../formats/dtype';
import type { CpuArray, GpuChunk, Meta } from '../kernels/kernel';
import type { Backend } from './backend';
import { track } from './scope';

/** GPU storage may be shared by reshaped views: buffers go back to the pool when the last view is disposed. */
export type Storage =
  | { kind: 'cpu'; data: CpuArray }
  | { kind: 'webgpu'; chunks: GpuChunk[]; refs: { n: number } }
  /** ptr: this tensor's element 0; refs.base: the allocation, freed when the last view is disposed. */
  | { kind: 'cuda'; ptr: bigint; refs: { n: number; base: bigint } };

let nextId = 1;

export class Tensor implements Meta {
  readonly id = nextId++;
  /** Set by autograd: leaves that want gradients, and every value computed from them. */
  requiresGrad = false;
  /** Accumulated gradient of a leaf after Tape.backward(). */
  grad: Tensor | null = null;
  /** Set by autograd on outputs of recorded ops. */
  gradNode: unknown = null;
  private _storage: Storage | null;

  constructor(
    readonly backend: Backend,
    readonly shape: readonly number[],
    readonly dtype: DType,
    storage: Storage,
  ) {
    this._storage = storage;
    track(this);
  }

  get storage(): Storage {
    if (!this._storage) throw new TensorDisposed(`tensor #${this.id} [${this.shape}] ${this.dtype} was used after dispose()`);
    return this._storage;
  }

  get disposed(): boolean {
    return this._storage === null;
  }

  get numel(): number {
    return this.shape.reduce((a, b) => a * b, 1);
  }

  get rank(): number {
    return this.shape.length;
  }

  /** Values as f32 (dequantized for f16/bf16/q8_0/q4_0; exact for i32 up to 2^24). */
  read(): Promise<Float32Array> {
    return this.backend.read(this);
  }

  /** The raw storage bytes (the checkpoint and export format). */
  readBytes(): Promise<Uint8Array> {
    return this.backend.readBytes(this);
  }

  async readI32(): Promise<Int32Array> {
    const b = await this.backend.readBytes(this);
    return new Int32Array(b.buffer, b.byteOffset, b.byteLength / 4);
  }

  /** A tensor sharing this one's storage with another shape of the same element count. */
  reshape(shape: readonly number[]): Tensor {
    return this.backend.reshape(this, shape);
  }

  /** A view of `shape` from element `offset` of this tensor's storage (see Backend.view). */
  view(offset: number, shape: readonly number[]): Tensor {
    return this.backend.view(this, offset, shape);
  }

  dispose() {
    if (!this._storage) return;
    this.backend.release(this._storage);
    this._storage = null;
    this.grad?.dispose();
    this.grad = null;
  }

  toString() {
    return `Tensor#${this.id}(${this.backend.kind}, [${this.shape}], ${this.dtype})`;
  }
}
