/**
 * `rmas plan-memory` on the committed tiny models (models/tiny/*-tiny/config.json): in-process through
 * cli.ts's main, and once as a child process through bin/rmas.js. The figures the planner takes from the
 * configs are checked against the objects the engine builds from the same folders: the loaded weights' bytes
 * and the links' FlatParams (src/train/memory.test.ts checks the activation figures against a tape).
 */
import { execFile } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { openCheckpoint } from '../src/formats/safetensors-sharded';
import { InnerLink, OuterLink } from '../src/mas/links';
import { loadDecoderWeights, parseDecoderConfig } from '../src/model';
import { rmasInProcess as run } from './util/rmas';
import type { PlanMemoryResult } from '../src/runner/plan-memory-cmd';
import { CpuBackend } from '../src/tensor/cpu';

const DIRS = { planner: 'models/tiny/qwen3-tiny', critic: 'models/tiny/llama-tiny', solver: 'models/tiny/qwen2-tiny' } as const;
const AGENTS = Object.entries(DIRS).flatMap(([n, d]) => ['--agent', `${n}=${d}`]);

afterEach(() => vi.restoreAllMocks());

const cpu = new CpuBackend('f32');

describe('rmas plan-memory', () => {
  it('--json: weights as loaded and links as built from the same folders, the last agent scored', async () => {
    const r = await run('plan-memory', ...AGENTS, '--max_length', '64', '--answer_tokens', '16', '--json');
    expect(r.code, r.err).toBe(0);
    const out = JSON.parse(r.out) as PlanMemoryResult;
    const { plan } = out;
    const configs = Object.fromEntries(
      Object.entries(DIRS).map(([n, d]) => [n, parseDecoderConfig(readFileSync(`${d}/config.json`, 'utf8'))]),
    );
    for (const [name, dir] of Object.entries(DIRS)) {
      const store = await openCheckpoint(dir);
      const weights = await loadDecoderWeights(configs[name], store, cpu);
      await store.close();
      expect(plan.weights[name], name).toBe(weights.totalBytes);
      weights.dispose();
    }
    // a ring of trained outer links (20 + 4 bytes per FlatParams element) and each agent's frozen inner link (its values: 4)
    const names = Object.keys(DIRS);
    let links = 0;
    names.forEach((from, i) => {
      const to = names[(i + 1) % names.length];
      const outer = OuterLink.create(cpu, configs[from].hidden, configs[to].hidden);
      const inner = InnerLink.create(cpu, configs[from].hidden);
      links += 24 * outer.params.size + 4 * inner.params.size;
    });
    expect(plan.links).toBe(links);
    expect(plan.forwards.map((f) => [f.name, f.tokens, f.recorded, f.logitRows])).toEqual([
      ['planner', 64, true, 0], ['critic', 64, true, 0], ['solver', 64, true, 16],
    ]);
    expect(plan.fits).toBe(true);
    expect(plan.peak).toBe(plan.weightsTotal + plan.links + plan.workspace + plan.activations + plan.logits + plan.transient);
  });

  it('--style follows the style\'s schedule: round 0\'s first stage off the tape, the decoder scored every round', async () => {
    const r = await run(
      'plan-memory',
      '--style',
      'tiny_sequential',
      ...AGENTS,
      '--max_length',
      '32',
      '--answer_tokens',
      '8',
      '--num_recursive_rounds',
      '2',
      '--json',
    );
    expect(r.code, r.err).toBe(0);
    const { plan } = JSON.parse(r.out) as PlanMemoryResult;
    expect(plan.forwards.map((f) => [f.name, f.recorded, f.logitRows])).toEqual([
      ['planner', false, 0], ['critic', true, 0], ['solver', true, 8],
      ['planner', true, 0], ['critic', true, 0], ['solver', true, 8],
    ]);
    expect(plan.forwards[0].forwardTransient).toBeGreaterThan(0);
    expect(plan.forwards[0].held).toBe(0);
  });

  it('prints the table; a budget too small exits 1 with TrainingMemoryExceeded and what to change', async () => {
    const ok = await run('plan-memory', ...AGENTS, '--max_length', '64', '--answer_tokens', '16', '--gradient_checkpointing', 'auto');
    expect(ok.code, ok.err).toBe(0);
    expect(ok.out).toMatch(/^plan-memory: 1 round\(s\), max_length 64, answer_tokens 16, gradient_checkpointing auto, budget 80\.00 GiB/);
    for (const name of Object.keys(DIRS)) expect(ok.out).toContain(name);
    expect(ok.out).toMatch(/\npeak \(backward\) +\d/);
    expect(ok.out).toMatch(/fits: .* to spare; recompute nothing/);

    const small = await run('plan-memory', ...AGENTS, '--budget_gb', '0.001');
    expect(small.code).toBe(1);
    expect(small.out).toMatch(/does not fit: needs/);
    expect(small.err).toMatch(/rmas: TrainingMemoryExceeded: needs .* over the 1\.02 MiB budget.*--max_length/);
  });

  it('--devices N plans each GPU with the agents train-outer --devices puts there; ' +
    'one GPU too small suggests one agent per GPU', async () => {
    const r = await run(
      'plan-memory',
      '--style',
      'tiny_sequential',
      ...AGENTS,
      '--max_length',
      '32',
      '--answer_tokens',
      '8',
      '--devices',
      '2',
      '--json',
    );
    expect(r.code, r.err).toBe(0);
    const res = JSON.parse(r.out) as PlanMemoryResult;
    // planner on GPU 0, critic on 1, solver on 0 again (role i on i mod 2); links with their senders
    expect(res.devices!.map((d) => [d.device, d.agents])).toEqual([
      [0, ['planner', 'solver']],
      [1, ['critic']],
    ]);
    expect(res.devices![0].plan.weightsTotal).toBe(res.plan.weights.planner + res.plan.weights.solver);
    expect(res.devices![1].plan.forwards.map((f) => f.name)).toEqual(['critic', 'critic', 'critic']);
    expect(res.devices![0].plan.links + res.devices![1].plan.links).toBe(res.plan.links);
    const text = await run(
      'plan-memory',
      '--style',
      'tiny_sequential',
      ...AGENTS,
      '--max_length',
      '32',
      '--answer_tokens',
      '8',
      '--devices',
      '2',
    );
    expect(text.out).toMatch(/2 GPUs\n/);
    expect(text.out).toMatch(/\nGPU 0 \(planner, solver\): weights .* peak .*; fits: /);
    expect(text.out).toMatch(/\nGPU 1 \(critic\): weights .* peak .*; fits: /);

    // a budget between the largest agent's GPU and the whole system: one GPU does not fit, one agent per GPU does
    const one = JSON.parse(
      (await run('plan-memory', ...AGENTS, '--max_length', '64', '--answer_tokens', '16', '--json')).out,
    ) as PlanMemoryResult;
    const perAgent = JSON.parse(
      (await run('plan-memory', ...AGENTS, '--max_length', '64', '--answer_tokens', '16', '--devices', '3', '--json')).out,
    ) as PlanMemoryResult;
    const worst = Math.max(...perAgent.devices!.map((d) => d.plan.peak));
    expect(worst).toBeLessThan(one.plan.peak);
    const gb = ((worst + one.plan.peak) / 2 / 2 ** 30).toFixed(6);
    const tight = await run('plan-memory', ...AGENTS, '--max_length', '64', '--answer_tokens', '16', '--budget_gb', gb);
    expect(tight.code).toBe(1);
    expect(tight.out).toMatch(
      /\none agent per GPU \(--devices 3\): the largest GPU peak is .* on GPU \d \(\w+\); fits, with recompute nothing\n/,
    );
    const spread = await run('plan-memory', ...AGENTS, '--max_length', '64', '--answer_tokens', '16', '--budget_gb', gb, '--devices', '3');
    expect(spread.code, spread.err).toBe(0);
    const over = await run(
      'plan-memory',
      ...AGENTS,
      '--max_length',
      '64',
      '--answer_tokens',
      '16',
      '--budget_gb',
      '0.0001',
      '--devices',
      '3',
    );
    expect(over.code).toBe(1);
    expect(over.err).toMatch(/TrainingMemoryExceeded: GPU 0 \(planner\): needs .*; GPU 1 \(critic\): needs .*; GPU 2 \(solver\): needs/);
  });

  it('bad arguments exit 2 with the usage, which lists the command', async () => {
    for (const [args, msg] of [
      [['--agent', 'planner'], /expected NAME=DIR/],
      [[...AGENTS, '--gradient_checkpointing', '2'], /expected 0, 1 or auto/],
      [[...AGENTS, '--answer_tokens', '5000'], /exceeds --max_length 4096/],
      [['--agent', 'x=models/tiny/nothing-here'], /cannot read models\/tiny\/nothing-here\/config\.json/],
      [['--style', 'distillation', ...AGENTS], /roles expert, learner.*missing: expert, learner/],
      [[], /at least one --agent/],
      [[...AGENTS, '--devices', '0'], /--devices 0: expected an integer >= 1/],
    ] as const) {
      const r = await run('plan-memory', ...args);
      expect(r.code, args.join(' ')).toBe(2);
      expect(r.err).toMatch(msg);
      expect(r.err).toContain('rmas plan-memory --agent NAME=DIR');
    }
  });

  it('runs through bin/rmas.js', async () => {
    const r = await new Promise<{ code: number; stdout: string }>((res) => {
      execFile(process.execPath, ['bin/rmas.js', 'plan-memory', ...AGENTS, '--gradient_checkpointing', '1'], { encoding: 'utf8' },
        (err, stdout) => res({ code: err ? ((err as { code?: number }).code ?? 1) : 0, stdout }));
    });
    expect(r.code).toBe(0);
    expect(r.stdout).toMatch(/gradient_checkpointing 1/);
    expect(r.stdout).toMatch(/recompute planner, critic, solver/);
  });
});
