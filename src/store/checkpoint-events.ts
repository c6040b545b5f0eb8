/**
 * "The checkpoint list changed" (a save, rename, removal or import in the page's registry), told to every view of every
 * tab of the app through a BroadcastChannel, so that a list shown elsewhere (the Ask view's pickers) is read again
 * instead of showing a removed checkpoint or an old name. This module imports nothing: a view subscribes without
 * loading the registry.
 */
const CHANNEL = 'rmas-checkpoints';

/** Announces a change of the registry (nothing where there is no BroadcastChannel). */
export function announceCheckpointsChanged(): void {
  if (typeof BroadcastChannel === 'undefined') return;
  const c = new BroadcastChannel(CHANNEL);
  c.postMessage('changed');
  c.close();
}

/** Calls `onChange` after each change announced, in this tab or another; returns the unsubscribe. */
export function onCheckpointsChanged(onChange: () => void): () => void {
  if (typeof BroadcastChannel === 'undefined') return () => {};
  const c = new BroadcastChannel(CHANNEL);
  c.onmessage = () => onChange();
  return () => c.close();
}
