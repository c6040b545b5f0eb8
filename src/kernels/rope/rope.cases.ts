import type { ParityCase } from '../../testing';

// filled in by the rope kernel work
export const cases: ParityCase[] = [];
