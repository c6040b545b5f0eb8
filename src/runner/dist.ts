/**
 * The runner's side of a job under mpirun (docs/distributed.md): the process group, opened once by the
 * commands that split work (train-inner, train-outer, run); what a rank says when the launcher stops it; and
 * which GPUs of --devices each rank of a machine takes.
 */
import { RankLost, UsageError } from '../errors';
import type { ProcessGroup } from '../dist/group';
import { openProcessGroup } from '../dist/mpi';

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
