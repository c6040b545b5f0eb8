// autograd/ops: the differentiable tensor functions that model, links and training are written in.
// Each wraps a kernel (kernels/<op>) and records its backward rule when a tape is recording.
export * from './elementwise';
export * from './linear';
export * from './norm';
export * from './activation';
export * from './rope';
export * from './attention';
export * from './softmax';
export * from './loss';
export * from './reduce';
export * from './optim';
export * from './sample';
export * from './shape';
export * from './rows';
export * from './topk';
export * from './conv';
export * from './deltarule';
export * from './cols';
