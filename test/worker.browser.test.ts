// The engine worker in headless Chromium: it owns the device (SwiftShader here) and answers the page.
import { afterAll, describe, expect, it } from 'vitest';
import { proxy } from 'comlink';
import { F } from '../src/autograd';
import { CpuBackend } from '../src/tensor/cpu';
import { Rng } from '../src/util/rng';
import { startEngine } from '../src/ui/engine';
import type { SelfTestEvent } from '../workers/protocol';

const engine = startEngine();
afterAll(() => engine.stop());

describe('engine worker (comlink)', () => {
  it('reports the adapter of the device it owns', async () => {
    const r = await engine.api.adapterReport();
    expect(r.runtime).toBe('worker');
    expect(r.architecture === 'swiftshader' || Object.keys(r.features).length > 0).toBe(true);
    expect(r.limits.maxComputeInvocationsPerWorkgroup).toBeGreaterThanOrEqual(256);
  });

  it('samples on its device exactly as the CPU reference does', async () => {
    const [rows, v] = [3, 200];
    const x = new Rng(17).normals(rows * v, 3);
    const cpu = new CpuBackend();
    for (const opts of [{ temperature: 0 }, { temperature: 0.8, topK: 20, seed: 5, step: 2 }]) {
      const want = await F.sample(cpu.fromValues(x, [rows, v]), opts).readI32();
      const got = await engine.api.sample(x, [rows, v], opts);
      expect([...got], JSON.stringify(opts)).toEqual([...want]);
    }
  });

  it('runs a self-test group and streams progress', async () => {
    const events: SelfTestEvent[] = [];
    const done = await engine.api.selfTest(proxy((e: SelfTestEvent) => void events.push(e)), { groups: ['elementwise'] });
    expect(events[0]).toMatchObject({ type: 'start', backend: 'webgpu' });
    const cases = events.filter((e) => e.type === 'case');
    expect(cases.length).toBe((events[0] as { total: number }).total);
    expect(cases.every((e) => e.group === 'elementwise')).toBe(true);
    expect(cases.filter((e) => !e.ok)).toEqual([]);
    expect(done).toMatchObject({ type: 'done', passed: cases.length, failed: 0 });
    expect(events.at(-1)).toEqual(done);
  });
});
