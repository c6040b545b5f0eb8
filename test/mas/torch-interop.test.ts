/**
 * Links move to PyTorch: our `.pt` export is loaded by the real torch.load(weights_only=True) (Debian's
 * python3-torch, which scripts/setup-system.sh installs; without it the test is skipped with a message) and
 * holds exactly our values under upstream's keys. The other direction, .pt files that torch.save wrote,
 * is covered by test/mas/golden.test.ts.
 */
import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { f32ToBf16Bits } from '../../src/formats/dtype';
import { InnerLink, OuterLink } from '../../src/mas/links';
import { writeLinkFile } from '../../src/mas/upstream';
import { CpuBackend } from '../../src/tensor/cpu';

const PY = '/usr/bin/python3';
function hasTorch(): boolean {
  try {
    execFileSync(PY, ['-c', 'import torch'], { stdio: 'ignore' });
    return true;
  } catch {
    return false;
  }
}
const torch = hasTorch();
if (!torch) console.warn(`test/mas/torch-interop: skipped, ${PY} cannot import torch (apt-get install python3-torch to run it)`);

const tmp = mkdtempSync(join(tmpdir(), 'rmas-torch-'));
afterAll(() => rmSync(tmp, { recursive: true, force: true }));

const LOAD = `
import json, sys, torch
sd = torch.load(sys.argv[1], weights_only=True)
print(json.dumps({k: {"dtype": str(v.dtype), "shape": list(v.shape), "values": v.float().flatten().tolist()} for k, v in sd.items()}))
`;

const bf16 = (x: number) => new Float32Array(new Uint32Array([f32ToBf16Bits(x) << 16]).buffer)[0];

describe.skipIf(!torch)('link .pt export read by torch.load(weights_only=True)', () => {
  const be = new CpuBackend('f32');
  for (const dtype of ['bf16', 'f32'] as const) {
    it(`inner and outer links, ${dtype}`, async () => {
      for (const link of [InnerLink.create(be, 24, { seed: 3 }), OuterLink.create(be, 24, 16, { seed: 4 })]) {
        const path = join(tmp, `${link.type}-${dtype}.pt`);
        await writeLinkFile(link, path, { dtype });
        const got = JSON.parse(execFileSync(PY, ['-c', LOAD, path], { encoding: 'utf8' })) as Record<
          string,
          { dtype: string; shape: number[]; values: number[] }
        >;
        const want = await link.stateDict();
        expect(Object.keys(got)).toEqual([...want.keys()]);
        for (const [k, t] of want) {
          expect(got[k].dtype).toBe(dtype === 'bf16' ? 'torch.bfloat16' : 'torch.float32');
          expect(got[k].shape).toEqual(t.shape);
          expect(got[k].values).toEqual(Array.from(t.data, (x) => (dtype === 'bf16' ? bf16(x) : x)));
        }
      }
    });
  }
});
