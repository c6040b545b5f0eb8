/**
 * bin/dawn-noise.js, the filter bin/rmas.js puts on the runner's stderr: it drops exactly Dawn's two limit notices,
 * wherever the chunks split them, and passes everything else on at once (partial lines, `\r` redraws, Dawn's other
 * warnings, errors that start like a notice).
 */
import { describe, expect, it } from 'vitest';
import { dawnNoiseFilter } from '../bin/dawn-noise.js';

const UNIFORM =
  'Warning: maxDynamicUniformBuffersPerPipelineLayout artificially reduced from 1000000 to 16 to fit dynamic offset allocation limit.\n';
const STORAGE =
  'Warning: maxDynamicStorageBuffersPerPipelineLayout artificially reduced from 1000000 to 16 to fit dynamic offset allocation limit.\n';

/** What the filter passes on for these chunks, chunk by chunk, and then at the end. */
function run(chunks: string[]): string[] {
  const f = dawnNoiseFilter();
  return [...chunks.map((c) => f(c)), f('', true)];
}

describe('the Dawn notice filter', () => {
  it('drops the two notices, whole or split anywhere, and nothing around them', () => {
    const text = `backend: webgpu\n${UNIFORM}${STORAGE}model: llama\n`;
    expect(run([text])).toEqual(['backend: webgpu\nmodel: llama\n', '']);
    for (let cut = 0; cut <= text.length; cut++) {
      expect(run([text.slice(0, cut), text.slice(cut)]).join(''), `cut at ${cut}`).toBe('backend: webgpu\nmodel: llama\n');
    }
    // one character at a time
    expect(run([...text]).join('')).toBe('backend: webgpu\nmodel: llama\n');
    expect(run([UNIFORM.replace('\n', '\r\n')])).toEqual(['', '']);
  });

  it('passes everything else on as it comes', () => {
    // a progress redraw has no newline: it goes on at once
    expect(run(['[##...] step 1/20\r', '[###..] step 2/20\r'])).toEqual(['[##...] step 1/20\r', '[###..] step 2/20\r', '']);
    // a line that only starts like a notice waits for its end, then goes on whole
    const other = 'Warning: maxDynamicUniformBuffersPerPipelineLayout is 8\n';
    expect(run(['Warning: maxDyn', other.slice(15)])).toEqual(['', other, '']);
    expect(run(['Warning: vkCreateInstance: Found no drivers!\n'])).toEqual(['Warning: vkCreateInstance: Found no drivers!\n', '']);
    expect(run([`rmas: WebGpuUnavailable: ${UNIFORM}`])).toEqual([`rmas: WebGpuUnavailable: ${UNIFORM}`, '']);
    // the notice's text inside another line is that line's
    expect(run([`x ${UNIFORM}`])).toEqual([`x ${UNIFORM}`, '']);
    // what is held back at the end (no newline came) goes on then
    expect(run(['W'])).toEqual(['', 'W']);
    expect(run(['Warning: maxDynamicUniform'])).toEqual(['', 'Warning: maxDynamicUniform']);
  });
});
