/**
 * Run by test/dist/mpi.test.ts under `mpirun -np N` (not a test itself): each rank exercises the process group's
 * collectives with values that depend on its rank and prints one JSON line of what it got, for the test to
 * compare with what every rank should hold.
 */
import { FlatParams } from '../../src/autograd/params';
import {
  allGatherJson, allReduceGradients, broadcastJson, broadcastParameters, checkSameParameters, fromRoot, parameterDigest,
} from '../../src/dist/group';
import { openProcessGroup } from '../../src/dist/mpi';
import { CpuBackend } from '../../src/tensor/cpu';

const g = openProcessGroup();
const r = g.rank;
const out: Record<string, unknown> = { rank: r, size: g.size, localRank: g.localRank, localSize: g.localSize };

out.sum = [...(await g.allReduce(Float32Array.of(r + 1, -2 * r, 0.5), 'sum'))];
out.max = [...(await g.allReduce(Int32Array.of(r, -r), 'max'))];
out.min = [...(await g.allReduce(Float64Array.of(r + 0.25), 'min'))];
out.bcast = [...(await g.broadcast(Uint8Array.of(r, r + 1, r + 2), g.size - 1))];
// every rank sends a different length, rank 0 none at all
out.gather = (await g.allGather(new Uint8Array(r).fill(r + 10))).map((b) => [...b]);
out.json = await allGatherJson(g, { r, text: 'é'.repeat(r) });
out.bjson = await broadcastJson(g, r === 0 ? { from: 0, list: [1, 2, 3] } : null);
out.fromRoot = await fromRoot(g, async () => ({ picked: r }));
try {
  await fromRoot(g, async () => {
    throw new RangeError('only rank 0 knows');
  });
} catch (e) {
  out.fromRootError = { name: (e as Error).name, message: (e as Error).message, echoed: typeof (e as { echoOf?: number }).echoOf };
}

// flat parameters: different values per rank, broadcast from rank 0; gradients summed
const be = new CpuBackend('f32');
const p = new FlatParams(be, [
  { name: 'w', shape: [2, 3], init: Array.from({ length: 6 }, (_, i) => i + 10 * r) },
  { name: 'b', shape: [3], init: [r, r, r] },
]);
out.digestBefore = await parameterDigest([p]);
await broadcastParameters(g, [p]);
out.params = [...(await p.readFlat('data'))].slice(0, 6);
out.digestAfter = await parameterDigest([p]);
await checkSameParameters(g, [p], 'after the broadcast');
p.writeFlat('grad', Float32Array.from({ length: p.size }, (_, i) => (i + 1) * (r + 1)));
await allReduceGradients(g, [p]);
out.grad = [...(await p.readFlat('grad'))].slice(0, 9);
if (r === g.size - 1) p.writeFlat('data', Float32Array.from({ length: p.size }, () => 7));
try {
  await checkSameParameters(g, [p], 'after a rank changed its values');
} catch (e) {
  out.diverged = { name: (e as Error).name, message: (e as Error).message };
}
await g.barrier();
process.stdout.write(`${JSON.stringify(out)}\n`);
g.close();
