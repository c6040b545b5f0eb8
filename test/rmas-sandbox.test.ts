// `rmas run` on a code benchmark where no sandbox can be made (RMAS_BWRAP pointing at a missing binary): refused by
// name before any model loads, and run with --allow_unsandboxed_code (issue 39, item 1).
import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';

const ROOT = resolve(import.meta.dirname, '..');
const dir = mkdtempSync(join(tmpdir(), 'rmas-sandbox-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const data = join(dir, 'mbpp.jsonl');
writeFileSync(data, JSON.stringify({
  task_id: 2,
  prompt: 'Write a function to find the shared elements from the given two lists.',
  code: 'def similar_elements(a, b):\n    return tuple(set(a) & set(b))',
  test_list: ['assert set(similar_elements((3, 4, 5, 6),(5, 7, 4, 10))) == set((4, 5))'],
  test: 'assert similar_elements((1, 2), (2, 3)) == (2,)\n',
}) + '\n');

function rmas(...args: string[]) {
  const r = spawnSync(process.execPath, [join(ROOT, 'bin/rmas.js'), 'run', '--style', 'tiny_sequential', '--backend', 'cpu',
    '--dataset', 'mbppplus', '--dataset_file', data, '--greedy', '--max_new_tokens', '8', ...args], {
    cwd: dir, encoding: 'utf8', env: { ...process.env, RMAS_TINY_SYSTEM: '', RMAS_BWRAP: '/nonexistent/bwrap' },
  });
  return { code: r.status, out: r.stdout, err: r.stderr };
}

describe('rmas run without a sandbox for code answers', () => {
  it('stops with SandboxUnavailable before loading, saying to install bubblewrap or pass --allow_unsandboxed_code', () => {
    const r = rmas();
    expect(r.code).toBe(1);
    expect(r.out).toBe('');
    expect(r.err).toBe(
      'rmas: SandboxUnavailable: model-written code was not run: no sandbox can be made for it (`/nonexistent/bwrap` was not ' +
        'found). Install bubblewrap (`apt-get install bubblewrap`, or `sudo bash scripts/setup-system.sh`; user namespaces ' +
        'must be allowed), or pass --allow_unsandboxed_code to run it without one, with access to your files, network and secrets.\n',
    );
  });

  it('runs and scores with --allow_unsandboxed_code', () => {
    const r = rmas('--allow_unsandboxed_code');
    expect(r.code, r.err).toBe(0);
    expect(r.err).toContain('loaded tiny_sequential in ');
    expect(r.out.trim().split('\n').at(-1)).toBe('accuracy=0.00%');
  });
});
