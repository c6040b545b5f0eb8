/**
 * The subgroup layout probe's verdict (gpu/subgroups.ts) on the outputs a device could give: consecutive runs of
 * local_invocation_index are the only layout the subgroup reductions accept. Lavapipe's own answer is checked by the
 * fused tests (src/model/fused.gpu.test.ts: its contexts take the subgroup path).
 */
import { describe, expect, it } from 'vitest';
import { PROBE_WORKGROUP, readProbe } from './subgroups';

/** The probe's output for a layout: (subgroup_invocation_id, subgroup_size) per local invocation index. */
const output = (sid: (l: number) => number, size: (l: number) => number) => {
  const a = new Uint32Array(2 * PROBE_WORKGROUP);
  for (let l = 0; l < PROBE_WORKGROUP; l++) [a[2 * l], a[2 * l + 1]] = [sid(l), size(l)];
  return a;
};

describe('readProbe', () => {
  it.each([4, 8, 16, 32, 64, 128])('accepts consecutive subgroups of %i', (n) => {
    expect(readProbe(output((l) => l % n, () => n))).toEqual({ size: n, contiguous: true });
  });

  it('refuses interleaved subgroups, mixed sizes, sizes under 4 and sizes that do not divide the workgroup', () => {
    // subgroup j = the invocations l with l mod 8 = j (lane l / 8 within it)
    expect(readProbe(output((l) => Math.floor(l / 8) % 32, () => 32)).contiguous).toBe(false);
    expect(readProbe(output((l) => (l < 128 ? l % 32 : l % 16), (l) => (l < 128 ? 32 : 16))).contiguous).toBe(false);
    expect(readProbe(output((l) => l % 2, () => 2)).contiguous).toBe(false);
    expect(readProbe(output((l) => l % 24, () => 24)).contiguous).toBe(false);
  });
});
