// Every kernel folder's benchmarks, run by bench/run.ts (Node) and the bench page (browser).
import type { BenchCase } from '../src/kernels/workbench/bench';
import { benches as elementwise } from '../src/kernels/elementwise/elementwise.bench';
import { benches as matmul } from '../src/kernels/matmul/matmul.bench';
import { benches as embedding } from '../src/kernels/embedding/embedding.bench';
import { benches as cast } from '../src/kernels/cast/cast.bench';
import { benches as rmsnorm } from '../src/kernels/rmsnorm/rmsnorm.bench';
import { benches as layernorm } from '../src/kernels/layernorm/layernorm.bench';
import { benches as activation } from '../src/kernels/activation/activation.bench';
import { benches as rope } from '../src/kernels/rope/rope.bench';
import { benches as attention } from '../src/kernels/attention/attention.bench';
import { benches as softmax } from '../src/kernels/softmax/softmax.bench';
import { benches as loss } from '../src/kernels/loss/loss.bench';
import { benches as reduce } from '../src/kernels/reduce/reduce.bench';
import { benches as adamw } from '../src/kernels/adamw/adamw.bench';
import { benches as sample } from '../src/kernels/sample/sample.bench';
import { benches as rows } from '../src/kernels/rows/rows.bench';
import { benches as topk } from '../src/kernels/topk/topk.bench';
import { benches as conv1d } from '../src/kernels/conv1d/conv1d.bench';
import { benches as deltarule } from '../src/kernels/deltarule/deltarule.bench';
import { benches as cols } from '../src/kernels/cols/cols.bench';
import { benches as model } from '../src/model/model.bench';
import { benches as mas } from '../src/mas/mas.bench';
import { benches as train } from '../src/train/train.bench';

export const allBenches: BenchCase[] = [
  ...elementwise,
  ...matmul,
  ...embedding,
  ...cast,
  ...rmsnorm,
  ...layernorm,
  ...activation,
  ...rope,
  ...attention,
  ...softmax,
  ...loss,
  ...reduce,
  ...adamw,
  ...sample,
  ...rows,
  ...topk,
  ...conv1d,
  ...deltarule,
  ...cols,
  ...model,
  ...mas,
  ...train,
];
