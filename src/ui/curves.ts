/**
 * SVG paths for the training curves. Plain SVG rather than a chart library: three small line charts of
 * at most a few thousand points, redrawn once per step, are cheap to draw as one path each, and the
 * page keeps no chart dependency. Above `maxPoints` points, each bucket keeps its min and max so that
 * spikes stay visible.
 */
export interface TrainPoint {
  step: number;
  loss: number;
  lr: number;
  gradNorm: number;
}

export interface Scaled {
  /** The SVG path ('' when there is no finite point); non-finite values break the line. */
  d: string;
  /** Points drawn. */
  points: number;
  min: number;
  max: number;
}

const fin = (v: number) => Number.isFinite(v);

/** Min/max decimation of (x, y) pairs to about `maxPoints` points, order kept. */
function decimate(xs: number[], ys: number[], maxPoints: number): [number[], number[]] {
  if (xs.length <= maxPoints) return [xs, ys];
  const buckets = Math.floor(maxPoints / 2);
  const size = xs.length / buckets;
  const ox: number[] = [];
  const oy: number[] = [];
  for (let b = 0; b < buckets; b++) {
    const lo = Math.floor(b * size);
    const hi = Math.min(xs.length, Math.floor((b + 1) * size));
    let iMin = -1;
    let iMax = -1;
    for (let i = lo; i < hi; i++) {
      if (!fin(ys[i]!)) continue;
      if (iMin < 0 || ys[i]! < ys[iMin]!) iMin = i;
      if (iMax < 0 || ys[i]! > ys[iMax]!) iMax = i;
    }
    if (iMin < 0) {
      ox.push(xs[lo]!);
      oy.push(NaN); // keep the gap
      continue;
    }
    for (const i of iMin === iMax ? [iMin] : iMin < iMax ? [iMin, iMax] : [iMax, iMin]) {
      ox.push(xs[i]!);
      oy.push(ys[i]!);
    }
  }
  return [ox, oy];
}

/** The path of y over x in a `width` × `height` box (y up), optionally on a log10 scale. */
export function linePath(
  xs: number[],
  ys: number[],
  width: number,
  height: number,
  opts: { log?: boolean; maxPoints?: number } = {},
): Scaled {
  const tf = (v: number) => (opts.log ? (v > 0 ? Math.log10(v) : NaN) : v);
  const [dx, dy0] = decimate(xs, ys, opts.maxPoints ?? 1000);
  const dy = dy0.map(tf);
  const finite = dy.filter(fin);
  if (!finite.length) return { d: '', points: 0, min: NaN, max: NaN };
  const min = Math.min(...finite);
  const max = Math.max(...finite);
  const fx = dx.filter((_, i) => fin(dy[i]!));
  const x0 = Math.min(...fx);
  const x1 = Math.max(...fx);
  const sx = (x: number) => (x1 === x0 ? width / 2 : ((x - x0) / (x1 - x0)) * width);
  const sy = (y: number) => (max === min ? height / 2 : height - ((y - min) / (max - min)) * height);
  let d = '';
  let points = 0;
  let pen = false;
  for (let i = 0; i < dx.length; i++) {
    if (!fin(dy[i]!) || !fin(dx[i]!)) {
      pen = false;
      continue;
    }
    d += `${pen ? 'L' : 'M'}${sx(dx[i]!).toFixed(1)} ${sy(dy[i]!).toFixed(1)}`;
    pen = true;
    points++;
  }
  return { d, points, min: opts.log ? 10 ** min : min, max: opts.log ? 10 ** max : max };
}

/** A compact axis label: 0.000512 → '5.12e-4', 2.5 → '2.50'. */
export function tick(v: number): string {
  if (!Number.isFinite(v)) return '—';
  const a = Math.abs(v);
  return a !== 0 && (a < 0.01 || a >= 1e4) ? v.toExponential(2) : v.toPrecision(3);
}
