import { BackendMismatch, InvalidArgument, ShapeMismatch } from '../errors';
import { type DType, byteSize } from '../formats/dtype';
import type { Backend } from './backend';
import type { Tensor } from './tensor';

export function sameBackend(op: string, backend: Backend, inputs: readonly Tensor[]) {
  for (const t of inputs) {
    if (t.backend !== backend) {
      throw new BackendMismatch(`${op}: ${t} lives on ${t.backend.name} but the op runs on ${backend.name}; move it first`);
    }
  }
}

export function checkShape(shape: readonly number[]) {
  for (const s of shape) {
    if (!Number.isInteger(s) || s < 0) throw new InvalidArgument(`shape [${shape}] has a dimension that is not a non-negative integer`);
  }
}

/** fromValues' arguments: a valid shape and one value per element; returns the element count. */
export function checkValues(values: ArrayLike<number>, shape: readonly number[]): number {
  checkShape(shape);
  const n = shape.reduce((a, b) => a * b, 1);
  if (values.length !== n) throw new InvalidArgument(`fromValues: ${values.length} values for shape [${shape}] (${n} elements)`);
  return n;
}

/** fromBytes' arguments: a valid shape and exactly its storage bytes; returns that byte count. */
export function checkBytes(bytes: Uint8Array, shape: readonly number[], dtype: DType): number {
  checkShape(shape);
  const want = byteSize(dtype, shape);
  if (bytes.byteLength !== want)
    throw new InvalidArgument(`fromBytes: ${bytes.byteLength} bytes for ${dtype} [${shape}], expected ${want}`);
  return want;
}

export function checkReshape(t: Tensor, shape: readonly number[]) {
  checkShape(shape);
  const n = shape.reduce((a, b) => a * b, 1);
  if (n !== t.numel) throw new ShapeMismatch(`reshape: cannot view [${t.shape}] (${t.numel} elements) as [${shape}] (${n})`);
  if (t.dtype === 'q8_0' || t.dtype === 'q4_0') {
    if (shape[shape.length - 1] !== t.shape[t.shape.length - 1]) {
      throw new ShapeMismatch(`reshape: a ${t.dtype} tensor keeps its last dimension (${t.shape[t.shape.length - 1]}); got [${shape}]`);
    }
  }
}

export function checkView(t: Tensor, offset: number, shape: readonly number[]) {
  checkShape(shape);
  if (t.dtype !== 'f32' && t.dtype !== 'i32' && t.dtype !== 'f16')
    throw new InvalidArgument(`view: ${t} has dtype ${t.dtype}; views exist for f32, i32 and f16 only`);
  const n = shape.reduce((a, b) => a * b, 1);
  if (!Number.isInteger(offset) || offset < 0 || offset + n > t.numel) {
    throw new ShapeMismatch(`view: elements [${offset}, ${offset + n}) are outside ${t} (${t.numel} elements)`);
  }
}
