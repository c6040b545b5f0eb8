/**
 * `rmas healthcheck --level 1|2|3` (upstream's health check, for this runner):
 *   1  dependencies present (Node version, webgpu, tokenizers, python3 for code benchmarks) and the styles registered;
 *   2  + devices: a test allocation and read-back per backend (cpu, webgpu, cuda);
 *   3  + Hugging Face reachability (the hub, and the datasets rows API that training data and benchmarks come through).
 * Levels include the ones below. A check is ok, warn (a backend that is unavailable here: the runner falls back)
 * or fail; the exit code is 1 when any check fails. Never throws for what it checks.
 */
import { spawnSync } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { Backend } from '../tensor/backend';
import { CpuBackend } from '../tensor/cpu';
import { STYLES, DEFAULT_STYLE, unrunnableRoles } from '../mas/styles';
import { FAMILIES } from '../model/config';
import { cudaStatus } from '../gpu/cuda-addon';
import { ROWS_API } from '../train/data/rows';

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
  /** HEAD request with a timeout; resolves to the HTTP status. */
  head(url: string, timeoutMs: number): Promise<number>;
}

const MIN_NODE = [20, 19];

function nodeCheck(): Check {
  const [maj, min] = process.versions.node.split('.').map(Number);
  const ok = maj > MIN_NODE[0] || (maj === MIN_NODE[0] && min >= MIN_NODE[1]);
  return { level: 1, name: 'node', status: ok ? 'ok' : 'fail', detail: ok ? `Node ${process.versions.node}` : `Node ${process.versions.node}; the runner needs ${MIN_NODE.join('.')} or later` };
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
    return { level: 1, name: pkg, status: 'fail', detail: `${what}: ${pkg} is not installed (${(e as Error).message.split('\n')[0]}); run npm install` };
  }
}

function stylesCheck(): Check {
  const names = Object.keys(STYLES);
  const empty = names.filter((n) => !STYLES[n as keyof typeof STYLES].roles.length);
  const ok = names.length > 0 && !empty.length && names.includes(DEFAULT_STYLE);
  return {
    level: 1, name: 'styles', status: ok ? 'ok' : 'fail',
    detail: ok ? `${names.length} registered: ${names.join(', ')}` : `registry broken: ${empty.length ? `no roles in ${empty.join(', ')}` : `default ${DEFAULT_STYLE} missing`}`,
  };
}

/** The decoder families the engine runs, and the styles whose released backbones need one it does not (a warning). */
function familiesCheck(): Check {
  const lacking = Object.values(STYLES).flatMap((s) => {
    const types = [...new Set(unrunnableRoles(s).map((r) => r.modelType))];
    return types.length ? [`${s.name} (${types.join(', ')})`] : [];
  });
  return {
    level: 1, name: 'families', status: lacking.length ? 'warn' : 'ok',
    detail: `decoders: ${FAMILIES.join(', ')}${lacking.length ? `; released backbones not runnable yet: ${lacking.join(', ')} (give those roles models of these families)` : ''}`,
  };
}

/** python3 runs the answers of code benchmarks (rmas run) and deliberation's Python tool; without it only those fail. */
export function pythonCheck(python = 'python3'): Check {
  const r = spawnSync(python, ['--version'], { encoding: 'utf8', timeout: 20_000 });
  const version = `${r.stdout ?? ''}${r.stderr ?? ''}`.trim();
  if (r.status === 0 && /^Python 3\./.test(version)) return { level: 1, name: 'python', status: 'ok', detail: `${python}: ${version}` };
  const why = r.error ? (r.error as NodeJS.ErrnoException).code ?? r.error.message : version || `exit ${r.status}`;
  return {
    level: 1, name: 'python', status: 'warn',
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
    return { level: 2, name, status: required ? 'fail' : 'warn', detail: `unavailable: ${err?.name ?? 'Error'}: ${err?.message ?? String(e)}` };
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
  const versions = p ? `runtime ${p.runtimeVersion}, driver ${p.driverVersion || 'none'}, cuBLASLt ${p.cublasLt ?? 'missing'}` : 'does not load';
  const devices = p?.devices.map((d) => `${d.name} (sm_${d.major}${d.minor}, ${(d.totalMem / 2 ** 30).toFixed(0)} GiB)`).join(', ');
  return { level: 2, name: 'cuda-addon', status: s.hint ? 'warn' : 'ok', detail: `${s.path}: ${versions}${devices ? `; ${devices}` : ''}${s.hint ? `; ${s.hint}` : ''}` };
}

/** A HEAD of `url` within 5 s: reachable (any status below 500) or not, and what depends on it. */
async function reachCheck(deps: HealthDeps, name: string, url: string, offline: string): Promise<Check> {
  try {
    const status = await deps.head(url, 5000);
    const ok = status < 500;
    return { level: 3, name, status: ok ? 'ok' : 'fail', detail: `HEAD ${url}: HTTP ${status}` };
  } catch (e) {
    const err = e as Error & { cause?: { code?: string } };
    const why = err.name === 'TimeoutError' || err.name === 'AbortError' ? 'no answer within 5 s' : (err.cause?.code ?? err.message);
    return { level: 3, name, status: 'fail', detail: `offline: HEAD ${url} failed (${why}); ${offline}` };
  }
}

export async function healthcheck(level: 1 | 2 | 3, deps: HealthDeps): Promise<HealthReport> {
  const checks: Check[] = [nodeCheck(), packageCheck('webgpu', 'WebGPU (Dawn)'), packageCheck('@huggingface/transformers', 'tokenizers'), pythonCheck(), stylesCheck(), familiesCheck()];
  if (level >= 2) {
    checks.push(await backendCheck('cpu', async () => ({ backend: new CpuBackend('f32') }), true));
    checks.push(await backendCheck('webgpu', deps.webgpu, false));
    checks.push(cudaAddonCheck());
    checks.push(await backendCheck('cuda', async () => ({ backend: await deps.cuda() }), false));
  }
  if (level >= 3) {
    checks.push(await reachCheck(deps, 'huggingface', 'https://huggingface.co', 'models must come from local folders or the cache'));
    checks.push(await reachCheck(deps, 'datasets', `${new URL(ROWS_API).origin}/`, 'datasets and benchmarks must come from local files (--dataset_name FILE, --dataset_file) or the cache'));
  }
  return { level, ok: checks.every((c) => c.status !== 'fail'), checks };
}

export function formatReport(r: HealthReport): string {
  const lines = r.checks.map((c) => `${c.status.padEnd(4)}  ${c.name}: ${c.detail}`);
  const warns = r.checks.filter((c) => c.status === 'warn').length;
  const fails = r.checks.filter((c) => c.status === 'fail').length;
  lines.push(`healthcheck level ${r.level}: ${r.ok ? 'passed' : 'FAILED'} (${r.checks.length} checks, ${warns} warnings, ${fails} failures)`);
  return `${lines.join('\n')}\n`;
}
