import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type StandInHub, startHub } from '../../test/util/hub';
import { mpiAddonPath } from '../dist/mpi';
import { STYLES, type StyleSpec } from '../mas/styles';
import { healthcheck, healthLevel, hfCacheCheck, hubFilesCheck, mpiCheck, stylesCheck, type HealthDeps } from './healthcheck';

const root = mkdtempSync(join(tmpdir(), 'rmas-health-'));
afterAll(() => rmSync(root, { recursive: true, force: true }));

/** A hub cache folder holding `repos` (as the hub client lays them out: models--Org--Name/snapshots). */
function hubCache(name: string, repos: string[]): string {
  const dir = join(root, name);
  for (const r of repos) mkdirSync(join(dir, `models--${r.replace('/', '--')}`, 'snapshots'), { recursive: true });
  mkdirSync(join(dir, 'datasets--openai--gsm8k'), { recursive: true }); // not a model: not counted
  return dir;
}

const OUTER_FILES = ['.gitattributes', 'README.md', 'outer_12(math).pt', 'outer_23(math).pt', 'outer_31(math).pt', 'outerlink_config.json'];
const PROBE = 'RecursiveMAS/Sequential-Light-Outerlinks';

/** A folder holding `files` (a few bytes each), to serve as a repo of the stand-in hub. */
function repoDir(name: string, files: string[]): string {
  const dir = join(root, name);
  mkdirSync(dir, { recursive: true });
  for (const f of files) writeFileSync(join(dir, f), `${f}\n`);
  return dir;
}

let hub: StandInHub;
beforeAll(async () => {
  hub = await startHub({ repos: [
    { id: PROBE, dir: repoDir('outer', OUTER_FILES) },
    { id: 'HuggingFaceH4/MATH-500', dir: repoDir('math500', ['README.md', 'test.jsonl']), type: 'dataset' },
    { id: 'RecursiveMAS/Long', dir: repoDir('long', Array.from({ length: 15 }, (_, i) => `f${i}.pt`)) },
    { id: 'RecursiveMAS/Gated', dir: repoDir('gated', ['config.json']), gated: true },
  ] });
});
afterAll(() => hub.close());

const deps = (over: Partial<HealthDeps> = {}): HealthDeps => ({
  webgpu: async () => { throw new Error('no webgpu in this test'); },
  cuda: async () => { throw new Error('no cuda in this test'); },
  hub: { endpoint: hub.url },
  hfHubCache: hubCache('empty', []),
  ...over,
});

const offline = async (): Promise<never> => { throw Object.assign(new Error('fetch failed'), { cause: { code: 'ENOTFOUND' } }); };

describe('healthcheck level', () => {
  it('defaults to 3, as upstream\'s; anything but 1, 2, 3 is refused', () => {
    expect(healthLevel(undefined)).toBe(3);
    expect(['1', '2', '3'].map(healthLevel)).toEqual([1, 2, 3]);
    expect(['0', '4', 'x', ''].map(healthLevel)).toEqual([null, null, null, null]);
  });
});

