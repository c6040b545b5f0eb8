// Every kernel folder's parity cases, run by parity.gpu.test.ts (Node) and parity.browser.test.ts.
import type { ParityCase } from '../../src/testing/parity';
import { cases as elementwise } from '../../src/kernels/elementwise/elementwise.cases';
import { cases as matmul } from '../../src/kernels/matmul/matmul.cases';
import { cases as embedding } from '../../src/kernels/embedding/embedding.cases';
import { cases as cast } from '../../src/kernels/cast/cast.cases';
import { cases as rmsnorm } from '../../src/kernels/rmsnorm/rmsnorm.cases';
import { cases as layernorm } from '../../src/kernels/layernorm/layernorm.cases';
import { cases as activation } from '../../src/kernels/activation/activation.cases';
import { cases as rope } from '../../src/kernels/rope/rope.cases';
import { cases as attention } from '../../src/kernels/attention/attention.cases';
import { cases as softmax } from '../../src/kernels/softmax/softmax.cases';
import { cases as loss } from '../../src/kernels/loss/loss.cases';
import { cases as reduce } from '../../src/kernels/reduce/reduce.cases';
import { cases as adamw } from '../../src/kernels/adamw/adamw.cases';
import { cases as sample } from '../../src/kernels/sample/sample.cases';

export const allCases: { group: string; cases: ParityCase[] }[] = [
  { group: 'elementwise', cases: elementwise },
  { group: 'matmul', cases: matmul },
  { group: 'embedding', cases: embedding },
  { group: 'cast', cases: cast },
  { group: 'rmsnorm', cases: rmsnorm },
  { group: 'layernorm', cases: layernorm },
  { group: 'activation', cases: activation },
  { group: 'rope', cases: rope },
  { group: 'attention', cases: attention },
  { group: 'softmax', cases: softmax },
  { group: 'loss', cases: loss },
  { group: 'reduce', cases: reduce },
  { group: 'adamw', cases: adamw },
  { group: 'sample', cases: sample },
];
