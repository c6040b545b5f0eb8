/** The median of some numbers (the mean of the two middle ones for an even count); NaN for none. */
export function median(xs: readonly number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  const k = s.length >> 1;
  if (!s.length) return NaN;
  return s.length % 2 ? s[k]! : (s[k - 1]! + s[k]!) / 2;
}
