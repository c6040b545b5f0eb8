/** A filter of the runner's stderr, chunk by chunk, without Dawn's two limit notices; `end` flushes what it holds. */
export function dawnNoiseFilter(): (chunk: string, end?: boolean) => string;
