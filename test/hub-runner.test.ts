/**
 * The released styles from nothing on disk to an answer through the hub client (issue 35's runner verification): each of
 * the five styles' tiny released-layout systems (scripts/tiny-system/hub-layout.ts) served by the stand-in hub, asked with
 * an empty HF_HOME; the same text and every dumped tensor as the same files given by --ckpt_override; a second run asks for
 * no file body; HF_HUB_OFFLINE=1 asks nothing. A download killed (SIGKILL) half-way through the largest file continues from
 * its last byte.
 */
import { spawn } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, readdirSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildHubSystem, type HubSystem } from '../scripts/tiny-system/hub-layout';
import { TINY_STYLES, type TinyStyle } from '../scripts/tiny-system/tiny-mas';
import { readDump } from './mas/ask-util';
import { type StandInHub, startHub } from './util/hub';
import { rmasInProcess } from './util/rmas';

const root = mkdtempSync(join(tmpdir(), 'rmas-hub-runner-'));
const systems = new Map<TinyStyle, HubSystem>();
let hub: StandInHub;

beforeAll(async () => {
  for (const s of TINY_STYLES) systems.set(s, await buildHubSystem(s, join(root, 'repos')));
  hub = await startHub({ repos: [...systems.values()].flatMap((s) => s.repos), lfsThreshold: 4096 });
}, 120_000);
afterAll(async () => {
  await hub.close();
  rmSync(root, { recursive: true, force: true });
});

let nHome = 0;
/** Runs `body` with the hub's environment: an empty HF_HOME of its own unless given, HF_ENDPOINT at the stand-in hub. */
async function withHubEnv<T>(env: Record<string, string>, body: () => Promise<T>): Promise<T> {
  const saved = { ...process.env };
  for (const k of ['HF_HUB_CACHE', 'HF_TOKEN', 'HF_HUB_OFFLINE', 'HUGGING_FACE_HUB_TOKEN']) delete process.env[k];
  Object.assign(process.env, { HF_HOME: join(root, `home${++nHome}`), HF_ENDPOINT: hub.url }, env);
  try {
    return await body();
  } finally {
    process.env = saved;
  }
}

const QUESTION = 'What is 2 + 3?';
const askArgs = (dump: string, extra: string[] = []) => [
  'ask', '--question', QUESTION, '--greedy', '--json', '--backend', 'cpu', '--num_recursive_rounds', '2', '--latent_length', '3',
  '--max_new_tokens', '6', '--dump', dump, ...extra,
];
const textOf = (out: string) => {
  const j = JSON.parse(out) as { text: string; tokens: number; answer: unknown };
  return { text: j.text, tokens: j.tokens, answer: j.answer };
};
const bodies = (from: number) => hub.log.slice(from).filter((q) => q.server === 'cdn' || q.path.includes('/resolve/'));

