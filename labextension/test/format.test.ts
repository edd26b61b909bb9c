import { describe, expect, it } from 'vitest';
import type { JobRow } from '../src/api';
import { jobRow } from './jobrow';
import {
  badgeClass,
  bytes,
  counts,
  duration,
  emptyLog,
  endedSince,
  filterJobs
} from '../src/format';
import { visibleRange } from '../src/virtual';
import { axisTop } from '../src/chart';

function job(name: string, state: string, username = 'root'): JobRow {
  return jobRow(name, state, { username });
}

describe('duration', () => {
  it('formats seconds, minutes and hours', () => {
    expect(duration('2024-01-01T00:00:00Z', '2024-01-01T00:00:12Z')).toBe('12s');
    expect(duration('2024-01-01T00:00:00Z', '2024-01-01T00:03:05Z')).toBe('3m 05s');
    expect(duration('2024-01-01T00:00:00Z', '2024-01-01T01:02:00Z')).toBe('1h 02m');
  });
  it('counts to now while running and is empty before the start', () => {
    expect(duration('2024-01-01T00:00:00Z', null, Date.parse('2024-01-01T00:00:30Z'))).toBe('30s');
    expect(duration(null, null)).toBe('');
    expect(duration('not a time', null)).toBe('');
  });
});

describe('filterJobs', () => {
  const jobs = [job('alpha', 'RUNNING'), job('beta', 'SUCCEEDED'), job('Gamma', 'RUNNING', 'ann')];
  it('keeps a state and a case-blind search of name or user, in order', () => {
    expect(filterJobs(jobs, 'RUNNING', '').map(j => j.name)).toEqual(['alpha', 'Gamma']);
    expect(filterJobs(jobs, '', 'gam').map(j => j.name)).toEqual(['Gamma']);
    expect(filterJobs(jobs, '', 'ANN').map(j => j.name)).toEqual(['Gamma']);
    expect(filterJobs(jobs, 'FAILED', '')).toEqual([]);
    expect(filterJobs(jobs, '', '  ')).toHaveLength(3);
  });
});

describe('badges, counts, notifications', () => {
  it('maps states to badge classes, unknown ones too', () => {
    expect(badgeClass('RUNNING')).toBe('pai-Badge pai-Badge-running');
    expect(badgeClass('<b>')).toBe('pai-Badge pai-Badge-unknown');
  });
  it('counts running and waiting', () => {
    expect(
      counts([job('a', 'RUNNING'), job('b', 'WAITING'), job('c', 'RUNNING'), job('d', 'FAILED')])
    ).toEqual({
      running: 2,
      waiting: 1
    });
  });
  it('notifies only jobs seen live that have ended', () => {
    const before = new Map([
      ['root~a', 'RUNNING'],
      ['root~b', 'SUCCEEDED'],
      ['root~c', 'WAITING']
    ]);
    const after = [
      job('a', 'SUCCEEDED'),
      job('b', 'SUCCEEDED'),
      job('c', 'RUNNING'),
      job('new', 'FAILED')
    ];
    expect(endedSince(before, after).map(j => j.name)).toEqual(['a']);
  });
  it('formats bytes', () => {
    expect(bytes(512)).toBe('512 B');
    expect(bytes(1536)).toBe('1.5 KiB');
    expect(bytes(3 * 1024 ** 3)).toBe('3.0 GiB');
  });
});

describe('visibleRange', () => {
  it('draws only the rows in view plus the overscan', () => {
    expect(visibleRange(0, 460, 46, 10000, 5)).toEqual({ start: 0, end: 16 });
    const r = visibleRange(46 * 5000, 460, 46, 10000, 5);
    expect(r).toEqual({ start: 4995, end: 5016 });
    expect(r.end - r.start).toBeLessThan(30);
  });
  it('stays inside the list', () => {
    expect(visibleRange(10 ** 9, 460, 46, 100, 5).end).toBe(100);
    expect(visibleRange(0, 460, 46, 0)).toEqual({ start: 0, end: 0 });
  });
});

describe('axisTop', () => {
  it('leaves headroom above the largest value', () => {
    expect(axisTop([{ time: 0, values: { a: 100 } }], 10)).toBeCloseTo(115);
    expect(axisTop([], 10)).toBeCloseTo(11.5);
  });
});

describe('emptyLog', () => {
  it('says whether more is to come from the task state', () => {
    expect(emptyLog('WAITING', 'stdout')).toBe('(no stdout yet: the task has not started)');
    expect(emptyLog(undefined, 'all')).toBe('(no output yet: the task has not started)');
    expect(emptyLog('RUNNING', 'all')).toBe('(no output yet: it shows here as the task writes it)');
    expect(emptyLog('SUCCEEDED', 'stdout')).toBe('(the task wrote no stdout)');
    expect(emptyLog('FAILED', 'all')).toBe('(the task wrote no output)');
  });
});