describe('healthcheck level 3', () => {
  it('lists the Sequential-Light outer links\' files and MATH-500\'s through the hub client, with the token', async () => {
    const from = hub.log.length;
    const r = await healthcheck(3, deps({ hub: { endpoint: hub.url, token: 'hf_secret_never_shown' } }));
    const [sha, data] = [hub.commit(PROBE), hub.commit('datasets/HuggingFaceH4/MATH-500')];
    expect(hub.log.slice(from).map((q) => [q.method, q.path, q.authorization])).toEqual([
      ['GET', `/api/models/${PROBE}/revision/main`, 'Bearer hf_secret_never_shown'],
      ['GET', `/api/models/${PROBE}/tree/${sha}?recursive=true`, 'Bearer hf_secret_never_shown'],
      ['GET', '/api/datasets/HuggingFaceH4/MATH-500/revision/main', 'Bearer hf_secret_never_shown'],
      ['GET', `/api/datasets/HuggingFaceH4/MATH-500/tree/${data}?recursive=true`, 'Bearer hf_secret_never_shown'],
    ]);
    const by = Object.fromEntries(r.checks.map((c) => [c.name, c]));
    expect(by.huggingface).toEqual({
      level: 3,
      name: 'huggingface',
      status: 'ok',
      detail: `${PROBE} at ${sha.slice(0, 12)} on ${hub.url}: 6 files (${OUTER_FILES.join(', ')})`,
    });
    expect(by.datasets).toEqual({
      level: 3,
      name: 'datasets',
      status: 'ok',
      detail: `HuggingFaceH4/MATH-500 at ${data.slice(0, 12)} on ${hub.url}: 2 files (README.md, test.jsonl)`,
    });
    // levels include the ones below: cpu's allocation and the cache are checked too
    expect(by.cpu!.status).toBe('ok');
    expect(by['hf-cache']!.level).toBe(1);
    expect(r.ok).toBe(true);
    expect(JSON.stringify(r)).not.toContain('hf_secret');
  });

  it('a long listing shows its first 12 files and how many more; no token, no authorization header', async () => {
    const from = hub.log.length;
    const c = await hubFilesCheck({ hub: { endpoint: hub.url } }, 'RecursiveMAS/Long');
    expect(hub.log.slice(from).map((q) => q.authorization)).toEqual([null, null]);
    const files = Array.from({ length: 15 }, (_, i) => `f${i}.pt`).sort();
    expect(c.detail).toBe(
      `RecursiveMAS/Long at ${hub.commit('RecursiveMAS/Long').slice(0, 12)} on ${hub.url}: 15 files (${files.slice(0, 12).join(', ')}, … 3 more)`,
    );
  });

  it('warns offline, without failing, with what must come from local files instead; HF_HUB_OFFLINE asks nothing', async () => {
    const r = await healthcheck(3, deps({ fetch: offline, hub: { endpoint: 'https://huggingface.co' } }));
    expect(r.ok).toBe(true);
    const by = Object.fromEntries(r.checks.map((c) => [c.name, c]));
    expect(by.huggingface).toEqual({
      level: 3,
      name: 'huggingface',
      status: 'warn',
      detail: 'offline: https://huggingface.co did not answer (ENOTFOUND); models must come from local folders or the cache',
    });
    expect(by.datasets).toEqual({
      level: 3,
      name: 'datasets',
      status: 'warn',
      detail: 'offline: https://huggingface.co did not answer (ENOTFOUND); datasets and benchmarks must come from local files ' +
        '(--dataset_name FILE, --dataset_file) or the cache',
    });
    const slow = await hubFilesCheck({
      hub: { endpoint: hub.url },
      fetch: async () => { throw Object.assign(new Error('t'), { name: 'TimeoutError' }); },
    });
    expect(slow.detail).toBe(`offline: ${hub.url} did not answer (no answer within 5 s); models must come from local folders or the cache`);
    const from = hub.log.length;
    expect(await hubFilesCheck({ hub: { endpoint: hub.url, offline: true } })).toEqual({
      level: 3, name: 'huggingface', status: 'warn',
      detail: `HF_HUB_OFFLINE is set: ${hub.url} was not asked; models must come from local folders or the cache`,
    });
    expect(hub.log.length).toBe(from);
  });

  it('fails when the hub refuses or answers without the listing: a missing repository, a gated one, a body without a commit', async () => {
    expect(await hubFilesCheck({ hub: { endpoint: hub.url } }, 'RecursiveMAS/Absent')).toEqual({
      level: 3, name: 'huggingface', status: 'fail',
      detail: `RepoNotFound: RecursiveMAS/Absent does not exist on ${hub.url} (HTTP 401 RepoNotFound): check the repo id and HF_ENDPOINT; ` +
        'a private repo needs an access token (HF_TOKEN for the runner, the token field under Environment in the page)',
    });
    const gated = await hubFilesCheck({ hub: { endpoint: hub.url } }, 'RecursiveMAS/Gated');
    expect([gated.status, gated.detail.split(':')[0]]).toEqual(['fail', 'GatedRepo']);
    expect((await hubFilesCheck({ hub: { endpoint: hub.url, token: hub.token } }, 'RecursiveMAS/Gated')).status).toBe('ok');
    const noSha = await hubFilesCheck({ hub: { endpoint: hub.url }, fetch: async () => new Response('{"id":"x"}') });
    expect(noSha).toEqual({ level: 3, name: 'huggingface', status: 'fail',
      detail: `DownloadFailed: ${hub.url}/api/models/${PROBE}/revision/main names no commit; HF_ENDPOINT must be a Hugging Face hub` });
    const r = await healthcheck(3, deps({ hub: { endpoint: hub.url }, fetch: async () => new Response('', { status: 404 }) }));
    expect(r.ok).toBe(false);
  });
});

