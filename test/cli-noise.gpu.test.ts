/**
 * `rmas` as a user's shell sees it, without noise: `npx rmas` prints no npm warning (the project sets no config npm
 * does not know: package.json's allowScripts keeps onnxruntime-node's CUDA download off instead of .npmrc), no Dawn
 * limit notices (bin/dawn-noise.js takes them off the child's stderr, which still redraws progress on a terminal),
 * and a `.zip` given to `--ckpt_override` is named as given, not by the folder it is extracted to (`rmas run`; `rmas
 * ask` in src/store/bundle-node.test.ts).
 */
import { spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { taskSplit, toJsonl } from '../src/eval/tiny-task';
import { lavapipeEnv } from '../scripts/lavapipe-env.js';
import { rmasInProcess } from './util/rmas';

const ROOT = resolve(import.meta.dirname, '..');
const RMAS = join(ROOT, 'bin/rmas.js');
const VERSION = (JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as { version: string }).version;
const NOTICE = /^Warning: maxDynamic(Uniform|Storage)BuffersPerPipelineLayout artificially reduced .*$/m;
const dir = mkdtempSync(join(tmpdir(), 'rmas-noise-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe('rmas without noise', () => {
  it('npx rmas --version: the version and nothing else, on either stream', () => {
    expect(existsSync(join(ROOT, '.npmrc'))).toBe(false);
    const r = spawnSync('npx', ['rmas', '--version'], { cwd: ROOT, encoding: 'utf8', timeout: 300_000 });
    expect({ status: r.status, stdout: r.stdout, stderr: r.stderr }).toEqual({ status: 0, stdout: `rmas ${VERSION}\n`, stderr: '' });
  }, 300_000);

  it("Dawn's limit notices, printed by the runner's own process, do not reach the user", () => {
    const argv = ['generate', '--model', 'models/tiny/llama-tiny', '--prompt', 'Hi', '--max_new_tokens', '1', '--greedy',
      '--backend', 'webgpu'];
    const raw = spawnSync(process.execPath, ['--import', 'tsx', 'src/runner/cli.ts', ...argv], {
      cwd: ROOT, env: lavapipeEnv(), encoding: 'utf8', timeout: 120_000,
    });
    const wrapped = spawnSync(process.execPath, [RMAS, ...argv], { cwd: ROOT, encoding: 'utf8', timeout: 120_000 });
    expect(raw.status, raw.stderr).toBe(0);
    expect(wrapped.status, wrapped.stderr).toBe(0);
    // where Dawn prints them (lavapipe, RADV), the runner's stderr is the same but for them
    const lines = (s: string) => s.split('\n').slice(0, 3);
    if (NOTICE.test(raw.stderr)) expect(lines(raw.stderr.replace(/^Warning: maxDynamic.*\n/gm, ''))).toEqual(lines(wrapped.stderr));
    expect(wrapped.stderr).not.toMatch(NOTICE);
    expect(wrapped.stderr).toMatch(/^backend: webgpu /);
  });

  it('on a terminal, progress still redraws one line; in a pipe it prints lines', () => {
    const argv = ['train-inner', '--style', 'tiny_sequential', '--role', 'planner', '--dataset_name', join(dir, 'train.jsonl'),
      '--save_dir', join(dir, 'tty'), '--max_steps', '3', '--backend', 'cpu'];
    writeFileSync(join(dir, 'train.jsonl'), toJsonl(taskSplit('train').slice(0, 16)));
    // script(1) runs the command on a pseudo-terminal and copies what it shows
    const cmd = [process.execPath, RMAS, ...argv].map((w) => `'${w}'`).join(' ');
    const tty = spawnSync('script', ['-qec', cmd, '/dev/null'], { cwd: ROOT, encoding: 'utf8', timeout: 120_000 });
    expect(tty.status, tty.stdout).toBe(0);
    expect(tty.stdout).toMatch(/\r\[[#.]+\] step 2\/3 \|/);
    const piped = spawnSync(process.execPath, [RMAS, ...argv, '--save_dir', join(dir, 'piped')], { cwd: ROOT, encoding: 'utf8' });
    expect(piped.status, piped.stderr).toBe(0);
    expect(piped.stderr).toMatch(/\n\[[#.]+\] step 3\/3 \|/);
    expect(piped.stderr).not.toContain('\r');
  });

  it('rmas run --ckpt_override planner=BUNDLE.zip names the bundle as given', async () => {
    const zip = join(dir, 'planner.zip');
    expect((await rmasInProcess('convert', '--in', 'models/tiny/system/planner', '--out', zip)).code).toBe(0);
    writeFileSync(join(dir, 'test.jsonl'), toJsonl(taskSplit('test').slice(0, 1)));
    const r = await rmasInProcess('run', '--style', 'tiny_sequential', '--dataset', join(dir, 'test.jsonl'), '--greedy',
      '--backend', 'cpu', '--ckpt_override', `planner=${zip}`, '--result_jsonl', join(dir, 'run.jsonl'));
    expect(r.code, r.err).toBe(0);
    expect(r.err).toContain(`\nplanner: loading models/tiny/system/planner with the inner link of ${zip}\n`);
    expect(r.err).not.toContain('rmas-bundle-');
  });
});
