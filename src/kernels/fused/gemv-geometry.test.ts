/**
 * The fused GEMV's cut without a GPU: which adapters count as software rasterisers, the geometry gemvGeometry gives
 * for each subgroup width and row length, and what the narrow cut's WGSL leaves out (barriers, workgroup memory).
 */
import { describe, expect, it } from 'vitest';
import { isSoftwareAdapter } from '../../gpu/device';
import { WIDE, fusedGemvWgsl, gemvGeometry, walkOf } from './gemv-wgsl';

const adapter = (over: Partial<Parameters<typeof isSoftwareAdapter>[0]>) => ({
  isFallback: false, architecture: '', device: '', description: '', vendor: '', ...over,
});

describe('isSoftwareAdapter', () => {
  it('knows SwiftShader and lavapipe, flagged or by name, and leaves GPUs alone', () => {
    // as Dawn and Chromium report them (GPUAdapterInfo of SwiftShader 5 and Mesa 25 lavapipe)
    expect(isSoftwareAdapter(adapter({ isFallback: true, vendor: 'google', architecture: 'swiftshader' }))).toBe(true);
    expect(isSoftwareAdapter(adapter({ architecture: 'swiftshader' }))).toBe(true);
    expect(isSoftwareAdapter(adapter({ vendor: 'mesa', architecture: 'software' }))).toBe(true);
    expect(isSoftwareAdapter(adapter({ description: 'llvmpipe: Mesa 25.0.7-2~bpo12+1 (LLVM 15.0.6) 0.0.1' }))).toBe(true);
    expect(isSoftwareAdapter(adapter({ vendor: 'nvidia', architecture: 'hopper', description: 'NVIDIA H100' }))).toBe(false);
    expect(isSoftwareAdapter(adapter({ vendor: 'intel', architecture: 'gen-12lp' }))).toBe(false);
  });
});

describe('gemvGeometry', () => {
  const bf16 = (K: number) => [walkOf('bf16', K)];
  it('keeps the wide cut unless asked for the narrow one', () => {
    expect(gemvGeometry(false, bf16(48), 48, 4)).toBe(WIDE);
    expect(WIDE).toEqual({ lanes: 32, rows: 8, shuffleOnly: false });
  });
  it('narrow: the subgroup width in lanes, no wider than a row, 16 rows within the invocation limit', () => {
    expect(gemvGeometry(true, bf16(48), 48, 4)).toEqual({ lanes: 4, rows: 16, shuffleOnly: true }); // SwiftShader
    expect(gemvGeometry(true, bf16(48), 48, 8)).toEqual({ lanes: 8, rows: 16, shuffleOnly: true }); // lavapipe, 6 words
    expect(gemvGeometry(true, bf16(32), 32, 8)).toEqual({ lanes: 4, rows: 16, shuffleOnly: true }); // 4 words a row
    expect(gemvGeometry(true, bf16(48), 48, 0)).toEqual({ lanes: 4, rows: 16, shuffleOnly: false }); // no subgroups: a tree
    expect(gemvGeometry(true, bf16(2048), 2048, 32)).toEqual({ lanes: 32, rows: 8, shuffleOnly: true });
    expect(gemvGeometry(true, bf16(2048), 2048, 32, 1024)).toEqual({ lanes: 32, rows: 16, shuffleOnly: true });
    // q4_0: one lane step per 32-value block; f32 four values per word
    expect(gemvGeometry(true, [walkOf('q4_0', 256)], 256, 8).lanes).toBe(8);
    expect(gemvGeometry(true, [walkOf('f32', 48)], 48, 32).lanes).toBe(16);
  });
  it('narrow WGSL: a butterfly of shuffles and no barrier where the lanes fit a subgroup; the prologue holds the norm', () => {
    const attrs = { norm: { kind: 'rms' as const, eps: 1e-6, offset: 0 }, weights: 2, glu: 'silu' as const };
    const walks = [walkOf('bf16', 48), walkOf('bf16', 48)];
    const base = { walks, stage: false, subgroups: true, paramDtypes: [] };
    const gemv = fusedGemvWgsl({ ...base, attrs: { weights: 2, glu: 'silu' }, geometry: gemvGeometry(true, walks, 48, 4) });
    expect(gemv).toContain('@workgroup_size(64)');
    // the entry point and the row sum it calls: no barrier, no workgroup statistic
    const main = gemv.slice(gemv.indexOf('@compute'));
    const rowsum = gemv.slice(gemv.indexOf('fn rowsum'), gemv.indexOf('\n}', gemv.indexOf('fn rowsum')));
    expect(main).toContain('rowsum(acc2');
    expect([main, rowsum].some((t) => t.includes('workgroupBarrier') || /\bwsum\(/.test(t))).toBe(false);
    expect(rowsum).toContain('subgroupShuffleXor(r, 2u)');
    const prologue = fusedGemvWgsl({
      ...base, walks: [], attrs: { ...attrs, weights: 0 }, paramDtypes: ['bf16'], geometry: WIDE, prologue: true,
    });
    expect(prologue).toContain('@workgroup_size(64)');
    expect(prologue).toContain('rr = inverseSqrt(');
    expect(prologue).not.toContain('dot_0');
    const wide = fusedGemvWgsl({ ...base, attrs, paramDtypes: ['bf16'], geometry: WIDE });
    expect(wide).toContain('@workgroup_size(256)');
    expect(wide).toContain('rr = inverseSqrt(');
  });
});
