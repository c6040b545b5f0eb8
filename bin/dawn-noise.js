#!/usr/bin/env node
// The runner's stderr without Dawn's two limit notices. Dawn (the `webgpu` package) prints, from native code straight
// to the process's stderr, whenever it opens a Vulkan adapter whose dynamic-buffer limits exceed its own (lavapipe,
// RADV):
//   Warning: maxDynamicUniformBuffersPerPipelineLayout artificially reduced from 1000000 to 16 to fit dynamic offset allocation limit.
//   Warning: maxDynamicStorageBuffersPerPipelineLayout artificially reduced from 1000000 to 16 to fit dynamic offset allocation limit.
// They ask nothing of the user, and Dawn has no switch for them (dawn::WarningLog in NormalizeLimits,
// src/dawn/native/Limits.cpp; no toggle, no log level), nor can Node move a native write. So bin/rmas.js sends its
// child's stderr through this program, which drops exactly those two lines and passes everything else on as it
// comes: partial lines and `\r` progress redraws at once, Dawn's other warnings and errors untouched.
import { realpathSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

const NOTICE = new RegExp(
  '^Warning: maxDynamic(?:Uniform|Storage)BuffersPerPipelineLayout artificially reduced from \\d+ to \\d+ ' +
    'to fit dynamic offset allocation limit\\.\\r?\\n$',
);
const START = 'Warning: maxDynamic';

/**
 * A filter of a text stream, chunk by chunk: returns what to pass on now. A line that starts like a notice is held
 * until its end, then dropped if it is one; anything else goes on at once. `end` flushes what is held.
 * @returns {(chunk: string, end?: boolean) => string}
 */
export function dawnNoiseFilter() {
  let held = '';
  return (chunk, end = false) => {
    const s = held + chunk;
    held = '';
    let out = '';
    let i = 0; // always at the start of a line
    while (i < s.length) {
      const nl = s.indexOf('\n', i);
      const head = s.slice(i, i + START.length);
      if (head === START || (nl < 0 && START.startsWith(head))) {
        if (nl < 0) {
          if (end) out += s.slice(i);
          else held = s.slice(i);
          return out;
        }
        const line = s.slice(i, nl + 1);
        if (!NOTICE.test(line)) out += line;
      } else {
        out += nl < 0 ? s.slice(i) : s.slice(i, nl + 1);
        if (nl < 0) return out;
      }
      i = nl + 1;
    }
    return out;
  };
}

const isMain = () => {
  try {
    return !!process.argv[1] && realpathSync(process.argv[1]) === realpathSync(fileURLToPath(import.meta.url));
  } catch {
    return false;
  }
};
if (isMain()) {
  // a Ctrl-C reaches the whole process group: this program stays until the runner, which stops on its own terms,
  // has closed the pipe, so that its last words still get through
  for (const sig of ['SIGINT', 'SIGTERM', 'SIGHUP']) process.on(sig, () => {});
  const filter = dawnNoiseFilter();
  const pass = (/** @type {string} */ s) => void (s && process.stdout.write(s));
  process.stdin.setEncoding('utf8');
  process.stdin.on('data', (chunk) => pass(filter(chunk)));
  process.stdin.on('end', () => pass(filter('', true)));
}
