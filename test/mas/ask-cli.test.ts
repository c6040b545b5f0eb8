/**
 * `rmas ask` as a program (bin/rmas.js → tsx → src/runner/cli.ts): the upstream-style flags parse, --json
 * prints exactly what the in-process run computes, and errors map to exit codes (1 named engine error,
 * 2 usage). Each process start costs about a second, so few runs.
 */
import { execFile } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { CpuBackend } from '../../src/tensor/cpu';
import { overridesFor, runAsk } from './ask-util';

const tmp = mkdtempSync(join(tmpdir(), 'rmas-ask-cli-'));
afterAll(() => rmSync(tmp, { recursive: true, force: true }));

function rmas(...args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((res) => {
    execFile(process.execPath, ['bin/rmas.js', ...args], { encoding: 'utf8' }, (err, stdout, stderr) => {
      res({ code: err ? ((err as { code?: number }).code ?? 1) : 0, stdout, stderr });
    });
  });
}

describe('rmas ask (child process)', () => {
  it('--json prints {answer, text, tokens, seconds, rounds} equal to the in-process run', async () => {
    const o = await overridesFor('distillation', join(tmp, 'sys'));
    const r = await rmas(
      'ask',
      '--style',
      'distillation',
      '--question',
      'What is 7 * 6?',
      ...o.flatMap((x) => ['--ckpt_override', x]),
      '--num_recursive_rounds',
      '2',
      '--latent_length',
      '3',
      '--temperature',
      '0.7',
      '--top_p',
      '0.9',
      '--seed',
      '5',
      '--max_new_tokens',
      '6',
      '--backend',
      'cpu',
      '--json',
    );
    expect(r.stderr).toContain('round 2 learner: ');
    expect(r.code).toBe(0);
    const got = JSON.parse(r.stdout) as Record<string, unknown>;
    expect(Object.keys(got)).toEqual(['answer', 'text', 'tokens', 'seconds', 'rounds']);
    const same = await runAsk({
      style: 'distillation', question: 'What is 7 * 6?', ckpt_override: o, num_recursive_rounds: '2', latent_length: '3',
      temperature: '0.7', top_p: '0.9', seed: '5', max_new_tokens: '6', json: true,
    }, new CpuBackend('f32'));
    const want = JSON.parse(same.out) as Record<string, unknown>;
    expect([got.answer, got.text, got.tokens, got.rounds]).toEqual([want.answer, want.text, want.tokens, 2]);
  });

  it('exit 1 with the error name for an unknown style, exit 2 with usage for a bad flag', async () => {
    const bad = await rmas('ask', '--style', 'solo', '--question', 'q', '--backend', 'cpu');
    expect(bad.code).toBe(1);
    expect(bad.stderr).toContain('rmas: UnknownStyle: unknown style \'solo\'');
    const usage = await rmas('ask', '--style', 'mixture', '--question', 'q', '--num_recursive_rounds', 'two');
    expect(usage.code).toBe(2);
    expect(usage.stderr).toContain('--num_recursive_rounds two: expected an integer');
    expect(usage.stderr).toContain('rmas ask (--question TEXT | -q TEXT ... | --questions_file FILE) [--style STYLE]');
    expect(usage.stderr).toContain('styles: tiny_sequential (the default');
  });
});
