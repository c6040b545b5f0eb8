/**
 * Whether kernels may reduce through subgroups. WGSL's subgroup builtins say nothing about how a workgroup is cut into
 * subgroups; the reductions (kernels/reduce-wgsl.ts) assume the layout every known implementation uses: subgroup j
 * holds the invocations j·size … j·size + size − 1 of local_invocation_index, in order. A context checks that
 * once, with one small dispatch, before any kernel takes the subgroup path; anything else (no 'subgroups' feature,
 * another layout, a size under 4, an error) keeps the workgroup-memory reductions.
 */

/** The workgroup size the probe runs at: the kernels that reduce through subgroups use 256 invocations. */
export const PROBE_WORKGROUP = 256;

export interface SubgroupProbe {
  /** The subgroup size the probe's pipeline ran with (another pipeline may get another; kernels read theirs). */
  size: number;
  /** Every invocation's subgroup_invocation_id was local_invocation_index mod size, with one size throughout. */
  contiguous: boolean;
}

const PROBE_WGSL = `enable subgroups;
@group(0) @binding(0) var<storage, read_write> o: array<u32>;
@compute @workgroup_size(${PROBE_WORKGROUP})
fn main(@builtin(local_invocation_index) l: u32, @builtin(subgroup_invocation_id) s: u32, @builtin(subgroup_size) n: u32) {
  o[2u * l] = s;
  o[2u * l + 1u] = n;
}`;

/** Runs the layout probe on `device` (which must have 'subgroups'); null when it cannot run. */
export async function probeSubgroups(device: GPUDevice): Promise<SubgroupProbe | null> {
  const bytes = 2 * 4 * PROBE_WORKGROUP;
  device.pushErrorScope('validation');
  const out = device.createBuffer({ size: bytes, usage: GPUBufferUsage.STORAGE | GPUBufferUsage.COPY_SRC });
  const back = device.createBuffer({ size: bytes, usage: GPUBufferUsage.MAP_READ | GPUBufferUsage.COPY_DST });
  try {
    const pipeline = device.createComputePipeline({
      layout: 'auto',
      compute: { module: device.createShaderModule({ code: PROBE_WGSL }), entryPoint: 'main' },
    });
    const enc = device.createCommandEncoder();
    const pass = enc.beginComputePass();
    pass.setPipeline(pipeline);
    pass.setBindGroup(
      0,
      device.createBindGroup({ layout: pipeline.getBindGroupLayout(0), entries: [{ binding: 0, resource: { buffer: out } }] }),
    );
    pass.dispatchWorkgroups(1);
    pass.end();
    enc.copyBufferToBuffer(out, 0, back, 0, bytes);
    device.queue.submit([enc.finish()]);
    if (await device.popErrorScope()) return null;
    await back.mapAsync(GPUMapMode.READ);
    const a = new Uint32Array(back.getMappedRange().slice(0));
    back.unmap();
    return readProbe(a);
  } catch {
    return null;
  } finally {
    out.destroy();
    back.destroy();
  }
}

/** The probe's verdict from its output: (subgroup_invocation_id, subgroup_size) per local invocation index. */
export function readProbe(a: Uint32Array): SubgroupProbe {
  const size = a[1];
  let contiguous = size >= 4 && PROBE_WORKGROUP % size === 0;
  for (let l = 0; l < PROBE_WORKGROUP && contiguous; l++) contiguous = a[2 * l] === l % size && a[2 * l + 1] === size;
  return { size, contiguous };
}
