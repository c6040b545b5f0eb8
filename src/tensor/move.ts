/**
 * Moving a tensor to another backend: how a system whose agents live on different devices (one role per
 * GPU) passes latents between them. Synchronous, so that forwards recorded on a tape can move their
 * activations; the backends that can (cpu, cuda) read their bytes at once, and CUDA copies between two
 * devices directly. A WebGPU tensor cannot move synchronously (its reads wait for the queue).
 */
import { UnsupportedFeature } from '../errors';
import type { Backend } from './backend';
import type { Tensor } from './tensor';

/**
 * A tensor on `to` with t's shape, dtype and values. On t's own backend: a view sharing t's storage
 * (dispose either, the storage lives while one does); elsewhere: a copy.
 */
export function moveTensor(t: Tensor, to: Backend): Tensor {
  const from = t.backend;
  if (from === to) return t.reshape(t.shape);
  const direct = to.copyFrom?.(t);
  if (direct) return direct;
  if (!from.readBytesSync) {
    throw new UnsupportedFeature(`cannot move ${t} from ${from.name} to ${to.name}: ${from.kind} tensors are read back asynchronously; ` +
      'keep a system on one WebGPU device, or place its roles on cuda or cpu backends');
  }
  return to.fromBytes(from.readBytesSync(t), t.shape, t.dtype);
}
