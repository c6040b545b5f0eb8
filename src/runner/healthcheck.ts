/**
 * `rmas healthcheck --level 1|2|3` (upstream's healthcheck.py, for this runner; level 3 by default, as upstream's):
 *   1  dependencies present (Node version, webgpu, tokenizers, python3 for code benchmarks, the MPI addon for
 *      multi-rank runs), the styles registered and whether their backbones run here, and the models in the
 *      Hugging Face cache;
 *   2  + devices: a test allocation and read-back per backend (cpu, webgpu, cuda);
 *   3  + the hub (HF_ENDPOINT, HF_TOKEN): the files of RecursiveMAS/Sequential-Light-Outerlinks (upstream's
 *      list_repo_files), and of HuggingFaceH4/MATH-500, the way training data and benchmarks come.
 * Levels include the ones below. A check is ok, warn (a backend that is unavailable here, or no network: the runner
 * falls back to local folders) or fail; the exit code is 1 when any check fails. Never throws for what it checks.
 */
import { spawnSync } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { readdir } from 'node:fs/promises';
import { homedir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { Cancelled, DownloadFailed } from '../errors';
import type { Backend } from '../tensor/backend';
import { CpuBackend } from '../tensor/cpu';
import { STYLES, DEFAULT_STYLE, unrunnableRoles, type StyleSpec } from '../mas/styles';
import { hfHubCacheDir } from '../store/hub-cache';
import { type HubSettings, hubSettingsFromEnv, listRepo } from '../store/hub';
import { FAMILIES } from '../model/config';
import { cudaStatus } from '../gpu/cuda-addon';
import { mpiStatus } from '../dist/mpi';

export type CheckStatus = 'ok' | 'warn' | 'fail';
export interface Check {
  level: 1 | 2 | 3;
  name: string;
  status: CheckStatus;
  detail: string;
}
export interface HealthReport {
  level: 1 | 2 | 3;
  ok: boolean;
  checks: Check[];
}

export interface HealthDeps {
  /** Opens the WebGPU backend (the runner's WebGpuBackend.create) and closes it again. */
  webgpu(): Promise<{ backend: Backend; close(): void }>;
  /** Opens the CUDA backend (CudaBackend.create). */
  cuda(): Promise<Backend>;
  /** fetch for the hub API (level 3). Default: global fetch. */
  fetch?(url: string, init?: RequestInit): Promise<Response>;
  /** The Hugging Face hub cache folder. Default: $HF_HUB_CACHE, else $HF_HOME/hub, else ~/.cache/huggingface/hub. */
  hfHubCache?: string;
  /** The hub's address, token and offline mode. Default: HF_ENDPOINT, HF_TOKEN, HF_HUB_OFFLINE. */
  hub?: HubSettings;
}

/** Upstream's `rmas healthcheck` level when --level is absent. */
export const DEFAULT_HEALTH_LEVEL = 3;

export const HEALTHCHECK_OPTIONS = { level: { type: 'string' }, json: { type: 'boolean' } } as const;

export const HEALTHCHECK_USAGE = `  rmas healthcheck [--level 1|2|3 (default 3, as upstream)] [--json]
      1: dependencies (python3 for code benchmarks a warning), styles and the models in the Hugging Face cache; 2: + a test allocation on
      cpu, webgpu and cuda; 3: + the files of RecursiveMAS/Sequential-Light-Outerlinks and of HuggingFaceH4/MATH-500 on the hub
      (HF_ENDPOINT, HF_TOKEN; a warning offline);
      exit 1 when a required check fails (an unavailable webgpu or cuda is a warning)`;

/** --level's value (absent: upstream's default, 3); null when it is not 1, 2 or 3. */
export function healthLevel(raw: string | undefined): 1 | 2 | 3 | null {
  const level = raw === undefined ? DEFAULT_HEALTH_LEVEL : Number(raw);
  return level === 1 || level === 2 || level === 3 ? level : null;
}

/** The repository upstream's level 3 lists. */
export const HUB_PROBE_REPO = 'RecursiveMAS/Sequential-Light-Outerlinks';
/** The dataset level 3 lists: MATH-500's, the benchmark `rmas run --dataset math500` fetches. */
export const DATASET_PROBE_REPO = 'HuggingFaceH4/MATH-500';

const MIN_NODE = [20, 19];

function nodeCheck(): Check {
  const [maj, min] = process.versions.node.split('.').map(Number);
  const ok = maj > MIN_NODE[0] || (maj === MIN_NODE[0] && min >= MIN_NODE[1]);
  return {
    level: 1,
    name: 'node',
    status: ok ? 'ok' : 'fail',
    detail: ok ? `Node ${process.versions.node}` : `Node ${process.versions.node}; the runner needs ${MIN_NODE.join('.')} or later`,
  };
}

function packageCheck(pkg: string, what: string): Check {
  try {
    // resolve the entry point (the package's exports may hide package.json), then walk up to its package.json
    let dir = dirname(fileURLToPath(import.meta.resolve(pkg)));
    for (;;) {
      const file = join(dir, 'package.json');
      if (existsSync(file)) {
        const meta = JSON.parse(readFileSync(file, 'utf8')) as { name?: string; version?: string };
        if (meta.name === pkg) return { level: 1, name: pkg, status: 'ok', detail: `${what}: ${pkg} ${meta.version ?? '?'}` };
      }
      if (dirname(dir) === dir) throw new Error(`no package.json of ${pkg} above its entry point`);
      dir = dirname(dir);
    }
  } catch (e) {
    return {
      level: 1,
      name: pkg,
      status: 'fail',
      detail: `${what}: ${pkg} is not installed (${(e as Error).message.split('\n')[0]}); run npm install`,
    };
  }
}

/**
 * The styles registered, and which of them the engine runs with their released backbones: a style with a role
 * whose model_type is not among the decoder families is reported as not runnable (a warning), not as registered.
 */
export function stylesCheck(styles: Readonly<Record<string, StyleSpec>> = STYLES): Check {
  const all = Object.values(styles);
  const empty = all.filter((s) => !s.roles.length).map((s) => s.name);
  if (!all.length || empty.length || !Object.hasOwn(styles, DEFAULT_STYLE)) {
    return {
      level: 1,
      name: 'styles',
      status: 'fail',
      detail: `registry broken: ${empty.length ? `no roles in ${empty.join(', ')}` : `default ${DEFAULT_STYLE} missing`}`,
    };
  }
  const released = all.filter((s) => !s.embedded);
  const lacking = released.flatMap((s) => {
    const roles = unrunnableRoles(s);
    return roles.length ? [`${s.name} (${roles.map((r) => `${r.key}: ${r.modelType}`).join(', ')})`] : [];
  });
  const runnable = released.filter((s) => !unrunnableRoles(s).length).map((s) => s.name);
  const embedded = all.filter((s) => s.embedded).map((s) => s.name);
  const tail = embedded.length ? `; embedded: ${embedded.join(', ')}` : '';
  if (!lacking.length)
    return {
      level: 1,
      name: 'styles',
      status: 'ok',
      detail: `${released.length} styles registered, all runnable: ${runnable.join(', ')}${tail}`,
    };
  return {
    level: 1, name: 'styles', status: 'warn',
    detail: `${runnable.length} of ${released.length} styles runnable${runnable.length ? `: ${runnable.join(', ')}` : ''}; ` +
      `not runnable, their released backbones need decoders this engine lacks: ${lacking.join('; ')} ` +
      `(give those roles models of a family it runs: --ckpt_override ROLE=DIR)${tail}`,
  };
}

/** The decoder families the engine runs. */
function familiesCheck(): Check {
  return { level: 1, name: 'families', status: 'ok', detail: `decoders: ${FAMILIES.join(', ')}` };
}

/**
 * The models in the Hugging Face hub cache (upstream counts `models--*` under $HF_HOME/hub), and the released
 * styles whose every repo is there (they ask offline). No cache yet is fine: models download there on first use.
 */
export async function hfCacheCheck(dir: string, styles: Readonly<Record<string, StyleSpec>> = STYLES): Promise<Check> {
  let names: string[];
  try {
    names = (await readdir(dir, { withFileTypes: true }))
      .filter((e) => e.isDirectory() && e.name.startsWith('models--'))
      .map((e) => e.name);
  } catch (e) {
    const code = (e as NodeJS.ErrnoException).code;
    if (code === 'ENOENT')
      return {
        level: 1,
        name: 'hf-cache',
        status: 'ok',
        detail: `${dir}: no cache yet (0 models); released styles download there on first use`,
      };
    return { level: 1, name: 'hf-cache', status: 'warn', detail: `${dir}: unreadable (${code ?? (e as Error).message})` };
  }
  const have = new Set(names);
  const cached = Object.values(styles)
    .filter(
      (s) => !s.embedded && [...s.roles.map((r) => r.repo), s.outerRepo].every((repo) => have.has(`models--${repo.replace('/', '--')}`)),
    )
    .map((s) => s.name);
  return {
    level: 1,
    name: 'hf-cache',
    status: 'ok',
    detail: `${dir}: ${names.length} model${names.length === 1 ? '' : 's'}; styles cached whole: ${cached.length ? cached.join(', ') : 'none'}`,
  };
}

/** python3 runs the answers of code benchmarks (rmas run) and deliberation's Python tool; without it only those fail. */
export function pythonCheck(python = 'python3'): Check {
  const r = spawnSync(python, ['--version'], { encoding: 'utf8', timeout: 20_000 });
  const version = `${r.stdout ?? ''}${r.stderr ?? ''}`.trim();
  if (r.status === 0 && /^Python 3\./.test(version)) return { level: 1, name: 'python', status: 'ok', detail: `${python}: ${version}` };
  const why = r.error ? (r.error as NodeJS.ErrnoException).code ?? r.error.message : version || `exit ${r.status}`;
  return {
    level: 1,
    name: 'python',
    status: 'warn',
    detail: `${python} unavailable (${why}); code benchmarks (mbppplus, livecodebench) and deliberation's Python tool need Python 3 (apt-get install python3)`,
  };
}

/** Writes 4 values, reads them back, and compares. */
async function roundTrip(b: Backend): Promise<string> {
  const want = [1, -2.5, 3.25, 1e-3];
  const t = b.fromValues(want, [4]);
  try {
    const got = await t.read();
    await b.sync();
    if (want.some((v, i) => Math.fround(v) !== got[i])) throw new Error(`read back [${Array.from(got)}] instead of [${want}]`);
    return `${b.name}: 16-byte allocation written and read back`;
  } finally {
    t.dispose();
  }
}

async function backendCheck(name: string, open: () => Promise<{ backend: Backend; close?(): void }>, required: boolean): Promise<Check> {
  let opened: { backend: Backend; close?(): void } | null = null;
  try {
    opened = await open();
    return { level: 2, name, status: 'ok', detail: await roundTrip(opened.backend) };
  } catch (e) {
    const err = e as Error;
    return {
      level: 2,
      name,
      status: required ? 'fail' : 'warn',
      detail: `unavailable: ${err?.name ?? 'Error'}: ${err?.message ?? String(e)}`,
    };
  } finally {
    try {
      opened?.close?.();
    } catch {
      // closing a half-open device is best effort
    }
  }
}

function cudaAddonCheck(): Check {
  const s = cudaStatus();
  if (!s.built) return { level: 2, name: 'cuda-addon', status: 'warn', detail: s.hint ?? 'not built' };
  const p = s.probe;
  const versions = p
    ? `runtime ${p.runtimeVersion}, driver ${p.driverVersion || 'none'}, cuBLASLt ${p.cublasLt ?? 'missing'}`
    : 'does not load';
  const devices = p?.devices.map((d) => `${d.name} (sm_${d.major}${d.minor}, ${(d.totalMem / 2 ** 30).toFixed(0)} GiB)`).join(', ');
  return {
    level: 2,
    name: 'cuda-addon',
    status: s.hint ? 'warn' : 'ok',
    detail: `${s.path}: ${versions}${devices ? `; ${devices}` : ''}${s.hint ? `; ${s.hint}` : ''}`,
  };
}

/** The MPI addon: only runs under mpirun with several ranks need it, so its absence is a warning. */
export function mpiCheck(env: NodeJS.ProcessEnv = process.env): Check {
  const s = mpiStatus(env);
  if (s.library) return { level: 1, name: 'mpi', status: 'ok', detail: `${s.path}: ${s.library}; mpirun runs train-*, run over ranks` };
  return { level: 1, name: 'mpi', status: 'warn', detail: `${s.error}; a single process does not need it, mpirun with several ranks does` };
}

const TIMEOUT_MS = 5000;

/** Why a request got no answer, in a few words. */
function noAnswer(e: unknown): string {
  const err = e as Error & { cause?: { code?: string } };
  return err.name === 'TimeoutError' || err.name === 'AbortError'
    ? `no answer within ${TIMEOUT_MS / 1000} s`
    : (err.cause?.code ?? err.message);
}

const SHOWN_FILES = 12;

/** What level 3 lists on the hub, and what must come from elsewhere when the hub does not answer. */
const PROBES = {
  huggingface: { repo: HUB_PROBE_REPO, type: 'model', need: 'models must come from local folders or the cache' },
  datasets: {
    repo: DATASET_PROBE_REPO, type: 'dataset',
    need: 'datasets and benchmarks must come from local files (--dataset_name FILE, --dataset_file) or the cache',
  },
} as const;

/**
 * Upstream's level 3: list_repo_files of the Sequential-Light outer links (and here also of a benchmark's dataset, which
 * `rmas run` fetches the same way), through the hub client the downloads use (HF_ENDPOINT, HF_TOKEN). No answer is a
 * warning (models then come from local folders or the cache), and so is offline mode; a refusal (gated, not found) or
 * an answer without the listing fails.
 */
export async function hubFilesCheck(
  deps: Pick<HealthDeps, 'fetch' | 'hub'>, repo: string = HUB_PROBE_REPO, name: keyof typeof PROBES = 'huggingface',
): Promise<Check> {
  const hub = deps.hub ?? hubSettingsFromEnv(process.env);
  const { type, need } = PROBES[name];
  const check = (status: Check['status'], detail: string): Check => ({ level: 3, name, status, detail });
  if (hub.offline) return check('warn', `HF_HUB_OFFLINE is set: ${hub.endpoint} was not asked; ${need}`);
  let files: string[];
  let commit: string;
  try {
    const r = await listRepo(hub, repo, {
      type, retries: 0, signal: AbortSignal.timeout(TIMEOUT_MS), ...(deps.fetch ? { fetch: deps.fetch as typeof fetch } : {}),
    });
    files = r.files.map((f) => f.path);
    commit = r.commit;
  } catch (e) {
    const err = e as Error;
    // no answer at all (as opposed to the hub's refusal): the runner can still work from local folders and the cache
    if ((err instanceof DownloadFailed || err instanceof Cancelled) && err.cause)
      return check('warn', `offline: ${hub.endpoint} did not answer (${noAnswer(err.cause)}); ${need}`);
    return check('fail', `${err.name}: ${err.message}`);
  }
  const shown = files.slice(0, SHOWN_FILES).join(', ');
  const more = files.length > SHOWN_FILES ? `, … ${files.length - SHOWN_FILES} more` : '';
  return check('ok', `${repo} at ${commit.slice(0, 12)} on ${hub.endpoint}: ${files.length} file${files.length === 1 ? '' : 's'}` +
    `${files.length ? ` (${shown}${more})` : ''}`);
}

export async function healthcheck(level: 1 | 2 | 3, deps: HealthDeps): Promise<HealthReport> {
  const checks: Check[] = [
    nodeCheck(),
    packageCheck('webgpu', 'WebGPU (Dawn)'),
    packageCheck('@huggingface/transformers', 'tokenizers'),
    pythonCheck(),
    mpiCheck(),
    stylesCheck(),
    familiesCheck(),
    await hfCacheCheck(deps.hfHubCache ?? hfHubCacheDir(process.env, homedir())),
  ];
  if (level >= 2) {
    checks.push(await backendCheck('cpu', async () => ({ backend: new CpuBackend('f32') }), true));
    checks.push(await backendCheck('webgpu', deps.webgpu, false));
    checks.push(cudaAddonCheck());
    checks.push(await backendCheck('cuda', async () => ({ backend: await deps.cuda() }), false));
  }
  if (level >= 3) {
    checks.push(await hubFilesCheck(deps));
    checks.push(await hubFilesCheck(deps, DATASET_PROBE_REPO, 'datasets'));
  }
  return { level, ok: checks.every((c) => c.status !== 'fail'), checks };
}

export function formatReport(r: HealthReport): string {
  const lines = r.checks.map((c) => `${c.status.padEnd(4)}  ${c.name}: ${c.detail}`);
  const warns = r.checks.filter((c) => c.status === 'warn').length;
  const fails = r.checks.filter((c) => c.status === 'fail').length;
  lines.push(
    `healthcheck level ${r.level}: ${r.ok ? 'passed' : 'FAILED'} (${r.checks.length} checks, ${warns} warnings, ${fails} failures)`,
  );
  return `${lines.join('\n')}\n`;
}
