/**
 * The README's runner section runs as written, top to bottom, as a newcomer runs it: every line of the section's bash
 * blocks, through bash, in order, in a folder that holds what a fresh clone holds after `npm install` and nothing else.
 * That is the files git would commit (this working tree's: no data/, no out/, nothing built), node_modules and the MPI
 * addon that `npm install` builds linked in, a fresh npm cache, and not this checkout's lavapipe (.cache/, which
 * scripts/setup-system.sh unpacks): the default backend is what the machine offers, the CPU on a machine without a
 * Vulkan driver Dawn takes. The `export` and `mpirun` lines run where Open MPI and the addon are (CI: always), as root
 * there. Each line must exit 0, print no npm warning or Dawn limit notice, and leave what it says it makes.
 *
 * The copy's npx runs with npm_config_ignore_scripts: the first `npx rmas` in a folder installs the folder's package
 * into npm's npx cache and would run its postinstall again (a CUDA build of minutes where nvcc is; a clone that ran
 * `npm install` finds its builds up to date).
 */
import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { delimiter, join, resolve } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { priceList } from '../src/eval/tiny-prices';
import { bashLines, words } from './util/markdown';
import { mpiAddonBuilt, mpirunPath } from './util/mpi';

const ROOT = resolve(import.meta.dirname, '..');
const README = readFileSync(join(ROOT, 'README.md'), 'utf8');
/** The runner's section: from its heading to the next one. */
const section = README.slice(README.indexOf('## The `rmas` runner'), README.indexOf('## The repository'));
const lines = bashLines(section, '').filter((l) => l !== '');
const firstMpi = lines.findIndex((l) => l.startsWith('export '));

const dir = mkdtempSync(join(tmpdir(), 'rmas-readme-'));
const clone = join(dir, 'clone');
afterAll(() => rmSync(dir, { recursive: true, force: true }));

/** Open MPI's and the launchers' variables, and this checkout's lavapipe, taken out of the test runner's environment. */
function freshEnv(): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = { ...process.env, npm_config_cache: join(dir, 'npm-cache'), npm_config_ignore_scripts: 'true' };
  for (const k of Object.keys(env)) if (/^(OMPI_|PMI_|PMIX_)|^(RANK|WORLD_SIZE|LOCAL_RANK)$/.test(k)) delete env[k];
  const lvp = join(ROOT, '.cache');
  if (env.VK_ICD_FILENAMES?.startsWith(lvp)) delete env.VK_ICD_FILENAMES;
  const libs = (env.LD_LIBRARY_PATH ?? '').split(delimiter).filter((p) => p && !p.startsWith(lvp));
  if (libs.length) env.LD_LIBRARY_PATH = libs.join(delimiter);
  else delete env.LD_LIBRARY_PATH;
  // containers often forbid the shared-memory transport's cross-memory attach (test/util/mpi.ts)
  env.OMPI_MCA_btl_vader_single_copy_mechanism = 'none';
  return env;
}
const env = freshEnv();
const exported: string[] = [];

/** One README line through bash in the clone, after the `export` lines before it. */
function run(line: string, timeout = 300_000) {
  const r = spawnSync('bash', ['-c', [...exported, line].join('\n')], { cwd: clone, env, encoding: 'utf8', timeout });
  const where = `${line}\n${r.stderr.slice(-3000)}`;
  expect(r.status, where).toBe(0);
  expect(r.stderr, where).not.toMatch(/^npm (warn|WARN|ERR)/m);
  expect(r.stderr, where).not.toMatch(/^Warning: maxDynamic\w+ artificially reduced/m);
  return r;
}

