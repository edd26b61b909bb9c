import { describe, expect, it } from 'vitest';
import type { SweepDetail, TrialRow } from '../src/sweepsapi';
import { cell, cellText, columns, sortTrials } from '../src/sweeptable';

function trial(number: number, x: number, loss?: number, state = 'SUCCEEDED'): TrialRow {
  return {
    number,
    job: `root~s-000${number}`,
    name: `s-000${number}`,
    params: { x, opt: number % 2 ? 'sgd' : 'adam' },
    state,
    value: loss ?? null,
    metrics: loss === undefined ? {} : { loss, acc: 1 - loss }
  };
}

const sweep: SweepDetail = {
  name: 's',
  status: 'running',
  objective: 'loss',
  mode: 'min',
  done: 2,
  submitted: 3,
  total: 4,
  best: { number: 1, job: 'root~s-0001', value: 0.04 },
  updated: 0,
  params: ['opt', 'x'],
  trials: [trial(0, 0.0, 0.09), trial(1, 0.5, 0.04), trial(2, 0.9, undefined, 'RUNNING')]
};

describe('sweep trial table', () => {
  it('has the fixed columns, then each parameter, then each metric a trial reported', () => {
    expect(columns(sweep).map(c => c.key)).toEqual([
      'number',
      'name',
      'state',
      'param:opt',
      'param:x',
      'metric:acc',
      'metric:loss'
    ]);
  });
  it('aligns only the parameters whose values are all numbers as numbers', () => {
    const numeric = Object.fromEntries(columns(sweep).map(c => [c.key, c.numeric]));
    expect([numeric['param:x'], numeric['param:opt'], numeric['metric:loss']]).toEqual([
      true,
      false,
      true
    ]);
  });
  it('reads a cell by its column and writes it short', () => {
    expect(cell(sweep.trials[1], 'metric:loss')).toBe(0.04);
    expect(cell(sweep.trials[1], 'param:opt')).toBe('sgd');
    expect(cell(sweep.trials[2], 'metric:loss')).toBeUndefined();
    expect(cellText(undefined)).toBe('–');
    expect(cellText(0.123456789)).toBe('0.1235');
    expect(cellText(3)).toBe('3');
    expect(cellText('<b>x</b>')).toBe('<b>x</b>'); // text, set with textContent
  });
  it('sorts by a metric either way, trials without it last', () => {
    const by = (key: string, d: 'ascending' | 'descending'): number[] =>
      sortTrials(sweep.trials, key, d).map(t => t.number);
    expect(by('metric:loss', 'ascending')).toEqual([1, 0, 2]);
    expect(by('metric:loss', 'descending')).toEqual([0, 1, 2]);
    expect(by('param:x', 'descending')).toEqual([2, 1, 0]);
    expect(by('state', 'ascending')).toEqual([2, 0, 1]);
    expect(sweep.trials.map(t => t.number)).toEqual([0, 1, 2]); // not sorted in place
  });
});
