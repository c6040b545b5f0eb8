/**
 * Process groups: the ranks of one job and the collectives between them (docs/distributed.md). A group is
 * the single process (world size 1: every collective returns its input, nothing else is needed) or an MPI
 * world (src/dist/mpi.ts, under mpirun). Collectives work on host buffers and are awaited: the event loop
 * keeps running while a rank waits for its peers.
 *
 * On top of them, what data-parallel training needs (src/train/loop.ts's DataParallel): the links' flat
 * gradients summed across ranks before clipping and AdamW, parameters broadcast from rank 0, a digest that
 * proves every rank holds the same links, and small JSON values gathered from every rank.
 */
import type { FlatParams } from '../autograd/params';
import { InvalidArgument, RanksDiverged, RmasError } from '../errors';
import type { DataParallel } from '../train/loop';
import type { DeviceCollectives } from './nccl';

export type ReduceOp = 'sum' | 'max' | 'min';
export type NumericBuffer = Float32Array | Float64Array | Int32Array;
export type HostBuffer = NumericBuffer | Uint8Array;

export interface ProcessGroup {
  /** This process's rank, 0 ≤ rank < size. */
  readonly rank: number;
  readonly size: number;
  /** Rank among the processes of this machine (picks the GPU of --devices). */
  readonly localRank: number;
  readonly localSize: number;
  /** What forms the group, for logs: "single process", "Open MPI v4.1.4 on host h". */
  readonly description: string;
  /** Reduces `data` element-wise across ranks, in place on every rank; returns it. */
  allReduce<T extends NumericBuffer>(data: T, op?: ReduceOp): Promise<T>;
  /** Every rank's `data` becomes root's (same length on every rank); returns it. */
  broadcast<T extends HostBuffer>(data: T, root?: number): Promise<T>;
  /** Every rank's bytes (any length), in rank order. */
  allGather(bytes: Uint8Array): Promise<Uint8Array[]>;
  barrier(): Promise<void>;
  /** Leaves the group (MPI_Finalize); collectives fail afterwards. */
  close(): void;
}

/** World size 1: the collectives of one process. */
export function singleProcess(): ProcessGroup {
  return {
    rank: 0,
    size: 1,
    localRank: 0,
    localSize: 1,
    description: 'single process',
    allReduce: async (data) => data,
    broadcast: async (data, root = 0) => {
      if (root !== 0) throw new InvalidArgument(`broadcast from rank ${root}: a single process has only rank 0`);
      return data;
    },
    allGather: async (bytes) => [bytes.slice()],
    barrier: async () => {},
    close: () => {},
  };
}

const encoder = new TextEncoder();
const decoder = new TextDecoder();

/** Every rank's JSON value, in rank order. */
export async function allGatherJson<T>(g: ProcessGroup, value: T): Promise<T[]> {
  const parts = await g.allGather(encoder.encode(JSON.stringify(value)));
  return parts.map((p) => JSON.parse(decoder.decode(p)) as T);
}

/** Root's JSON value on every rank (`value` is read on root only). */
export async function broadcastJson<T>(g: ProcessGroup, value: T, root = 0): Promise<T> {
  if (g.size === 1) return value;
  const bytes = g.rank === root ? encoder.encode(JSON.stringify(value)) : new Uint8Array(0);
  const len = await g.broadcast(Int32Array.of(bytes.length), root);
  const data = await g.broadcast(g.rank === root ? bytes : new Uint8Array(len[0]), root);
  return JSON.parse(decoder.decode(data)) as T;
}

/** An error that another rank raised and this one repeats (the command line prints it once, on that rank). */
export type EchoedError = RmasError & { echoOf: number };
export const isEchoed = (e: unknown): e is EchoedError => e instanceof RmasError && typeof (e as EchoedError).echoOf === 'number';

/**
 * Runs `fn` on `root` only (a file only it reads or writes) and shares the outcome: its JSON result on every
 * rank, or its error, thrown on every rank (on the others as an EchoedError of the same name).
 */
