// tensor/: the Tensor, the op interface (Backend) and its two implementations.
export * from './tensor';
export { type Backend, VIEW_ALIGN } from './backend';
export { CpuBackend } from './cpu';
export { WebGpuBackend } from './webgpu';
export { tidy, untrack } from './scope';
export { moveTensor } from './move';