describe('healthcheck level 1', () => {
  it('lists the decoder families, and every released style as registered and runnable', async () => {
    const r = await healthcheck(1, deps({ fetch: offline }));
    const by = Object.fromEntries(r.checks.map((c) => [c.name, c]));
    expect(by.families).toEqual({
      level: 1,
      name: 'families',
      status: 'ok',
      detail: 'decoders: llama, qwen2, qwen3, mistral, gemma3, qwen3_5',
    });
    expect(by.styles).toEqual({
      level: 1,
      name: 'styles',
      status: 'ok',
      detail:
        '5 styles registered, all runnable: sequential_light, sequential_scaled, mixture, distillation, deliberation; embedded: tiny_sequential, tiny_distillation, tiny_recursion',
    });
    expect(r.checks.every((c) => c.level === 1)).toBe(true);
  });

  it.runIf(existsSync(mpiAddonPath()))('reports the MPI addon built here with the library mpirun comes from', () => {
    const version = spawnSync('mpirun', ['--version'], { encoding: 'utf8' }).stdout.match(/\(Open MPI\) (\S+)/)![1];
    expect(mpiCheck()).toEqual({ level: 1, name: 'mpi', status: 'ok',
      detail: `${mpiAddonPath()}: Open MPI v${version}; mpirun runs train-*, run over ranks` });
  });

  it('warns that the MPI addon is not built, saying how to build it, or why it does not load', () => {
    const missing = join(root, 'none', 'rmas_mpi.node');
    expect(mpiCheck({ RMAS_MPI_ADDON: missing })).toEqual({ level: 1, name: 'mpi', status: 'warn',
      detail: `the MPI addon is not built (${missing} is missing); install Open MPI (Debian: apt-get install openmpi-bin ` +
        'libopenmpi-dev, or npm run setup:system) and run npm run build:mpi; a single process does not need it, mpirun with several ' +
        'ranks does' });
    const junk = join(root, 'junk.node');
    writeFileSync(junk, 'not a shared object');
    const bad = mpiCheck({ RMAS_MPI_ADDON: junk });
    expect([bad.status, bad.detail.startsWith(`the MPI addon at ${junk} does not load (`)]).toEqual(['warn', true]);
  });

  it('reports a style whose backbones the engine cannot run as not runnable, not as registered', () => {
    const mamba: StyleSpec = {
      ...STYLES.mixture,
      roles: STYLES.mixture.roles.map((r) => (r.key === 'science' ? { ...r, modelType: 'mamba' } : r)),
    };
    const c = stylesCheck({
      ...STYLES,
      mixture: mamba,
      distillation: { ...STYLES.distillation, roles: STYLES.distillation.roles.map((r) => ({ ...r, modelType: 'rwkv' })) },
    });
    expect(c).toEqual({
      level: 1,
      name: 'styles',
      status: 'warn',
      detail:
        '3 of 5 styles runnable: sequential_light, sequential_scaled, deliberation; not runnable, their released backbones need decoders this engine lacks: ' +
        'mixture (science: mamba); distillation (expert: rwkv, learner: rwkv) (give those roles models of a family it runs: --ckpt_override ROLE=DIR); embedded: tiny_sequential, tiny_distillation, tiny_recursion',
    });
    expect(stylesCheck({ ...STYLES, mixture: { ...STYLES.mixture, roles: [] } })).toEqual({
      level: 1,
      name: 'styles',
      status: 'fail',
      detail: 'registry broken: no roles in mixture',
    });
  });

  it('counts the models in the Hugging Face cache and names the styles cached whole', async () => {
    const light = [...STYLES.sequential_light.roles.map((r) => r.repo), STYLES.sequential_light.outerRepo];
    const dir = hubCache('light', [...light, 'Qwen/Qwen3-1.7B', STYLES.mixture.roles[0]!.repo]);
    expect(await hfCacheCheck(dir)).toEqual({
      level: 1,
      name: 'hf-cache',
      status: 'ok',
      detail: `${dir}: 6 models; styles cached whole: sequential_light`,
    });
    const one = hubCache('one', ['Qwen/Qwen3-1.7B']);
    expect((await hfCacheCheck(one)).detail).toBe(`${one}: 1 model; styles cached whole: none`);
    const none = join(root, 'absent');
    expect(await hfCacheCheck(none)).toEqual({
      level: 1,
      name: 'hf-cache',
      status: 'ok',
      detail: `${none}: no cache yet (0 models); released styles download there on first use`,
    });
    // healthcheck reads the folder it is given
    const r = await healthcheck(1, deps({ hfHubCache: dir }));
    expect(r.checks.find((c) => c.name === 'hf-cache')!.detail).toBe(`${dir}: 6 models; styles cached whole: sequential_light`);
  });
});
