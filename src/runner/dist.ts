/**
 * The runner's side of a job under mpirun (docs/distributed.md): the process group, opened once by the
 * commands that split work (train-inner, train-outer, run); what a rank says when the launcher stops it; and
 * which GPUs of --devices each rank of a machine takes.
 */
import type { FlatParams } from '../autograd/params';
import type { ProcessGroup } from '../dist/group';
import { openProcessGroup } from '../dist/mpi';
import { openNccl, type DeviceCollectives } from '../dist/nccl';
import { DistUnavailable, RankLost, UsageError } from '../errors';

let group: ProcessGroup | null = null;
let resumeNote: () => string = () => '';

/**
 * This process's group (world size 1 without a launcher). With several ranks, SIGTERM and SIGINT (mpirun
 * stops the job so when another rank fails, or on Ctrl-C) print a RankLost line with the resume note.
 */
export function processGroup(err: (s: string) => void): ProcessGroup {
  if (group) return group;
  const g = openProcessGroup();
  group = g;
  if (g.size > 1) {
    err(`rank ${g.rank} of ${g.size} (local ${g.localRank} of ${g.localSize}): pid ${process.pid}, ${g.description}\n`);
    for (const sig of ['SIGTERM', 'SIGINT'] as const) {
      process.on(sig, () => {
        err(`rmas: RankLost: rank ${g.rank} of ${g.size} was stopped by the launcher (${sig}): another rank failed or the job was ` +
          `cancelled${resumeNote()}\n`);
        process.exit(sig === 'SIGINT' ? 130 : 143);
      });
    }
  }
  return g;
}

/** Closes the group if one was opened (MPI_Finalize). */
export function closeProcessGroup() {
  group?.close();
}

/** What a stopped rank adds: where to resume from ("; …"). Set by the command as it makes progress. */
export function setResumeNote(note: () => string) {
  resumeNote = note;
}

/** A RankLost error with the command's resume note appended, for errors raised by a failed collective. */
export function withResumeNote(e: unknown): unknown {
  return e instanceof RankLost ? new RankLost(`${e.message}${resumeNote()}`) : e;
}

/**
 * The devices of one rank: with L ranks on this machine, local rank l takes the l-th of L equal slices of
 * --devices (all of them with one rank); without --devices, cuda ranks take device l.
 */
export function rankDevices(ids: number[] | null | undefined, backend: string | undefined, g: Pick<ProcessGroup, 'localRank' | 'localSize'>,
): number[] | undefined {
  if (g.localSize <= 1) return ids ?? undefined;
  if (!ids) return backend === 'cuda' ? [g.localRank] : undefined;
  if (ids.length % g.localSize !== 0) {
    throw new UsageError(
      `--devices ${ids.join(',')}: ${g.localSize} ranks run on this machine, so each takes an equal share; give a multiple of ${g.localSize} devices`,
    );
  }
  const per = ids.length / g.localSize;
  return ids.slice(g.localRank * per, (g.localRank + 1) * per);
}

/**
 * The device collectives of a data-parallel run (RMAS_COLLECTIVES: auto, the default, nccl or host). On the cuda
 * backend, with every trained link on one device, the gradients are summed by NCCL in device memory; NCCL missing
 * is then DistUnavailable, which names RMAS_COLLECTIVES=host (MPI on host buffers) as the way on without it. Other
 * backends, and links spread over several GPUs of a rank (train-outer --devices), take the host path.
 */
export async function gradientCollectives(
  g: ProcessGroup, params: readonly FlatParams[], say: (s: string) => void, env: NodeJS.ProcessEnv = process.env,
): Promise<DeviceCollectives | undefined> {
  const choice = (env.RMAS_COLLECTIVES ?? 'auto').trim().toLowerCase();
  if (!['auto', 'nccl', 'host'].includes(choice))
    throw new UsageError(`RMAS_COLLECTIVES=${env.RMAS_COLLECTIVES}: expected auto, nccl or host`);
  if (g.size === 1 || choice === 'host') return undefined;
  const backends = [...new Set(params.map((p) => p.backend))];
  const cuda = backends.length === 1 && backends[0]!.kind === 'cuda';
  if (!cuda) {
    if (choice === 'nccl') {
      throw new DistUnavailable(`RMAS_COLLECTIVES=nccl needs every trained link on one CUDA device; this run has them on ` +
        `${backends.map((b) => b.name).join(', ')}; unset it to sum the gradients on the host`);
    }
    return undefined;
  }
  try {
    const d = await openNccl(g, backends[0]!);
    say(`gradients summed by ${d.description}\n`);
    return d;
  } catch (e) {
    if (!(e instanceof DistUnavailable)) throw e;
    throw new DistUnavailable(`${e.message}. Install NCCL (Debian/Ubuntu: libnccl2 from NVIDIA's CUDA repository, or set ` +
      'RMAS_NCCL=/path/to/libnccl.so.2), or set RMAS_COLLECTIVES=host to sum the gradients on the host over MPI');
  }
}
