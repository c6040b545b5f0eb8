/**
 * The MPI process group (Node only): rank and world size from the launcher's environment, collectives through
 * the MPI addon (native/mpi, built by scripts/build-mpi.mjs against Open MPI). A process that no launcher
 * started, or one started as a world of 1, gets singleProcess() and never loads MPI.
 *
 * The addon's collectives are non-blocking; `finish` polls them between turns of the event loop (the first
 * polls at once, then every millisecond), so a rank waiting for a slower peer still handles signals. A failed
 * collective (a peer died: MPI_ERRORS_RETURN) is RankLost.
 */
import { existsSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { DistUnavailable, RankLost } from '../errors';
import { singleProcess, type HostBuffer, type NumericBuffer, type ProcessGroup, type ReduceOp } from './group';

/** The exports of rmas_mpi.node (native/mpi/src/addon.cc); each collective returns a request id for test(). */
export interface MpiAddon {
  init(): { rank: number; size: number; localRank: number; localSize: number; host: string; thread: number; library: string };
  /** The MPI library's version line ("Open MPI v4.1.4"); needs no MPI_Init. */
  library(): string;
  allreduce(data: NumericBuffer, op: ReduceOp): number;
  bcast(data: HostBuffer, root: number): number;
  allgather(send: HostBuffer, recv: HostBuffer): number;
  allgatherv(send: Uint8Array, recv: Uint8Array, counts: Int32Array): number;
  barrier(): number;
  /** True once the request completed; throws (an Error with mpiCode) when it failed. */
  test(id: number): boolean;
  finalize(): void;
  abort(code: number): void;
}

/** Where a launcher said this process stands, and which variables said it. */
export interface LauncherWorld {
  rank: number;
  size: number;
  localRank: number;
  /** The variables read: OMPI_COMM_WORLD_* (Open MPI's mpirun), PMI_* (MPICH's Hydra, Intel MPI) or RANK/WORLD_SIZE. */
  source: string;
}

const root = resolve(dirname(fileURLToPath(import.meta.url)), '../..');
/** Where the build puts the addon; RMAS_MPI_ADDON (a path) overrides it. */
export const mpiAddonPath = (env: NodeJS.ProcessEnv = process.env): string =>
  env.RMAS_MPI_ADDON ? resolve(env.RMAS_MPI_ADDON) : resolve(root, 'native/mpi/build/rmas_mpi.node');

function intVar(env: NodeJS.ProcessEnv, name: string): number | null {
  const v = env[name];
  if (v === undefined || v === '') return null;
  if (!/^\d+$/.test(v.trim())) throw new DistUnavailable(`${name}=${v}: expected a non-negative integer (set by the launcher)`);
  return Number(v);
}

/** The launcher's view of this process, or null when no launcher set one (a single process). */
export function launcherWorld(env: NodeJS.ProcessEnv = process.env): LauncherWorld | null {
  const schemes = [
    ['OMPI_COMM_WORLD_RANK', 'OMPI_COMM_WORLD_SIZE', 'OMPI_COMM_WORLD_LOCAL_RANK'],
    ['PMI_RANK', 'PMI_SIZE', 'MPI_LOCALRANKID'],
    ['RANK', 'WORLD_SIZE', 'LOCAL_RANK'],
  ] as const;
  for (const [r, s, l] of schemes) {
    const rank = intVar(env, r);
    const size = intVar(env, s);
    if (rank === null && size === null) continue;
    if (rank === null || size === null)
      throw new DistUnavailable(`${rank === null ? s : r} is set but ${rank === null ? r : s} is not; a launcher sets both`);
    if (size < 1 || rank >= size) throw new DistUnavailable(`${r}=${rank} with ${s}=${size}: the rank must be below the world size`);
    return { rank, size, localRank: intVar(env, l) ?? rank, source: `${r}/${s}` };
  }
  return null;
}

const loaded = new Map<string, MpiAddon>();
const how = 'install Open MPI (Debian: apt-get install openmpi-bin libopenmpi-dev, or npm run setup:system) and run npm run build:mpi';

/** The addon, loaded once per path; DistUnavailable says how to build it. */
export function loadMpiAddon(env: NodeJS.ProcessEnv = process.env): MpiAddon {
  const path = mpiAddonPath(env);
  const known = loaded.get(path);
  if (known) return known;
  if (!existsSync(path))
    throw new DistUnavailable(`this job has several ranks, but the MPI addon is not built (${path} is missing); ${how}`);
  try {
    const addon = createRequire(import.meta.url)(path) as MpiAddon;
    loaded.set(path, addon);
    return addon;
  } catch (e) {
    throw new DistUnavailable(`the MPI addon at ${path} does not load (${(e as Error).message}); ${how}, then npm run build:mpi -- --force`);
  }
}

/** What `rmas healthcheck` reports of the addon: built, loading, and the MPI library it links; never throws. */
export function mpiStatus(env: NodeJS.ProcessEnv = process.env): { path: string; library: string | null; error: string | null } {
  const path = mpiAddonPath(env);
  if (!existsSync(path)) return { path, library: null, error: `the MPI addon is not built (${path} is missing); ${how}` };
  try {
    return { path, library: loadMpiAddon(env).library(), error: null };
  } catch (e) {
    return { path, library: null, error: (e as Error).message };
  }
}

/**
 * The process group of this process: singleProcess() without a launcher (or a world of 1), else the MPI
 * world, checked against what the launcher said.
 */
export function openProcessGroup(env: NodeJS.ProcessEnv = process.env): ProcessGroup {
  const said = launcherWorld(env);
  if (!said || said.size === 1) return singleProcess();
  const mpi = loadMpiAddon(env);
  let w: ReturnType<MpiAddon['init']>;
  try {
    w = mpi.init();
  } catch (e) {
    throw new DistUnavailable(`MPI_Init failed (${(e as Error).message}); launch with mpirun -np ${said.size} from the same Open MPI`);
  }
  if (w.size !== said.size || w.rank !== said.rank) {
    mpi.finalize();
    throw new DistUnavailable(
      `${said.source} say rank ${said.rank} of ${said.size}, but MPI formed rank ${w.rank} of ${w.size}: this launcher does not start ` +
        `MPI jobs; launch with mpirun -np ${said.size} (or srun with MPI support)`,
    );
  }
  return new MpiGroup(mpi, w);
}

class MpiGroup implements ProcessGroup {
  readonly rank: number;
  readonly size: number;
  readonly localRank: number;
  readonly localSize: number;
  readonly description: string;
  private closed = false;

  constructor(private readonly mpi: MpiAddon, w: ReturnType<MpiAddon['init']>) {
    this.rank = w.rank;
    this.size = w.size;
    this.localRank = w.localRank;
    this.localSize = w.localSize;
    this.description = `${w.library.trim()} on ${w.host}`;
  }

  /** Waits for request `id`, polling MPI between turns of the event loop. */
  private async finish(id: number, what: string): Promise<void> {
    for (let polls = 0; ; polls++) {
      let done: boolean;
      try {
        done = this.mpi.test(id);
      } catch (e) {
        throw new RankLost(
          `rank ${this.rank} of ${this.size}: ${what} failed (${(e as Error).message}): another rank has stopped, so this one stops too`,
        );
      }
      if (done) return;
      await new Promise<void>((r) => (polls < 64 ? setImmediate(r) : setTimeout(r, 1)));
    }
  }

  private call(what: string, start: () => number): Promise<void> {
    if (this.closed) throw new DistUnavailable(`${what} after the process group was closed`);
    return this.finish(start(), what);
  }

  async allReduce<T extends NumericBuffer>(data: T, op: ReduceOp = 'sum'): Promise<T> {
    await this.call('all-reduce', () => this.mpi.allreduce(data, op));
    return data;
  }

  async broadcast<T extends HostBuffer>(data: T, root = 0): Promise<T> {
    await this.call('broadcast', () => this.mpi.bcast(data, root));
    return data;
  }

  async allGather(bytes: Uint8Array): Promise<Uint8Array[]> {
    const counts = new Int32Array(this.size);
    await this.call('all-gather', () => this.mpi.allgather(Int32Array.of(bytes.length), counts));
    const recv = new Uint8Array(counts.reduce((a, b) => a + b, 0));
    await this.call('all-gather', () => this.mpi.allgatherv(bytes, recv, counts));
    const out: Uint8Array[] = [];
    let at = 0;
    for (const c of counts) {
      out.push(recv.slice(at, at + c));
      at += c;
    }
    return out;
  }

  barrier(): Promise<void> {
    return this.call('barrier', () => this.mpi.barrier());
  }

  close() {
    if (this.closed) return;
    this.closed = true;
    this.mpi.finalize();
  }
}
