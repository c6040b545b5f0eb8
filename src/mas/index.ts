// mas/: the RecursiveMAS method on top of the engine (links now; rollout, styles, rounds later).
export * from './links';
