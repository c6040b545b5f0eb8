/** The register-tiled GEMM's geometry (gemm-wgsl.ts): tiles, workgroup memory, and what each cut's WGSL holds. */
import { describe, expect, it } from 'vitest';
import type { DType } from '../../formats/dtype';
import { GEMM_INVOCATIONS, gemmGeometry, gemmKey, gemmReadsB, gemmTile, gemmWgsl, gemmWorkgroupBytes } from './gemm-wgsl';

describe('gemmGeometry', () => {
  it('direct: one row of invocations, 8 to 64 of them as N needs, no workgroup memory', () => {
    for (const M of [1, 9, 14, 64, 513]) {
      const g = gemmGeometry(M, 1024, false);
      expect(g).toEqual({ wx: 64, wy: 1, shared: false });
      expect(gemmTile(g)).toEqual({ tm: 4, tn: 256 });
      expect(gemmWorkgroupBytes(g)).toBe(0);
    }
    const wx = (N: number) => gemmGeometry(14, N, false).wx;
    expect([1, 32, 33, 48, 128, 129, 256, 3072].map(wx)).toEqual([8, 8, 16, 16, 32, 64, 64, 64]);
  });

  it('shared: its tile rows follow M (8 to 32), 64 invocations, within 16 KiB of workgroup memory', () => {
    const rows = (M: number) => gemmTile(gemmGeometry(M, 1024, true)).tm;
    expect([1, 8, 9, 14, 16, 17, 32, 33, 1000].map(rows)).toEqual([8, 8, 16, 16, 16, 32, 32, 32, 32]);
    for (let M = 1; M <= 80; M++) {
      const g = gemmGeometry(M, 48, true);
      expect(g.wx * g.wy).toBe(GEMM_INVOCATIONS);
      expect(gemmWorkgroupBytes(g)).toBeLessThanOrEqual(16384);
    }
  });

  it('reads halves in pairs only where they do not straddle a word, quantized blocks from a 4-value boundary', () => {
    expect(gemmReadsB('bf16', false, 64, 0)).toBe(true);
    expect(gemmReadsB('bf16', false, 63, 0)).toBe(false);
    expect(gemmReadsB('f16', false, 64, 3)).toBe(false);
    expect(gemmReadsB('f16', true, 63, 3)).toBe(true);
    expect(gemmReadsB('f32', false, 7, 5)).toBe(true);
    expect(gemmReadsB('q4_0', false, 8, 32)).toBe(true);
    expect(gemmReadsB('q8_0', false, 8, 2)).toBe(false);
  });

  it('direct WGSL has no barrier or workgroup memory; shared stages tiles between two barriers; keys differ', () => {
    const keys = new Set<string>();
    for (const dtype of ['f32', 'f16', 'bf16', 'q8_0', 'q4_0'] as DType[]) {
      for (const native of dtype === 'f16' ? [false, true] : [false]) {
        for (const shared of [false, true]) {
          const g = gemmGeometry(14, 1024, shared);
          const src = gemmWgsl({ dtype, native }, g);
          expect(src.includes('workgroupBarrier'), `${dtype} ${shared}`).toBe(shared);
          expect(src.includes('var<workgroup>'), `${dtype} ${shared}`).toBe(shared);
          expect(src.includes('enable f16;')).toBe(native);
          expect(src).toContain(`@workgroup_size(${GEMM_INVOCATIONS})`); // N = 1024: 64 in both cuts
          keys.add(gemmKey({ dtype, native }, g));
        }
      }
    }
    expect(keys.size).toBe(12);
  });
});
