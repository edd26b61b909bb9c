import { execFileSync } from 'child_process';
import { describe, expect, it } from 'vitest';
import { FINAL, STATES } from '../src/states';

function python(code: string): string {
  return execFileSync(process.env.PAI_PYTHON || '../.venv/bin/python', ['-c', code], {
    cwd: '..',
    encoding: 'utf-8',
    env: { ...process.env, PYTHONPATH: '..' }
  });
}

describe('job states', () => {
  it('are the daemon’s: the final ones and every one the sidebar filters by', () => {
    const py = JSON.parse(
      python(
        'import json; from pai_jupyter.common.states import FINAL, JOB_STATES; ' +
          'print(json.dumps({"final": sorted(FINAL), "all": list(JOB_STATES)}))'
      )
    );
    expect([...FINAL].sort()).toEqual(py.final);
    expect(STATES.filter(s => !py.all.includes(s))).toEqual([]);
    expect(py.all.filter((s: string) => !(STATES as readonly string[]).includes(s))).toEqual([
      'STOPPING'
    ]);
  });
});
