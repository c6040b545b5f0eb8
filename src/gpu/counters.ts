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
