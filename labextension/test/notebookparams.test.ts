import { describe, expect, it } from 'vitest';
import { parseParameters } from '../src/notebookparams';

describe('parseParameters', () => {
  it('takes a JSON object, keeping the types papermill passes on', () => {
    expect(parseParameters('{"lr": 0.1, "epochs": 2, "name": "a"}')).toEqual({
      lr: 0.1,
      epochs: 2,
      name: 'a'
    });
    expect(parseParameters('  ')).toEqual({});
  });
  it('says what it wants for anything else', () => {
    for (const text of ['[1]', '3', '{lr: 1}', 'null']) {
      expect(parseParameters(text)).toMatch(/JSON object/);
    }
  });
});
