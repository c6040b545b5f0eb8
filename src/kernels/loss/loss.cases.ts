import type { ParityCase } from '../../testing';

// filled in by the loss kernel work
export const cases: ParityCase[] = [];
