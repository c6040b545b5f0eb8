/**
 * The browser's system loader (src/mas/system-urls.ts) on released-style folders (scripts/tiny-system/tiny-mas.ts writes
 * them with upstream's names: adapter(math).pt / adapter(code).pt + innerlink_config.json per role, a
 * task-scoped outerlink_config.json in the outer folder), served over "HTTP" from disk: with no link named
 * in the spec it resolves them as upstream's resolver does and answers exactly as `rmas ask` on the same
 * folders; code tasks take the code links; quantization that cannot fit a width says so.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { ask } from '../src/mas/ask';
import { loadSystemFromSpec } from '../src/mas/system-urls';
import { CpuBackend } from '../src/tensor/cpu';
import { buildTinySystem } from '../scripts/tiny-system/tiny-mas';
import { runAsk } from './mas/ask-util';
import { FILES_HOST, diskFetchFile } from './util/files';

const tmp = mkdtempSync(join(tmpdir(), 'system-url-'));
afterAll(() => rmSync(tmp, { recursive: true, force: true }));
const host = FILES_HOST;
const fetchFile = diskFetchFile;
const cpu = new CpuBackend('f32');

describe('loadSystemFromSpec on upstream-layout folders', () => {
  for (const task of ['math', 'code'] as const) {
    it(`resolves inner links and outer links from the repos' manifests (${task} task) and answers as rmas ask`, async () => {
      const sys = await buildTinySystem('sequential_light', join(tmp, task));
      const spec = {
        style: 'sequential_light', task,
        roles: Object.fromEntries(Object.entries(sys.roles).map(([r, d]) => [r, { model: `${host}${d}/` }])),
        outerRepo: `${host}${sys.outer}/`,
      };
      const system = await loadSystemFromSpec(spec, cpu, { fetchFile });
      const question = 'What is 5 + 6?';
      const r = await ask(system, {
        question,
        task,
        rounds: 2,
        latentSteps: 3,
        sampling: { greedy: true },
        maxNewTokens: 6,
        answerRetry: false,
      });
      system.dispose();
      const cli = await runAsk(
        {
          style: 'sequential_light',
          question,
          task,
          ckpt_override: [...Object.entries(sys.roles).map(([k, d]) => `${k}=${d}`), `outer=${sys.outer}`],
          num_recursive_rounds: '2',
          latent_length: '3',
          greedy: true,
          max_new_tokens: '6',
          no_ans: true,
          json: true,
        },
        cpu,
      );
      expect(cli.error).toBeNull();
      expect(cli.err).toContain(`(${task} links)`);
      const want = JSON.parse(cli.out) as { text: string; tokens: number };
      expect([r.text, r.tokens]).toEqual([want.text, want.tokens]);
    });
  }

  it('quantize q8_0 refuses a width that is not a multiple of 32, naming it; a missing outer manifest is MissingCheckpoint', async () => {
    const sys = await buildTinySystem('sequential_light', join(tmp, 'q'));
    const roles = Object.fromEntries(Object.entries(sys.roles).map(([r, d]) => [r, { model: `${host}${d}/` }]));
    // the tiny planner (qwen3-tiny) is 48 wide: q8_0 blocks of 32 do not fit its rows
    await expect(
      loadSystemFromSpec({ style: 'sequential_light', roles, outerRepo: `${host}${sys.outer}/`, quantize: 'q8_0' }, cpu, { fetchFile }),
    ).rejects.toMatchObject({
      name: 'InvalidArgument',
      message: expect.stringMatching(/cannot quantize .*q_proj.* to q8_0: its input dimension 48 is not a multiple of 32/),
    });
    await expect(loadSystemFromSpec({ style: 'sequential_light', roles, outerRepo: `${host}${tmp}/nowhere/` }, cpu, { fetchFile }))
      .rejects.toMatchObject({ name: 'MissingCheckpoint', message: expect.stringContaining('outerlink_config.json does not exist') });
  });
});
