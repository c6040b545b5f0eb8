/**
 * Run by test/cuda-emu-nccl.test.ts under `mpirun -np N` on the CUDA emulator (not a test itself): each rank opens
 * NCCL (src/dist/nccl.ts) on its own emulated device, sums and broadcasts cuda tensors whose values depend on its
 * rank, and prints one JSON line of what it holds afterwards, for the test to compare with what every rank should
 * hold. When openNccl throws (RMAS_NCCL pointing at nothing), the line carries the error instead.
 */
import { F } from '../../src/autograd';
import { openProcessGroup } from '../../src/dist/mpi';
import { openNccl } from '../../src/dist/nccl';
import { CudaBackend } from '../../src/tensor/cuda';

/** More than one slot of the emulated NCCL (2^18 floats), so that the collectives go in chunks. */
const BIG = 300_000;

const g = openProcessGroup();
const r = g.rank;
const be = await CudaBackend.create();
const out: Record<string, unknown> = { rank: r, size: g.size, probe: be.addon.ncclProbe() };
const failure = (e: unknown) => ({ name: (e as Error).name, message: (e as Error).message });

try {
  const nccl = await openNccl(g, be);
  out.description = nccl.description;

  // a kernel's output summed, then used by another kernel: all on the device's stream, in order
  const x = be.fromValues([r + 1, -2 * r, 0.5, 2 ** r], [2, 2]);
  const doubled = F.add(x, x);
  nccl.allReduceSum(doubled);
  const after = F.add(doubled, be.fromValues([1, 1, 1, 1], [2, 2]));
  out.sum = [...(await doubled.read())];
  out.sumThenAdd = [...(await after.read())];

  const big = be.fromValues(Float32Array.from({ length: BIG }, (_, i) => (i % 7) * (r + 1)), [BIG]);
  nccl.allReduceSum(big);
  const got = await big.read();
  const k = (g.size * (g.size + 1)) / 2;
  out.big = {
    mismatches: got.reduce((n, v, i) => n + (v === (i % 7) * k ? 0 : 1), 0),
    samples: [2, 262_142, 262_144, 262_145, BIG - 2].map((i) => got[i]),
  };

  // a view: only its range is summed; the storage before it keeps this rank's values
  const flat = be.fromValues(Float32Array.from({ length: 128 }, (_, i) => i + 1000 * r), [128]);
  nccl.allReduceSum(flat.view(64, [64]));
  const f = await flat.read();
  out.view = { before: [f[0], f[63]], inside: [f[64], f[127]] };

  const b = be.fromValues(Float32Array.from({ length: 5 }, (_, i) => 10 * r + i), [5]);
  nccl.broadcast(b, g.size - 1);
  out.bcast = [...(await b.read())];
  const bigB = be.fromValues(Float32Array.from({ length: BIG }, (_, i) => (r === 0 ? i : -1)), [BIG]);
  nccl.broadcast(bigB, 0);
  out.bigBcastMismatches = (await bigB.read()).reduce((n, v, i) => n + (v === i ? 0 : 1), 0);

  try {
    nccl.allReduceSum(be.fromValues([1, 2], [2], 'i32'));
  } catch (e) {
    out.i32 = failure(e);
  }
  try {
    nccl.broadcast(b, g.size);
  } catch (e) {
    out.badRoot = failure(e);
  }
  nccl.close();
  try {
    nccl.allReduceSum(b);
  } catch (e) {
    out.closed = failure(e);
  }
} catch (e) {
  out.open = failure(e);
}
await g.barrier();
process.stdout.write(`${JSON.stringify(out)}\n`);
g.close();
