// The GPU context's counters of issued work, apart from the context so that model code can read them without it.

/**
 * Work a context has issued since creation. `weightBytes` / `activationBytes`: the sizes of every storage binding of
 * every dispatch (a gather counts only the rows it reads of its table), whether its buffer holds a weight
 * (markWeight) or anything else: a kernel reads at most that, so weight bytes per token equal to the model's weight
 * bytes mean each weight is read once per token.
 */
export interface GpuCounters {
  dispatches: number;
  submits: number;
  readbacks: number;
  weightBytes: number;
  activationBytes: number;
  /** Workgroups launched, and their invocations (workgroup size from the shader's @workgroup_size). */
  workgroups: number;
  invocations: number;
}

/** b − a, field by field (the work between two snapshots). */
export function counterDelta(a: GpuCounters, b: GpuCounters): GpuCounters {
  return {
    dispatches: b.dispatches - a.dispatches, submits: b.submits - a.submits, readbacks: b.readbacks - a.readbacks,
    weightBytes: b.weightBytes - a.weightBytes, activationBytes: b.activationBytes - a.activationBytes,
    workgroups: b.workgroups - a.workgroups, invocations: b.invocations - a.invocations,
  };
}

/**
 * Dispatches per submit. The device starts on a batch while the next is encoded, so a forward's kernels overlap the
 * JavaScript that encodes the rest (ONNX Runtime's WebGPU EP submits every 16 as well). Measured on lavapipe, tiny
 * qwen3 (about 44 µs of encoding per dispatch): 16 against one submit per forward took prefill 1.2–1.36× and
 * decode 1.1–1.2× faster; SwiftShader in the page and a 0.6B model on lavapipe, bound by the kernels, did not move.
 */
export const DEFAULT_MAX_BATCH = 16;

/**
 * Submits of a step of `dispatches` dispatches that ends in one read-back, at the default batch size: one per full
 * batch, and the last (the read-back's copy goes with whatever is left).
 */
export const stepSubmits = (dispatches: number) => Math.floor(dispatches / DEFAULT_MAX_BATCH) + 1;
