/**
 * `--devices LIST` (with --backend cuda): the GPUs a command uses. A command that runs one model uses the
 * first; `rmas ask` and `rmas train-outer` spread a system's roles over them in role order (role i on
 * device i mod n), one role per device when there are as many devices as roles: the way to run a system
 * that does not fit on one GPU (`rmas plan-memory` says when).
 */
import type { Backend } from '../tensor/backend';
import { CudaBackend } from '../tensor/cuda';

/** Where a command runs: --backend and --devices, or upstream's --device (cli.ts reads them into the other two). */
export const DEVICE_OPTIONS = { backend: { type: 'string' }, devices: { type: 'string' }, device: { type: 'string' } } as const;

/** The indices of a --devices value: comma-separated, distinct, non-negative integers. Throws `usage(message)`. */
export function parseDevices(value: string | undefined, backend: string | undefined, usage: (message: string) => Error): number[] | null {
  if (value === undefined) return null;
  if (backend !== 'cuda') throw usage(`--devices ${value} picks CUDA devices: it needs --backend cuda`);
  const parts = value.split(',').map((x) => x.trim());
  if (!parts.length || parts.some((x) => !/^\d+$/.test(x)))
    throw usage(`--devices ${value}: expected CUDA device indices separated by commas, e.g. 0,1`);
  const ids = parts.map(Number);
  const twice = ids.find((d, i) => ids.indexOf(d) !== i);
  if (twice !== undefined) throw usage(`--devices ${value}: device ${twice} is listed twice`);
  return ids;
}

/** Role → device index: the roles in order over the devices (role i on devices[i mod n]). */
export function placeRoles(roles: readonly string[], devices: readonly number[]): Record<string, number> {
  return Object.fromEntries(roles.map((r, i) => [r, devices[i % devices.length]]));
}

/** Opens the devices of placeRoles (one CudaBackend per device) and says where each role runs. */
export async function openPlacement(
  roles: readonly string[],
  devices: readonly number[],
  say: (line: string) => void,
): Promise<Record<string, Backend>> {
  const where = placeRoles(roles, devices);
  const out: Record<string, Backend> = {};
  for (const r of roles) out[r] = await CudaBackend.create({ device: where[r] });
  say(`placement: ${roles.map((r) => `${r} on cuda:${where[r]}`).join(', ')}\n`);
  return out;
}
