/**
 * Compute pipelines cached by a readable key such as `rmsnorm_f32_wg256`. Shapes travel in uniforms,
 * so a key names only rank, dtype, variant and workgroup size, and the cache stays small.
 * Set RMAS_PRINT_WGSL=1 (Node) or globalThis.RMAS_PRINT_WGSL = true to print every new shader.
 */
export class PipelineCache {
  private cache = new Map<string, GPUComputePipeline>();
  private sizes = new Map<string, number>();
  /** Compilation checks still in flight: resolved into errors by GpuContext.sync(). */
  pendingChecks: Promise<string | null>[] = [];

  constructor(private device: GPUDevice) {}

  get size() {
    return this.cache.size;
  }

  keys(): string[] {
    return [...this.cache.keys()];
  }

  /** Invocations per workgroup of the pipeline `key` (its @workgroup_size; 0 when not a literal). */
  invocations(key: string): number {
    return this.sizes.get(key) ?? 0;
  }

  get(key: string, wgsl: () => string): GPUComputePipeline {
    const hit = this.cache.get(key);
    if (hit) return hit;
    const code = wgsl();
    this.sizes.set(key, workgroupSize(code));
    if (printWgsl()) console.log(`// ---- pipeline ${key}\n${code}`);
    this.device.pushErrorScope('validation');
    const module = this.device.createShaderModule({ code, label: key });
    const pipeline = this.device.createComputePipeline({ layout: 'auto', compute: { module, entryPoint: 'main' }, label: key });
    this.pendingChecks.push(
      this.device.popErrorScope().then(async (err) => {
        if (!err) return null;
        const info = await module.getCompilationInfo?.();
        const msgs = info?.messages?.map((m) => `${m.type} ${m.lineNum}:${m.linePos} ${m.message}`).join('\n') ?? '';
        this.cache.delete(key);
        return `pipeline ${key}: ${err.message}${msgs ? '\n' + msgs : ''}`;
      }),
    );
    this.cache.set(key, pipeline);
    return pipeline;
  }
}

function printWgsl(): boolean {
  const g = globalThis as { RMAS_PRINT_WGSL?: boolean; process?: { env?: Record<string, string | undefined> } };
  return !!g.RMAS_PRINT_WGSL || g.process?.env?.RMAS_PRINT_WGSL === '1';
}

/** The product of a shader's literal @workgroup_size; 0 when it names constants. */
export function workgroupSize(code: string): number {
  const m = /@workgroup_size\(([^)]*)\)/.exec(code);
  if (!m) return 0;
  const dims = m[1].split(',').map((d) => d.trim()).filter(Boolean);
  return dims.every((d) => /^\d+u?$/.test(d)) ? dims.reduce((p, d) => p * parseInt(d, 10), 1) : 0;
}
