/** Reading the command lines of a Markdown text's ```bash blocks (the README's, which tests run as written). */

/** The lines of a Markdown text's ```bash blocks that start with `prefix`. */
export function bashLines(markdown: string, prefix: string): string[] {
  const blocks = [...markdown.matchAll(/^```bash\n([^]*?)^```/gm)].map((m) => m[1]!);
  return blocks.flatMap((b) => b.split('\n')).map((l) => l.trim()).filter((l) => l.startsWith(prefix));
}

/** A command line's words as a POSIX shell splits them (double and single quotes; no expansions are used). */
export function words(line: string): string[] {
  const out: string[] = [];
  for (const m of line.matchAll(/"((?:[^"\\]|\\.)*)"|'([^']*)'|(\S+)/g))
    out.push(m[1] !== undefined ? m[1].replace(/\\(.)/g, '$1') : (m[2] ?? m[3])!);
  return out;
}
