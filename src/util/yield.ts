/**
 * One turn of the event loop. A long run whose steps resolve at once (the CPU backend reads back synchronously)
 * would otherwise never let timers, I/O and signal handlers run: a parent's death, mpirun's SIGTERM, a cancel
 * from the page. setImmediate in Node; a zero-delay timer elsewhere.
 */
export function yieldToEventLoop(): Promise<void> {
  const immediate = (globalThis as { setImmediate?: (f: () => void) => unknown }).setImmediate;
  return new Promise((resolve) => (immediate ? immediate(resolve) : setTimeout(resolve, 0)));
}
