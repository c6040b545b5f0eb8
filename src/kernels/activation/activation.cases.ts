import type { ParityCase } from '../../testing';

// filled in by the activation kernel work
export const cases: ParityCase[] = [];
