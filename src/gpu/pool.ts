/**
 * Buffer pool keyed by (usage, size class). A released buffer may still be read by commands encoded
 * but not yet submitted, so it becomes reusable only after the next submit (`afterSubmit`). An acquire takes the
 * idle buffer made first: the buffers a sequence of acquires and releases gets depend on which are idle, not on the
 * order they came back in, so a decode step that repeats the last one's work gets the last one's buffers and its
 * dispatches find their bind groups made (context.ts).
 * Size classes: powers of two up to 1 MiB, then steps of 1/8 of the power of two, so waste stays < 12.5 %.
 */
export function sizeClass(bytes: number): number {
  const n = Math.max(16, Math.ceil(bytes / 4) * 4);
  if (n <= 1 << 20) return 2 ** Math.ceil(Math.log2(n));
  const p = 2 ** Math.floor(Math.log2(n));
  const step = p / 8;
  return Math.ceil(n / step) * step;
}

export class BufferPool {
  private free = new Map<string, GPUBuffer[]>();
  private pending: GPUBuffer[] = [];
  private sizes = new WeakMap<GPUBuffer, { key: string; id: number }>();
  private made = 0;
  /** Bytes held by live (acquired) buffers and by idle ones in the free lists. */
  liveBytes = 0;
  idleBytes = 0;
  /** Bytes of every buffer the pool has created and not destroyed: live, awaiting submit, or idle. */
  allocatedBytes = 0;
  /** High-water mark of allocatedBytes since creation or the last resetPeak() (benchmarks report it). */
  peakBytes = 0;

  constructor(
    private device: GPUDevice,
    /** When false every release destroys its buffer (debug switch: catches use-after-release). */
    public reuse = true,
  ) {}

  acquire(bytes: number, usage: GPUBufferUsageFlags, label?: string): GPUBuffer {
    const size = sizeClass(bytes);
    const key = `${usage}:${size}`;
    const list = this.free.get(key);
    let buf = list?.pop();
    if (buf) this.idleBytes -= size;
    else {
      buf = this.device.createBuffer({ size, usage, label });
      this.sizes.set(buf, { key, id: this.made++ });
      this.allocatedBytes += size;
      if (this.allocatedBytes > this.peakBytes) this.peakBytes = this.allocatedBytes;
    }
    this.liveBytes += size;
    return buf;
  }

  release(buf: GPUBuffer) {
    this.liveBytes -= buf.size;
    this.pending.push(buf);
  }

  /** Called by the context right after queue.submit(): released buffers become reusable. */
  afterSubmit() {
    const touched = new Set<GPUBuffer[]>();
    for (const buf of this.pending) {
      const meta = this.sizes.get(buf);
      if (!this.reuse || !meta) {
        buf.destroy();
        if (meta) this.allocatedBytes -= buf.size;
        continue;
      }
      let list = this.free.get(meta.key);
      if (!list) this.free.set(meta.key, (list = []));
      list.push(buf);
      touched.add(list);
      this.idleBytes += buf.size;
    }
    this.pending = [];
    // the first made last, where acquire pops
    const id = (b: GPUBuffer) => this.sizes.get(b)!.id;
    for (const list of touched) list.sort((a, b) => id(b) - id(a));
  }

  /** Destroys idle buffers (after a large model is unloaded, say). */
  trim() {
    for (const list of this.free.values()) for (const b of list) b.destroy();
    this.free.clear();
    this.allocatedBytes -= this.idleBytes;
    this.idleBytes = 0;
  }

  /** Starts a new high-water mark from what is allocated now. */
  resetPeak() {
    this.peakBytes = this.allocatedBytes;
  }
}