describe.each(TINY_STYLES)('%s from the stand-in hub', (style) => {
  it('downloads into an empty cache and answers as --ckpt_override; again without a file body; offline with no request', async () => {
    const sys = systems.get(style)!;
    const home = join(root, `home-${style}`);
    const from = hub.log.length;
    const first = await withHubEnv({ HF_HOME: home }, () => rmasInProcess(...askArgs(join(root, `${style}-d1`), ['--style', style])));
    expect(first.code, first.err).toBe(0);
    // every repo of the style is in the cache in huggingface_hub's layout, README.md and .gitattributes left on the hub
    for (const { id } of sys.repos) {
      const repo = join(home, 'hub', `models--${id.replace('/', '--')}`);
      expect(readFileSync(join(repo, 'refs/main'), 'utf8')).toBe(hub.commit(id));
      const snap = readdirSync(join(repo, 'snapshots', hub.commit(id)));
      expect(snap).not.toContain('README.md');
      expect(snap).toContain(id.endsWith('-Outerlinks') ? 'outerlink_config.json' : 'config.json');
    }
    expect(bodies(from).length).toBeGreaterThan(sys.repos.length);
    expect(first.err).toContain(`${sys.repos[0]!.id}/config.json: `);
    expect(first.err).toMatch(/config\.json: [\d.]+ (B|KiB) in [\d.]+ s \(/);

    const overrides = Object.entries(sys.overrides).flatMap(([k, d]) => ['--ckpt_override', `${k}=${d}`]);
    const local = await withHubEnv({ HF_HUB_OFFLINE: '1' }, () =>
      rmasInProcess(...askArgs(join(root, `${style}-d2`), ['--style', style, ...overrides])));
    expect(local.code, local.err).toBe(0);
    expect(textOf(first.out)).toEqual(textOf(local.out));
    const [d1, d2] = [await readDump(join(root, `${style}-d1`)), await readDump(join(root, `${style}-d2`))];
    expect(d1.map((s) => [s.round, s.role, s.links_out])).toEqual(d2.map((s) => [s.round, s.role, s.links_out]));
    for (const [i, s] of d1.entries()) {
      for (const [k, t] of s.tensors) expect(Array.from(d2[i]!.tensors.get(k)!.values), `${s.role} ${k}`).toEqual(Array.from(t.values));
    }

    const again = hub.log.length;
    const second = await withHubEnv({ HF_HOME: home }, () => rmasInProcess(...askArgs(join(root, `${style}-d3`), ['--style', style])));
    expect(second.code, second.err).toBe(0);
    expect(textOf(second.out)).toEqual(textOf(first.out));
    expect(bodies(again)).toEqual([]);
    expect(hub.log.slice(again).every((q) => q.path.startsWith('/api/models/'))).toBe(true);

    const quiet = hub.log.length;
    const offline = await withHubEnv({ HF_HOME: home, HF_HUB_OFFLINE: '1' }, () =>
      rmasInProcess(...askArgs(join(root, `${style}-d4`), ['--style', style])));
    expect(offline.code, offline.err).toBe(0);
    expect(textOf(offline.out)).toEqual(textOf(first.out));
    expect(hub.log.length).toBe(quiet);
  });
});

describe('rmas download', () => {
  it('fetches the files asked for into the cache, prints the snapshot folder, and fetches nothing the second time', async () => {
    const repo = systems.get('mixture')!.repos[0]!.id;
    const home = join(root, 'home-download');
    const args = ['download', repo, '--include', '*.json', '--exclude', 'tokenizer*'];
    const download = () => withHubEnv({ HF_HOME: home }, () => rmasInProcess(...args));
    const first = await download();
    expect(first.code, first.err).toBe(0);
    const snap = join(home, 'hub', `models--${repo.replace('/', '--')}`, 'snapshots', hub.commit(repo));
    expect(first.out).toBe(`${snap}\n`);
    expect(readdirSync(snap).sort()).toEqual(['adapter_config.json', 'config.json', 'generation_config.json']);
    expect(first.err).toMatch(new RegExp(`^${repo}: 3 file\\(s\\) at ${hub.commit(repo).slice(0, 12)}, [\\d.]+ (B|KiB) fetched$`, 'm'));
    const again = await download();
    expect(again.err).toContain(`${repo}: 3 file(s) at ${hub.commit(repo).slice(0, 12)}, all cached`);
    const bad = await rmasInProcess('download');
    expect([bad.code, bad.err.split('\n')[0]]).toEqual([2, 'rmas: download: name a style (e.g. sequential_light) or a repo id (Org/Name)']);
  });
});

describe('a download killed half-way', () => {
  it('continues from its last byte in the next run, which fetches only the rest and answers the same', async () => {
    const sys = systems.get('sequential_light')!;
    // the largest file of the style
    const files = sys.repos.flatMap((r) => readdirSync(r.dir).map((f) => ({ repo: r.id, f, size: statSync(join(r.dir, f)).size })));
    const big = files.reduce((a, b) => (b.size > a.size ? b : a));
    const home = join(root, 'home-killed');
    hub.fault({ kind: 'slow', file: big.f, repo: big.repo, bytesPerSecond: Math.ceil(big.size / 6) });
    const env = { ...process.env, HF_HOME: home, HF_ENDPOINT: hub.url, HF_HUB_OFFLINE: '', HF_HUB_CACHE: '' };
    // its own process group: bin/rmas.js runs the runner in a child, which a kill of bin/rmas.js alone leaves writing a
    // moment longer (it exits when it hears its parent is gone)
    const child = spawn(process.execPath, ['bin/rmas.js', 'download', 'sequential_light'], { env, stdio: 'ignore', detached: true });
    const blobs = join(home, 'hub', `models--${big.repo.replace('/', '--')}`, 'blobs');
    const partial = () => (existsSync(blobs) ? readdirSync(blobs).find((b) => b.endsWith('.incomplete')) : undefined);
    const t0 = Date.now();
    while (!(partial() && statSync(join(blobs, partial()!)).size > big.size / 2)) {
      if (Date.now() - t0 > 60_000) throw new Error('the download did not get half-way within 60 s');
      await new Promise((r) => setTimeout(r, 50));
    }
    process.kill(-child.pid!, 'SIGKILL');
    await new Promise((r) => child.once('exit', r));
    // what the killed download left, once nothing writes to it any more
    let kept = -1;
    for (let size = statSync(join(blobs, partial()!)).size; size !== kept; size = statSync(join(blobs, partial()!)).size) {
      kept = size;
      await new Promise((r) => setTimeout(r, 300));
    }
    expect(kept).toBeGreaterThan(big.size / 2);
    expect(kept).toBeLessThan(big.size);

    const from = hub.log.length;
    const ask = (dump: string) => rmasInProcess(...askArgs(join(root, dump), ['--style', 'sequential_light']));
    const resumed = await withHubEnv({ HF_HOME: home }, () => ask('killed-d1'));
    expect(resumed.code, resumed.err).toBe(0);
    const served = hub.log.slice(from).filter((q) => q.repo === big.repo && q.file === big.f && (q.status === 200 || q.status === 206));
    expect(served.reduce((n, q) => n + q.bytes, 0)).toBe(big.size - kept);
    expect(resumed.err).toContain(`${big.repo}/${big.f}: resuming at `);
    const fresh = await withHubEnv({}, () => ask('killed-d2'));
    expect(textOf(resumed.out)).toEqual(textOf(fresh.out));
    expect(partial()).toBeUndefined();
  });
});
