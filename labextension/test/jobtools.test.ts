import { describe, expect, it } from 'vitest';
import { parseMinutes } from '../src/jobtools';

describe('parseMinutes', () => {
  it('takes a positive number of minutes', () => {
    expect(parseMinutes('90')).toBe(90);
    expect(parseMinutes(' 0.5 ')).toBe(0.5);
  });
  it('refuses empty, zero, negative and non-numbers with a message', () => {
    for (const bad of ['', '0', '-3', 'abc', 'Infinity']) {
      expect(typeof parseMinutes(bad)).toBe('string');
    }
  });
});
