import { describe, expect, it } from 'vitest';
import { endsToolCall, findToolCall, formatResult } from './parse';

describe('findToolCall', () => {
  it('finds a python call, trims the body, and gives the index after the closing tag', () => {
    const text = 'Let me compute. <python>\n  print(2+2)\n</python> tail';
    const call = findToolCall(text, 0);
    expect(call).toEqual({ tool: 'python', body: 'print(2+2)', start: 16, end: 47 });
    expect(text.slice(call!.end)).toBe(' tail');
  });

  it('is case-insensitive, lower-cases the tool, and spans newlines', () => {
    const text = '<SEARCH>capital\nof France</Search>';
    expect(findToolCall(text, 0)).toEqual({ tool: 'search', body: 'capital\nof France', start: 0, end: 34 });
  });

  it('needs the same tag to close, and takes the first complete call at or after `from`', () => {
    const text = '<python>a</search> <python>b</python> <search>c</search>';
    expect(findToolCall(text, 0)).toMatchObject({ tool: 'python', body: 'a</search> <python>b', start: 0 });
    expect(findToolCall(text, 1)).toMatchObject({ tool: 'python', body: 'b', start: 19, end: 37 });
    expect(findToolCall(text, 37)).toMatchObject({ tool: 'search', body: 'c', start: 38, end: 56 });
    expect(findToolCall(text, 39)).toBeNull();
  });

  it('returns null for an unclosed tag and an empty body for an empty call', () => {
    expect(findToolCall('<python>print(1)', 0)).toBeNull();
    expect(findToolCall('x<python>  </python>', 0)).toEqual({ tool: 'python', body: '', start: 1, end: 20 });
  });
});

describe('endsToolCall', () => {
  it('detects a closing python or search tag in any case', () => {
    expect(endsToolCall('print(1)\n</python>')).toBe(true);
    expect(endsToolCall('q </SEARCH>')).toBe(true);
    expect(endsToolCall('<python>print(1)')).toBe(false);
    expect(endsToolCall('</result> </pythons')).toBe(false);
  });
});

describe('formatResult', () => {
  it('wraps the text with one space inside each tag', () => {
    expect(formatResult('4')).toBe(' <result> 4 </result>');
  });

  it('truncates to maxChars and says how many characters were dropped', () => {
    expect(formatResult('abcdefghij', 4)).toBe(' <result> abcd\n... [truncated 6 chars] </result>');
    expect(formatResult('abcd', 4)).toBe(' <result> abcd </result>');
    expect(formatResult('x'.repeat(6001))).toBe(` <result> ${'x'.repeat(6000)}\n... [truncated 1 chars] </result>`);
  });

  it('escapes a literal closing result tag', () => {
    expect(formatResult('a</result>b</RESULT>')).toBe(' <result> a< /result>b< /RESULT> </result>');
  });
});
