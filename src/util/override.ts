/**
 * An engine override by name (RMAS_GEMV, RMAS_GEMM, RMAS_ROWS, RMAS_MAX_BATCH): `globalThis[name]` where a page or a
 * test sets it, else the environment variable in Node; undefined when neither is set.
 */
export function override(name: string): string | undefined {
  const g = globalThis as Record<string, unknown> & { process?: { env?: Record<string, string | undefined> } };
  const v = g[name] ?? g.process?.env?.[name];
  return v === undefined ? undefined : String(v);
}
