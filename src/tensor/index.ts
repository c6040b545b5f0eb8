// tensor/: the Tensor, the op interface (Backend) and its implementations: CpuBackend (the reference, f32 or f64) and
// WebGpuBackend here; CudaBackend (Node, the N-API addon) is imported from ./cuda so that the page never loads it.
export * from './tensor';
export { type Backend, VIEW_ALIGN } from './backend';
export { CpuBackend } from './cpu';
export { WebGpuBackend } from './webgpu';
export { tidy, untrack } from './scope';
export { moveTensor } from './move';
