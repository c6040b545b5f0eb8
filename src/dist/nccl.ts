/**
 * NCCL between the ranks of a process group (cuda backend): tensors summed or broadcast in device memory, with no
 * trip through the host. The CUDA addon opens NCCL at run time (native/cuda/src/nccl.cc); on the emulator build
 * it is the emulated NCCL of native/cuda/emu, whose ranks are processes of one machine.
 *
 * Every rank makes the same calls in the same order: openNccl, then the same collectives, then close. openNccl
 * first lets the ranks agree that each of them can use NCCL, so either all of them get collectives or all get
 * DistUnavailable (and may take the host path together) instead of some waiting forever for the others.
 * Collectives are queued on the device's stream, ordered with the kernels before and after them; reading a
 * result back (read()) waits for it, as for any kernel's output.
 */
import { DistUnavailable, InvalidArgument } from '../errors';
import type { CudaAddon } from '../gpu/cuda-addon';
import type { Backend } from '../tensor/backend';
import type { CudaBackend } from '../tensor/cuda';
import type { Tensor } from '../tensor/tensor';
import type { ProcessGroup } from './group';

export interface DeviceCollectives {
  /** What carries the collectives, for logs: "NCCL 2.21.5 (/usr/lib/…/libnccl.so.2) on cuda:0, rank 1 of 2". */
  readonly description: string;
  /** Sums `t` (f32, on this backend) over the ranks, in place on every rank. */
  allReduceSum(t: Tensor): void;
  /** Every rank's `t` (f32, on this backend, the same shape everywhere) becomes root's, in place. */
  broadcast(t: Tensor, root: number): void;
  /** Frees the communicator; collectives fail afterwards. */
  close(): void;
}

const HOST_PATH = 'without NCCL the collectives take the host path (MPI on host buffers)';
const ID_BYTES = 128;
const encoder = new TextEncoder();
const decoder = new TextDecoder();

/** NCCL's version code as text (MAJOR*10000 + MINOR*100 + PATCH since 2.9, MAJOR*1000 + … before). */
export function ncclVersionText(code: number): string {
  const major = code >= 10000 ? Math.floor(code / 10000) : Math.floor(code / 1000);
  const minor = Math.floor((code % (code >= 10000 ? 10000 : 1000)) / 100);
  return `${major}.${minor}.${code % 100}`;
}

/** Every rank's problem (null: none), in rank order; all ranks call it at the same point. */
async function agree(group: ProcessGroup, problem: string | null): Promise<(string | null)[]> {
  const parts = await group.allGather(encoder.encode(JSON.stringify(problem)));
  return parts.map((p) => JSON.parse(decoder.decode(p)) as string | null);
}

/** One line per distinct problem, with the ranks that have it. */
function summarize(problems: readonly (string | null)[]): string {
  const byText = new Map<string, number[]>();
  problems.forEach((p, r) => p !== null && byText.set(p, [...(byText.get(p) ?? []), r]));
  return [...byText].map(([p, ranks]) => `rank${ranks.length > 1 ? 's' : ''} ${ranks.join(', ')}: ${p}`).join('; ');
}

/** Runs `fn` with `be`'s device current in the addon, then makes the previous one current again. */
function onDevice<T>(be: CudaBackend, fn: (a: CudaAddon) => T): T {
  const a = be.addon;
  const prev = a.current();
  if (prev !== be.device) a.use(be.device);
  try {
    return fn(a);
  } finally {
    if (prev !== be.device && prev >= 0) a.use(prev);
  }
}

/** Why this rank cannot use NCCL on `backend`, or null. */
function localProblem(backend: Backend): string | null {
  if (backend.kind !== 'cuda') return `NCCL collectives need the cuda backend, this rank runs ${backend.name}`;
  const addon = (backend as CudaBackend).addon;
  if (typeof addon.ncclProbe !== 'function')
    return 'the loaded CUDA addon predates NCCL support; rebuild it with `npm run build:cuda -- --force`';
  const probe = addon.ncclProbe();
  return probe.loaded ? null : `NCCL does not load: ${probe.error}`;
}

/**
 * Opens NCCL on every rank of `group` for tensors of `backend` (its device): rank 0 makes the unique id, the
 * group's broadcast shares it, each rank joins the communicator. Every rank of the group must call it.
 * Throws DistUnavailable on every rank when any rank cannot (not the cuda backend, NCCL missing, init failed).
 */
export async function openNccl(group: ProcessGroup, backend: Backend): Promise<DeviceCollectives> {
  let problem = localProblem(backend);
  let id: Uint8Array = new Uint8Array(ID_BYTES);
  if (!problem && group.rank === 0) {
    try {
      id = (backend as CudaBackend).addon.ncclUniqueId();
    } catch (e) {
      problem = `ncclGetUniqueId failed: ${(e as Error).message}`;
    }
  }
  const problems = await agree(group, problem);
  if (problems.some((p) => p !== null)) throw new DistUnavailable(`NCCL cannot be used (${summarize(problems)}); ${HOST_PATH}`);
  await group.broadcast(id, 0);

  const be = backend as CudaBackend;
  let comm = -1;
  try {
    comm = onDevice(be, (a) => a.ncclCommInit(id, group.size, group.rank));
    problem = null;
  } catch (e) {
    problem = `ncclCommInit on cuda:${be.device} failed: ${(e as Error).message}`;
  }
  const joined = await agree(group, problem);
  if (joined.some((p) => p !== null)) {
    if (comm >= 0) onDevice(be, (a) => a.ncclCommDestroy(comm));
    throw new DistUnavailable(`NCCL cannot be used (${summarize(joined)}); ${HOST_PATH}`);
  }

  const probe = be.addon.ncclProbe();
  const version = probe.version === null ? 'version unknown' : ncclVersionText(probe.version);
  let open = true;
  /** t's device address, after the checks every collective makes. */
  const ptrOf = (t: Tensor, what: string): bigint => {
    if (!open) throw new InvalidArgument(`${what}: the NCCL communicator was closed`);
    if (t.backend !== be) throw new InvalidArgument(`${what}: ${t} is not on ${be.name}, where NCCL was opened`);
    if (t.dtype !== 'f32') throw new InvalidArgument(`${what}: ${t} is ${t.dtype}; NCCL collectives here take f32 tensors only`);
    const s = t.storage;
    // a tensor (or a view: an aligned, contiguous range of its storage) is contiguous by construction
    if (s.kind !== 'cuda') throw new InvalidArgument(`${what}: ${t} has no CUDA storage`);
    return s.ptr;
  };
  return {
    description: `NCCL ${version} (${probe.path}) on cuda:${be.device}, rank ${group.rank} of ${group.size}`,
    allReduceSum(t) {
      const ptr = ptrOf(t, 'allReduceSum');
      onDevice(be, (a) => a.ncclAllReduce(comm, ptr, t.numel));
    },
    broadcast(t, root) {
      const ptr = ptrOf(t, 'broadcast');
      if (!Number.isInteger(root) || root < 0 || root >= group.size)
        throw new InvalidArgument(`broadcast: root ${root} is not a rank of this group (0..${group.size - 1})`);
      onDevice(be, (a) => a.ncclBroadcast(comm, ptr, t.numel, root));
    },
    close() {
      if (!open) return;
      open = false;
      onDevice(be, (a) => a.ncclCommDestroy(comm));
    },
  };
}