export async function fromRoot<T>(g: ProcessGroup, fn: () => Promise<T>, root = 0): Promise<T> {
  if (g.size === 1) return fn();
  type Outcome = { ok: true; value: T } | { ok: false; name: string; message: string };
  let mine: Outcome | null = null;
  let thrown: unknown = null;
  if (g.rank === root) {
    try {
      mine = { ok: true, value: await fn() };
    } catch (e) {
      thrown = e ?? new Error('undefined thrown');
      mine = { ok: false, name: (e as Error)?.name ?? 'Error', message: (e as Error)?.message ?? String(e) };
    }
  }
  const shared = await broadcastJson<Outcome | null>(g, mine, root);
  if (thrown) throw thrown;
  if (!shared) throw new InvalidArgument(`rank ${root} shared no outcome`);
  if (!shared.ok) throw Object.assign(new RmasError(shared.name, `(rank ${root}) ${shared.message}`), { echoOf: root });
  return shared.value;
}

/** The flat buffers of `params` (one part: values or gradients) as one host array, in order. */
type Part = 'data' | 'grad' | 'm' | 'v';

async function readAll(params: readonly FlatParams[], part: Part): Promise<Float32Array> {
  const parts = await Promise.all(params.map((p) => p.readFlat(part)));
  const all = new Float32Array(parts.reduce((n, x) => n + x.length, 0));
  let at = 0;
  for (const x of parts) {
    all.set(x, at);
    at += x.length;
  }
  return all;
}

function writeAll(params: readonly FlatParams[], part: Part, all: Float32Array) {
  let at = 0;
  for (const p of params) {
    p.writeFlat(part, all.subarray(at, at + p.size));
    at += p.size;
  }
}

/**
 * Sums the gathered gradients of `params` across ranks, in place on every rank. With `device` (NCCL on the cuda
 * backend) each flat buffer is summed in device memory. Otherwise on the host, one collective for all the
 * buffers: each device's gradients come back to the host, are summed there over MPI and go back; links are small
 * next to the agents, so this costs little beside a step.
 */
export async function allReduceGradients(g: ProcessGroup, params: readonly FlatParams[], device?: DeviceCollectives): Promise<void> {
  if (g.size === 1) return;
  if (device) for (const p of params) device.allReduceSum(p.grad);
  else writeAll(params, 'grad', await g.allReduce(await readAll(params, 'grad'), 'sum'));
}

/** Rank 0's parameter values (and with `moments`, AdamW's m and v) on every rank, in device memory with `device`. */
export async function broadcastParameters(
  g: ProcessGroup, params: readonly FlatParams[], { moments = false, device }: { moments?: boolean; device?: DeviceCollectives } = {},
): Promise<void> {
  if (g.size === 1) return;
  for (const part of moments ? (['data', 'm', 'v'] as const) : (['data'] as const)) {
    if (device) for (const p of params) device.broadcast(part === 'data' ? p.data : p[part], 0);
    else writeAll(params, part, await g.broadcast(await readAll(params, part), 0));
  }
}

/** FNV-1a (64-bit) of the parameter values' bytes, as 16 hex digits. */
export async function parameterDigest(params: readonly FlatParams[]): Promise<string> {
  const bytes = new Uint8Array((await readAll(params, 'data')).buffer);
  let h = 0xcbf29ce484222325n;
  for (let i = 0; i < bytes.length; i++) h = BigInt.asUintN(64, (h ^ BigInt(bytes[i])) * 0x100000001b3n);
  return h.toString(16).padStart(16, '0');
}

/** Throws RanksDiverged unless every rank holds the same parameter values (bit for bit). */
export async function checkSameParameters(g: ProcessGroup, params: readonly FlatParams[], when: string): Promise<void> {
  if (g.size === 1) return;
  const digests = await allGatherJson(g, await parameterDigest(params));
  const odd = digests.map((d, r) => [d, r] as const).filter(([d]) => d !== digests[0]);
  if (odd.length) {
    throw new RanksDiverged(
      `${when}: rank 0 holds links with digest ${digests[0]}, ${odd.map(([d, r]) => `rank ${r} ${d}`).join(', ')}; ` +
        'data-parallel ranks must stay identical (same code, data and flags on every rank); nothing was saved',
    );
  }
}

/**
 * What trainLoop needs of a group: this rank's place, sums of step figures, and the gradients' all-reduce (over
 * `device`, NCCL, when given; else on the host).
 */
export function dataParallel(g: ProcessGroup, params: readonly FlatParams[], device?: DeviceCollectives): DataParallel {
  return {
    rank: g.rank,
    size: g.size,
    sum: async (values) => [...(await g.allReduce(Float64Array.from(values), 'sum'))],
    gather: (value) => allGatherJson(g, value),
    reduceGradients: () => allReduceGradients(g, params, device),
  };
}
