/**
 * Parity cases: the same WebGPU-vs-CPU checks run in Node (Dawn on lavapipe) and in headless Chromium
 * (SwiftShader). Each kernel folder exports its cases from `<op>.cases.ts`; test/parity/ collects them.
 */
import type { CpuBackend } from '../../tensor/cpu';
import type { Tensor } from '../../tensor/tensor';
import type { Backend } from '../../tensor/backend';
import type { DType } from '../../formats/dtype';
import { type CloseReport, type Tolerance, closeness } from './close';
import { Rng } from '../../util/rng';

export interface ParityEnv {
  /** The backend under test: WebGPU (test/parity, the page's self-test) or CUDA (npm run test:cuda). */
  gpu: Backend;
  /** f32 CPU reference. */
  cpu: CpuBackend;
  rng: Rng;
  /** Whether the device has shader-f16 (so native-f16 variants can be exercised). */
  f16: boolean;
}

export interface ParityCase {
  name: string;
  run(env: ParityEnv): Promise<void>;
  /**
   * The case checks what only WebGPU has: its own machinery (bindings split into chunks, folded grids) on a
   * WebGpuBackend it makes, or the fused inference kernels (kernels/fused; CUDA keeps the plain path). Other
   * backends' runs skip it.
   */
  webgpuOnly?: true;
}

/** The same values on both backends. */
export function pair(env: ParityEnv, values: ArrayLike<number>, shape: readonly number[], dtype: DType = 'f32'): { g: Tensor; c: Tensor } {
  return { g: env.gpu.fromValues(values, shape, dtype), c: env.cpu.fromValues(values, shape, dtype) };
}

/** Reads a GPU result and its CPU reference and asserts closeness. */
export async function expectParity(gpuOut: Tensor, cpuOut: Tensor, tol: Tolerance, label: string) {
  if (gpuOut.shape.join() !== cpuOut.shape.join()) throw new Error(`${label}: shape [${gpuOut.shape}] vs reference [${cpuOut.shape}]`);
  const [a, e] = await Promise.all([gpuOut.read(), cpuOut.read()]);
  return observedClose(a, e, tol, label);
}

/** assertClose that also tells the parity observers (the page's self-test) how close it was. */
export function observedClose(actual: ArrayLike<number>, expected: ArrayLike<number>, tol: Tolerance, label: string) {
  const report = closeness(actual, expected, tol, label);
  for (const observe of parityObservers) observe(report);
  if (!report.ok) throw new Error(report.message);
  return report;
}

/** Called with every closeness report of expectParity (the page's self-test shows the largest error). */
export const parityObservers = new Set<(r: CloseReport) => void>();

export const newRng = (seed: number) => new Rng(seed);
