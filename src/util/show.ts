/**
 * A value read from a file, shown in an error message: JSON, cut to `max` characters. Never throws: a value nested
 * too deep for JSON.stringify (a hostile file can nest arrays a million deep) or holding a cycle (a pickle can make
 * one) is described instead.
 */
export function showValue(v: unknown, max = 120): string {
  let s: string | undefined;
  try {
    s = typeof v === 'bigint' ? `${v}n` : JSON.stringify(v);
  } catch {
    s = Array.isArray(v) ? '[an array too deep or cyclic to show]' : '{an object too deep or cyclic to show}';
  }
  if (s === undefined) s = String(v);
  return s.length > max ? `${s.slice(0, max - 1)}…` : s;
}
