/** One WebGPU backend per test file (Node: Dawn on lavapipe; browser: Chromium's SwiftShader). */
import { WebGpuBackend } from '../../src/tensor/webgpu';
import type { ContextOptions } from '../../src/gpu/context';

let shared: Promise<WebGpuBackend> | null = null;

export function gpuBackend(): Promise<WebGpuBackend> {
  shared ??= WebGpuBackend.create();
  return shared;
}

/** A separate backend (for tests that destroy their device or shrink limits). */
export function freshGpuBackend(opts?: ContextOptions): Promise<WebGpuBackend> {
  return WebGpuBackend.create(opts);
}
