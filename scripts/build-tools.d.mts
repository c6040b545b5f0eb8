// Types of build-tools.mjs, for the tests that use it.
export function which(cmd: string, extra?: readonly string[]): string | null;
export function nodeHeaders(root: string): { nodeInclude: string; addonApi: string; missing?: undefined } | { missing: string; nodeInclude?: undefined; addonApi?: undefined };
