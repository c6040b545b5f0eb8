/**
 * The inference path's fused kernels (no backward: they run only when nothing records a tape). Each equals a chain of
 * the differentiable ops within f32 rounding; src/model/fused.ts composes them into decoder layers and link steps.
 */
export { type FusedGemvAttrs, fusedGemvKernel } from './gemv';
export { type RopeAppendAttrs, ropeAppendKernel } from './rope-append';
export { DELTA_STEP_MAX_DIM, type DeltaStepAttrs, deltaStepKernel } from './delta-step';
export { type NormAddAttrs, normAddKernel } from './norm-add';
export { type DecodeAttentionAttrs, SPLIT_KEYS, decodeAttentionKernel } from './decode-attention';
