/**
 * Training losses, each a mean over included rows returning a [1] scalar, with backward kernels:
 * cross-entropy with an ignore index (outer links), masked cosine distance and masked MSE (inner links).
 * A mean over no included rows is 0 (torch: NaN), see cpu.ts.
 */
export { type CrossEntropyAttrs, crossEntropyBackwardKernel, crossEntropyKernel } from './crossentropy';
export { type WrtAttrs, cosineLossBackwardKernel, cosineLossKernel, mseLossBackwardKernel, mseLossKernel } from './distance';
export { COS_EPS2 } from './cpu';
