/**
 * bench:realsize's page engines: one cold run in headless Chromium (SwiftShader) per call, on peer.html's
 * window.rmasPeer.realsize (ours in a worker of its own, transformers.js in the page), through the dev server that
 * bench/peer-page.ts starts. A fresh browser per run, so that its memory is the run's: the peak of the summed
 * proportional set size (Pss) of the browser's processes while it runs, beside the GPU buffer bytes the page counts.
 */
import { readFileSync, readdirSync } from 'node:fs';
import type { PageRealsizeRequest } from '../../src/ui/peer';
import type { RealsizeRun } from '../../src/ui/realsize-run';
import { openPeerPageAt } from '../peer-page';

/** The processes below `root` (its children, theirs, …), from /proc. */
function descendants(root: number): number[] {
  const kids = new Map<number, number[]>();
  for (const d of readdirSync('/proc')) {
    if (!/^\d+$/.test(d)) continue;
    try {
      const stat = readFileSync(`/proc/${d}/stat`, 'utf8');
      const ppid = Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]);
      kids.set(ppid, [...(kids.get(ppid) ?? []), Number(d)]);
    } catch {
      // gone while listed
    }
  }
  const out: number[] = [];
  const walk = (p: number) => {
    for (const c of kids.get(p) ?? []) {
      out.push(c);
      walk(c);
    }
  };
  walk(root);
  return out;
}

/** The summed Pss of the processes below this one, bytes (shared pages counted once across them). */
export function childrenPss(): number {
  let kb = 0;
  for (const pid of descendants(process.pid)) {
    try {
      const m = /^Pss:\s+(\d+) kB/m.exec(readFileSync(`/proc/${pid}/smaps_rollup`, 'utf8'));
      if (m) kb += Number(m[1]);
    } catch {
      // gone, or a kernel without smaps_rollup
    }
  }
  return kb * 1024;
}

/** One run in a fresh browser on the dev server at `base`; its peak memory sampled every half second. */
export async function pageRun(
  base: string,
  req: PageRealsizeRequest,
  opts: { log?: (line: string) => void; timeoutMs: number },
): Promise<RealsizeRun & { adapter: string; pssPeakBytes: number }> {
  const p = await openPeerPageAt(base, opts.log);
  let peak = childrenPss();
  const timer = setInterval(() => (peak = Math.max(peak, childrenPss())), 500);
  let cap: ReturnType<typeof setTimeout> | undefined;
  try {
    const timeout = new Promise<never>((_, reject) => {
      cap = setTimeout(() => reject(new Error(`the page run took longer than ${opts.timeoutMs / 1000} s`)), opts.timeoutMs);
    });
    const r = await Promise.race([p.page.evaluate((q) => window.rmasPeer!.realsize(q), req), timeout]);
    return { ...(r as RealsizeRun & { adapter: string }), pssPeakBytes: Math.max(peak, childrenPss()) };
  } finally {
    clearTimeout(cap);
    clearInterval(timer);
    await p.close();
  }
}