describe('the README', () => {
  it('the line reader splits quoted words and finds the commands', () => {
    expect(words(`npx rmas ask --question "Tom has 6 pens. He said \\"hi\\"." --greedy`)).toEqual([
      'npx',
      'rmas',
      'ask',
      '--question',
      'Tom has 6 pens. He said "hi".',
      '--greedy',
    ]);
    expect(bashLines('x\n```bash\nnpx rmas a\n  npx rmas b --c\nls\n```\n```ts\nnpx rmas d\n```\n', 'npx rmas ')).toEqual([
      'npx rmas a',
      'npx rmas b --c',
    ]);
    // the splits first, then one example of each command of its table, then the MPI job's
    expect(lines.map((l) => words(l).slice(0, l.startsWith('mpirun') ? 6 : 3).join(' '))).toEqual([
      'npx tsx scripts/tiny-system/build.ts',
      'npx rmas ask',
      'npx rmas ask',
      'npx rmas run',
      'npx rmas train-inner',
      'npx rmas train-outer',
      'npx rmas convert',
      'npx rmas forward',
      'npx rmas generate',
      'npx rmas plan-memory',
      'npx rmas healthcheck',
      'export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1',
      'mpirun -np 2 npx rmas train-inner',
      'mpirun -np 2 npx rmas run',
    ]);
    expect(lines[0]).toBe('npx tsx scripts/tiny-system/build.ts task --out data');
  });

  it('stays a front door: at most 10,000 bytes, with the two commands and the map on it', () => {
    expect(Buffer.byteLength(README)).toBeLessThanOrEqual(10_000);
    expect(README).toContain('npm install && npm start');
    expect(README).toContain('npm install && npm test');
    expect(README).toContain('## The repository');
  });

  it('the runner section runs as written in a fresh clone, top to bottom', () => {
    // what a clone of this working tree holds, as git would commit it
    mkdirSync(clone);
    const files = 'git ls-files -z --cached --others --exclude-standard';
    const copy = spawnSync('bash', ['-c', `${files} | tar --null --ignore-failed-read -T - -cf - | tar -xf - -C "${clone}"`], {
      cwd: ROOT,
      encoding: 'utf8',
    });
    expect(copy.status, copy.stderr).toBe(0);
    expect(existsSync(join(clone, 'README.md'))).toBe(true);
    for (const made of ['data', 'out', 'node_modules', '.cache', 'native/mpi/build', 'native/cuda/build'])
      expect(existsSync(join(clone, made)), made).toBe(false);
    // what npm install adds
    symlinkSync(join(ROOT, 'node_modules'), join(clone, 'node_modules'));
    if (existsSync(join(ROOT, 'native/mpi/build'))) symlinkSync(join(ROOT, 'native/mpi/build'), join(clone, 'native/mpi/build'));

    for (const line of lines.slice(0, firstMpi)) {
      const r = run(line);
      // the sequential example's answer (6 - 3 + 1); the distillation example prices 3 glims at a zorp's price, the
      // donor question's, which its messages carry
      if (line.startsWith('npx rmas ask')) {
        const want = line.includes('--messages_from') ? 3 * priceList().get('zorp')! : 4;
        expect(r.stdout).toContain(`\\boxed{${want}}`);
      }
    }
    for (const made of [
      'data/train.jsonl',
      'data/test.jsonl',
      'out/test.jsonl',
      'out/planner/adapter.pt',
      'out/outer/outerlink_config.json',
      'out/planner.zip',
      'out/hidden.safetensors',
    ]) {
      expect(existsSync(join(clone, made)), made).toBe(true);
    }
  }, 900_000);

  it.skipIf(!process.env.CI && !(mpirunPath && mpiAddonBuilt))('then its MPI job, as root where the tests run as root', () => {
    const [exportLine, ...mpi] = lines.slice(firstMpi);
    if (process.getuid?.() === 0) {
      // without the export Open MPI refuses root, which is why the README shows it
      const refused = spawnSync('bash', ['-c', mpi[0]!], { cwd: clone, env, encoding: 'utf8', timeout: 60_000 });
      expect(refused.status).not.toBe(0);
      expect(refused.stderr).toMatch(/root/);
    }
    run(exportLine!);
    exported.push(exportLine!);
    for (const line of mpi) run(line);
    const records = readFileSync(join(clone, 'out/test-dp.jsonl'), 'utf8').trim().split('\n');
    expect(records.map((l) => (JSON.parse(l) as { type?: string }).type).filter((t) => t === 'sample')).toHaveLength(6);
    expect(existsSync(join(clone, 'out/planner-dp/adapter.pt'))).toBe(true);
  }, 600_000);
});
