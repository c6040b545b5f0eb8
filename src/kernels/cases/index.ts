// Every kernel folder's GPU-vs-CPU parity cases, by group: the page's self-test (through the engine
// worker) runs them, and test/parity/all.ts can re-export this list so both stay one list.
import type { ParityCase } from '../workbench/parity';
import { cases as elementwise } from '../elementwise/elementwise.cases';
import { cases as matmul } from '../matmul/matmul.cases';
import { cases as embedding } from '../embedding/embedding.cases';
import { cases as cast } from '../cast/cast.cases';
import { cases as rmsnorm } from '../rmsnorm/rmsnorm.cases';
import { cases as layernorm } from '../layernorm/layernorm.cases';
import { cases as activation } from '../activation/activation.cases';
import { cases as rope } from '../rope/rope.cases';
import { cases as attention } from '../attention/attention.cases';
import { cases as softmax } from '../softmax/softmax.cases';
import { cases as loss } from '../loss/loss.cases';
import { cases as reduce } from '../reduce/reduce.cases';
import { cases as adamw } from '../adamw/adamw.cases';
import { cases as sample } from '../sample/sample.cases';
import { cases as rows } from '../rows/rows.cases';
import { cases as topk } from '../topk/topk.cases';
import { cases as conv1d } from '../conv1d/conv1d.cases';
import { cases as deltarule } from '../deltarule/deltarule.cases';
import { cases as cols } from '../cols/cols.cases';
import { cases as fused } from '../fused/fused.cases';

export interface CaseGroup {
  group: string;
  cases: ParityCase[];
}

export const allCases: CaseGroup[] = [
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
  { group: 'rows', cases: rows },
  { group: 'topk', cases: topk },
  { group: 'conv1d', cases: conv1d },
  { group: 'deltarule', cases: deltarule },
  { group: 'cols', cases: cols },
  { group: 'fused', cases: fused },
];
