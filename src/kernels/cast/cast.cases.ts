import type { ParityCase } from '../../testing';

// filled in by the cast kernel work
export const cases: ParityCase[] = [];
