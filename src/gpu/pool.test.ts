// The pool's byte accounting (allocated and peak) and the order it hands idle buffers out in, on a stand-in
// device: no GPU needed, the pool only calls createBuffer and destroy.
import { describe, expect, it } from 'vitest';
import { BufferPool, sizeClass } from './pool';

function fakeDevice() {
  const made: { size: number; destroyed: boolean }[] = [];
  const device = {
    createBuffer: ({ size }: { size: number }) => {
      const b = { size, destroyed: false, destroy: () => (b.destroyed = true) };
      made.push(b);
      return b;
    },
  } as unknown as GPUDevice;
  return { device, made };
}

describe('BufferPool byte accounting', () => {
  it('size classes: powers of two to 1 MiB, then eighths', () => {
    expect([sizeClass(1), sizeClass(100), sizeClass(4096), sizeClass((1 << 20) + 1)]).toEqual([16, 128, 4096, (1 << 20) + (1 << 17)]);
  });

  it('counts live, pending and idle buffers; the peak survives releases until resetPeak', () => {
    const { device, made } = fakeDevice();
    const pool = new BufferPool(device);
    const a = pool.acquire(1000, 0x80); // class 1024
    const b = pool.acquire(3000, 0x80); // class 4096
    expect([pool.allocatedBytes, pool.peakBytes, pool.liveBytes]).toEqual([5120, 5120, 5120]);
    pool.release(b);
    // released but not submitted: still allocated, still counted
    expect([pool.allocatedBytes, pool.liveBytes]).toEqual([5120, 1024]);
    pool.afterSubmit();
    expect([pool.allocatedBytes, pool.idleBytes]).toEqual([5120, 4096]);
    // reuse of an idle buffer creates nothing new
    const c = pool.acquire(4000, 0x80);
    expect(made.length).toBe(2);
    expect(pool.allocatedBytes).toBe(5120);
    pool.acquire(10, 0x80); // class 16
    expect([pool.allocatedBytes, pool.peakBytes]).toEqual([5136, 5136]);
    pool.release(c);
    pool.afterSubmit();
    pool.trim();
    expect([pool.allocatedBytes, pool.idleBytes, pool.peakBytes]).toEqual([1040, 0, 5136]);
    expect(made[1].destroyed).toBe(true);
    pool.resetPeak();
    expect(pool.peakBytes).toBe(1040);
    pool.release(a);
    pool.afterSubmit();
    expect([pool.allocatedBytes, pool.peakBytes]).toEqual([1040, 1040]);
  });

  it('hands out the idle buffer made first, whatever order they came back in', () => {
    const { device, made } = fakeDevice();
    const pool = new BufferPool(device);
    const bufs = [0, 1, 2, 3].map(() => pool.acquire(256, 0x80));
    for (const i of [2, 0, 3]) pool.release(bufs[i]!);
    pool.afterSubmit();
    pool.release(bufs[1]!);
    pool.afterSubmit();
    // a repeated step asks again for what it had: it gets buffers 0, 1, 2, 3 in that order
    expect([0, 1, 2, 3].map(() => made.indexOf(pool.acquire(200, 0x80) as never))).toEqual([0, 1, 2, 3]);
    expect(made.length).toBe(4);
  });

  it('without reuse, released buffers are destroyed at submit and leave the count', () => {
    const { device } = fakeDevice();
    const pool = new BufferPool(device, false);
    const a = pool.acquire(64, 0x80);
    pool.acquire(256, 0x80);
    pool.release(a);
    expect(pool.allocatedBytes).toBe(320);
    pool.afterSubmit();
    expect([pool.allocatedBytes, pool.peakBytes]).toEqual([256, 320]);
  });
});
