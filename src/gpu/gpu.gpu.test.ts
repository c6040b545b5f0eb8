import { afterAll, describe, expect, it } from 'vitest';
import { F } from '../autograd';
import {
  BackendMismatch, BindingLimitExceeded, DTypeMismatch, DeviceLost, GpuValidationError, InvalidArgument, ShaderCompileError, ShapeMismatch,
} from '../errors';
import { decode, encode } from '../formats/encode';
import { CpuBackend } from '../tensor/cpu';
import { Uniforms } from './context';
import { sizeClass } from './pool';
import { freshGpuBackend, gpuBackend } from '../../test/util/gpu';
import { Rng } from '../util/rng';

const cpu = CpuBackend.reference();

describe('GPU runtime (Node, Dawn)', () => {
  afterAll(async () => (await gpuBackend()).sync());

  it('reports adapter, features and limits', async () => {
    const { ctx } = await gpuBackend();
    const r = ctx.report;
    expect(r.runtime).toBe('node');
    for (const f of ['shader-f16', 'subgroups', 'timestamp-query'] as const) expect(typeof r.features[f]).toBe('boolean');
    expect(r.limits.maxStorageBufferBindingSize).toBeGreaterThanOrEqual(128 * 1024 * 1024);
    expect(r.limits.maxComputeInvocationsPerWorkgroup).toBeGreaterThanOrEqual(256);
    expect(ctx.bindingLimit).toBe(Math.min(r.limits.maxStorageBufferBindingSize, r.limits.maxBufferSize));
  });

  it('a reshape that changes dim 0 gives its chunk the new row count (a gather reads every row of the reshaped table)', async () => {
    const gpu = await gpuBackend();
    const [m, B, d] = [4, 2, 8];
    const H = gpu.fromValues(Array.from({ length: m * B * d }, (_, i) => i), [m, B, d]);
    const table = H.reshape([m * B, d]);
    const rows = await F.embedding(gpu.fromValues([0, 2, 4, 7], [4], 'i32'), table).read();
    // row r of the table starts at r·d
    expect([0, 1, 2, 3].map((i) => rows[i * d] / d)).toEqual([0, 2, 4, 7]);
    [H, table].forEach((t) => t.dispose());
  });

  it('pools buffers by size class and recycles them only after submit', async () => {
    expect(sizeClass(1)).toBe(16);
    expect(sizeClass(1000)).toBe(1024);
    expect(sizeClass((1 << 20) + 1)).toBe((1 << 20) + (1 << 17));
    const { ctx } = await freshGpuBackend();
    const a = ctx.createBuffer(1000, 0x80 | 0x08);
    ctx.releaseBuffer(a);
    const b = ctx.createBuffer(1000, 0x80 | 0x08);
    expect(b).not.toBe(a); // a may still be read by unsubmitted commands
    ctx.flush();
    const c = ctx.createBuffer(900, 0x80 | 0x08);
    expect(c).toBe(a); // same class, released before the submit
    ctx.destroy();
  });

  it('caches pipelines by readable key, with shapes in uniforms', async () => {
    const gpu = await freshGpuBackend();
    const rng = new Rng(1);
    for (const n of [3, 17, 200]) {
      const a = gpu.fromValues(rng.normals(n), [n]);
      F.add(a, a).dispose();
    }
    expect(gpu.ctx.pipelines.keys()).toEqual(['binary_add_f32_wg256']);
    expect(gpu.ctx.dispatchCount).toBe(3);
    gpu.ctx.destroy();
  });

  it('round-trips every storage dtype through GPU buffers', async () => {
    const gpu = await gpuBackend();
    const rng = new Rng(2);
    const x = rng.normals(3 * 64);
    for (const dt of ['f32', 'f16', 'bf16', 'q8_0', 'q4_0'] as const) {
      const t = gpu.fromValues(x, [3, 64], dt);
      expect([...(await t.readBytes())]).toEqual([...encode(dt, x, [3, 64])]);
      expect([...(await t.read())]).toEqual([...decode(dt, encode(dt, x, [3, 64]), [3, 64])]);
      t.dispose();
    }
    const ids = gpu.fromValues([5, -1, 70000], [3], 'i32');
    expect([...(await ids.readI32())]).toEqual([5, -1, 70000]);
  });

  it('exposes views into one flat buffer at aligned offsets', async () => {
    const gpu = await gpuBackend();
    const flat = gpu.fromValues(Array.from({ length: 200 }, (_, i) => i), [200]);
    const v = flat.view(64, [2, 3]);
    expect([...(await v.read())]).toEqual([64, 65, 66, 67, 68, 69]);
    const doubled = F.scale(v, 2);
    expect([...(await doubled.read())]).toEqual([128, 130, 132, 134, 136, 138]);
    expect(() => flat.view(10, [3])).toThrow(InvalidArgument);
    expect(() => flat.view(192, [10])).toThrow(ShapeMismatch);
  });

  it('names shape, dtype and backend mistakes', async () => {
    const gpu = await gpuBackend();
    const a = gpu.fromValues([1, 2, 3, 4, 5, 6], [2, 3]);
    expect(() => F.add(a, gpu.fromValues([1, 2], [2]))).toThrow(/ShapeMismatch|b has shape \[2\]/);
    expect(() => F.add(a, gpu.fromValues([1, 2], [2]))).toThrow(ShapeMismatch);
    expect(() => F.add(a, gpu.fromValues([1, 2, 3], [3], 'f16'))).toThrow(DTypeMismatch);
    expect(() => F.add(a, cpu.fromValues([1, 2, 3], [3]))).toThrow(BackendMismatch);
    expect(() => gpu.fromValues([1, 2, 3], [2, 2])).toThrow(InvalidArgument);
    expect(() => a.reshape([4])).toThrow(ShapeMismatch);
  });

  it('splits tensors over the binding limit along dim 0 and refuses what cannot be split', async () => {
    const gpu = await freshGpuBackend({ bindingLimit: 1024 });
    const rng = new Rng(3);
    const x = rng.normals(20 * 32);
    const big = gpu.fromValues(x, [20, 32]); // 2560 bytes -> chunks of 8 rows
    const s = big.storage;
    expect(s.kind === 'webgpu' && s.chunks.map((c) => c.rows)).toEqual([8, 8, 4]);
    expect([...(await big.read())]).toEqual([...x]);
    expect(() => F.add(big, big)).toThrow(BindingLimitExceeded);
    expect(() => gpu.fromValues(new Float32Array(512), [512])).toThrow(BindingLimitExceeded);
    expect(() => gpu.fromValues(new Float32Array(2 * 300), [2, 300])).toThrow(/cannot be split/);
    gpu.ctx.destroy();
  });

  it('reports WGSL that fails to compile as ShaderCompileError', async () => {
    const gpu = await freshGpuBackend();
    const buf = gpu.ctx.createBuffer(16, 0x80);
    gpu.ctx.dispatch({
      key: 'broken_test_wg1',
      wgsl: () => `@group(0) @binding(1) var<storage, read_write> o: array<f32>;
@compute @workgroup_size(1) fn main() { o[0] = undefined_name; }`,
      bindings: [{ buffer: buf }],
      workgroups: [1],
    });
    await expect(gpu.sync()).rejects.toThrow(ShaderCompileError);
    gpu.ctx.destroy();
  });

  it('reports invalid submitted work as GpuValidationError naming the kernel', async () => {
    const gpu = await freshGpuBackend();
    const buf = gpu.ctx.createBuffer(16, 0x08 | 0x40); // UNIFORM | COPY_DST: not bindable as storage
    gpu.ctx.dispatch({
      key: 'misbound_test_wg1',
      wgsl: () => `@group(0) @binding(1) var<storage, read_write> o: array<f32>;
@compute @workgroup_size(1) fn main() { o[0] = 1.0; }`,
      bindings: [{ buffer: buf }],
      workgroups: [1],
    });
    await expect(gpu.sync()).rejects.toThrow(GpuValidationError);
    await gpu.sync(); // the error is reported once
    gpu.ctx.destroy();
  });

  it('turns a lost device into DeviceLost for every later call', async () => {
    const gpu = await freshGpuBackend();
    const a = gpu.fromValues([1, 2, 3], [3]);
    expect([...(await F.add(a, a).read())]).toEqual([2, 4, 6]);
    gpu.ctx.device.destroy();
    await gpu.ctx.device.lost;
    await new Promise((r) => setTimeout(r, 0));
    expect(gpu.ctx.lost).toBe(true);
    expect(() => F.add(a, a)).toThrow(DeviceLost);
    expect(() => gpu.fromValues([1], [1])).toThrow(DeviceLost);
    await expect(a.read()).rejects.toThrow(DeviceLost);
    await expect(gpu.sync()).rejects.toThrow(/device was lost/);
  });

  it('packs uniforms as 4-byte scalars padded to 16 bytes', () => {
    const u = new Uniforms().u32(7).f32(0.5).i32(-2);
    const view = new DataView(new ArrayBuffer(u.byteLength));
    u.writeTo(view, 0);
    expect(u.byteLength).toBe(16);
    expect([view.getUint32(0, true), view.getFloat32(4, true), view.getInt32(8, true)]).toEqual([7, 0.5, -2]);
  });
});
