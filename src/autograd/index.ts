// autograd/: the tape, differentiable ops and gradcheck.
import { add } from './ops/elementwise';
import { setAccumulate } from './tape';

// Fan-out: gradients of a value's several uses are summed with the add kernel.
setAccumulate((a, b) => {
  const s = add(a, b);
  a.dispose();
  b.dispose();
  return s;
});

export * from './tape';
export * from './gradcheck';
export * from './recompute';
export * from './params';
export * as F from './ops';
export type { SampleOptions } from './ops/sample';
