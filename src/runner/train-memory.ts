/**
 * train-outer's --gradient_checkpointing: upstream's 0/1, the roles whose layers to recompute, or auto, which plans
 * them (src/train/memory.ts) from the memory each device can give the step.
 */
import { TrainingMemoryExceeded, UsageError } from '../errors';
import type { HalfGemm } from '../kernels/kernel';
import type { OuterLink } from '../mas/links';
import type { StyleSpec } from '../mas/styles';
import type { Backend } from '../tensor/backend';
import { formatBytes, planPlacedMemory, weightParamCount } from '../train/memory';
import { outerStepForwards, type OuterAgent, type OuterLossOptions, type OuterSample } from '../train/outer';

/** train-outer's --gradient_checkpointing: 0/1 (upstream's) or the roles to recompute, comma-separated. */
export function recomputeRoles(v: string | undefined, roles: readonly string[]): boolean | string[] | 'auto' {
  if (v === undefined || ['0', '1', 'true', 'false'].includes(v.toLowerCase())) return v === '1' || v?.toLowerCase() === 'true';
  if (v.toLowerCase() === 'auto') return 'auto';
  const list = v.split(',').map((r) => r.trim());
  const bad = list.filter((r) => !roles.includes(r));
  if (bad.length)
    throw new UsageError(
      `--gradient_checkpointing ${v}: expected 0, 1, auto or roles of this style (${roles.join(', ')}); ${bad.join(', ')} is not one`,
    );
  return list;
}

/** A backend that reports its device memory (CudaBackend.memInfo). */
type MemoryReporting = Backend & { memInfo(): { free: number; total: number; poolUsed: number; poolReserved: number } };
const reportsMemory = (b: Backend): b is MemoryReporting => typeof (b as Partial<MemoryReporting>).memInfo === 'function';

/**
 * --gradient_checkpointing auto: the roles whose layers to recompute so that each device's step fits the
 * memory this process can use there (free memory plus what its pool already holds: the weights and links
 * loaded so far), planned by src/train/memory.ts from the largest sample of each stage. Throws
 * TrainingMemoryExceeded, before any step, when a device cannot fit the step even recomputing every agent.
 */
export function autoRecompute(
  style: StyleSpec, samples: readonly OuterSample[], loss: OuterLossOptions, agents: ReadonlyMap<string, OuterAgent>,
  outer: ReadonlyMap<string, OuterLink>, say: (s: string) => void,
): string[] {
  const backends = [...new Set([...agents.values()].map((x) => x.decoder.backend))];
  for (const b of backends) {
    if (!reportsMemory(b)) {
      throw new UsageError(`--gradient_checkpointing auto reads the device's free memory, which ${b.name} does not report; ` +
        'give 0, 1 or the roles to recompute (rmas plan-memory --gradient_checkpointing auto says which for a given budget)');
    }
  }
  const device = (role: string) => backends.indexOf(agents.get(role)!.decoder.backend);
  const budgets = Object.fromEntries(backends.map((b, i) => {
    const m = (b as MemoryReporting).memInfo();
    return [i, m.free + m.poolReserved];
  }));
  const forwards = outerStepForwards(style, samples, loss, agents, (role) => {
    const d = agents.get(role)!.decoder;
    return d.weights.totalBytes / weightParamCount(d.config);
  });
  const links = [
    ...[...outer].map(([name, l]) => ({ name, params: l.params.size, trainable: true })),
    ...[...agents].map(([role, x]) => ({ name: `inner_${role}`, params: x.inner.params.size, trainable: false })),
  ];
  const linkDevice = Object.fromEntries([
    ...style.links.map((l) => [l.key, device(l.from)] as const),
    ...[...agents.keys()].map((role) => [`inner_${role}`, device(role)] as const),
  ]);
  const halfGemm = (backends[0] as { halfGemm?: HalfGemm }).halfGemm;
  const plans = planPlacedMemory(
    { agents: forwards, links, recompute: 'auto', budgetBytes: budgets[0], halfGemm },
    Object.fromEntries([...agents.keys()].map((r) => [r, device(r)])),
    linkDevice,
    budgets,
  );
  const over = plans.filter((p) => !p.plan.fits);
  if (over.length) {
    throw new TrainingMemoryExceeded(over.map((p) => `${backends[p.device].name} (${p.agents.join(', ')}): ${p.plan.advice}`).join('; '));
  }
  const roles = plans.flatMap((p) => p.plan.recomputed);
  for (const p of plans) {
    say(
      `gradient_checkpointing auto on ${backends[p.device].name} (${p.agents.join(', ')}): recompute ${p.plan.recomputed.join(', ') || 'nothing'}; ` +
        `planned peak ${formatBytes(p.plan.peak)} of ${formatBytes(p.plan.budget)}\n`,
    );
  }
  return roles;
}
