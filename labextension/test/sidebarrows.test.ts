import { describe, expect, it } from 'vitest';
import type { JobRow } from '../src/api';
import { jobRow } from './jobrow';
import { duration, nextChange } from '../src/format';
import {
  nameParts,
  ROW_COLUMNS,
  rowFacts,
  rowKey,
  rowTip,
  sidebarItems,
  sweepSummary
} from '../src/sidebarrows';

function job(name: string, state: string, sweep: string | null = null): JobRow {
  return jobRow(name, state, { sweep });
}

describe('names cut in the middle', () => {
  it('keeps the end that tells trials apart: the last part after a separator', () => {
    expect(nameParts('learning-rate-search-0001')).toEqual(['learning-rate-search', '-0001']);
    expect(nameParts('mnist_resnet50_trial.17')).toEqual(['mnist_resnet50_trial', '.17']);
  });
  it('keeps the last 8 characters of a name with no short last part', () => {
    expect(nameParts('abcdefghijklmnopqrstuvwxyz')).toEqual(['abcdefghijklmnopqr', 'stuvwxyz']);
  });
  it('does not cut a short name', () => {
    expect(nameParts('hello-job')).toEqual(['hello-job', '']);
  });
  it('gives each of 21 trials of one sweep a distinct end, and the parts are the whole name', () => {
    const names = Array.from(
      { length: 21 },
      (_, i) => `a-sweep-with-a-long-name-${String(i).padStart(4, '0')}`
    );
    const ends = names.map(n => nameParts(n)[1]);
    expect(new Set(ends).size).toBe(21);
    expect(names.map(n => nameParts(n).join(''))).toEqual(names);
  });
});

describe("a sweep's trials grouped under their sweep", () => {
  const trials = Array.from({ length: 21 }, (_, i) =>
    job(`grid-${String(20 - i).padStart(4, '0')}`, i < 2 ? 'RUNNING' : 'SUCCEEDED', 'grid')
  );
  const jobs = [
    job('newest', 'RUNNING'),
    ...trials.slice(0, 10),
    job('between', 'FAILED'),
    ...trials.slice(10)
  ];

  it('shows one row for the sweep where its newest trial is, the other jobs in their order', () => {
    const items = sidebarItems(jobs, new Set());
    expect(items.map(i => (i.kind === 'sweep' ? `sweep:${i.sweep}` : i.job.name))).toEqual([
      'newest',
      'sweep:grid',
      'between'
    ]);
    const group = items[1];
    expect(group.kind === 'sweep' && group.jobs.length).toBe(21);
  });
  it('lists the trials under the sweep once it is opened', () => {
    const items = sidebarItems(jobs, new Set(['grid']));
    expect(items.length).toBe(3 + 21);
    expect(items.slice(2, 23).every(i => i.kind === 'job' && i.nested)).toBe(true);
    expect(items[23].kind === 'job' && items[23].job.name).toBe('between');
    expect(items[0].kind === 'job' && items[0].nested).toBe(false);
  });
  it('keys every row apart from any job id', () => {
    const keys = sidebarItems(jobs, new Set(['grid'])).map(i => i.key);
    expect(new Set(keys).size).toBe(keys.length);
    expect(keys).toContain('sweep:grid');
  });
  it('sums the states of the trials', () => {
    expect(sweepSummary(trials)).toBe('21 trials · 2 running · 19 succeeded');
    expect(sweepSummary([trials[0]])).toBe('1 trial · 1 running');
  });
});

describe('a running duration ticks when its text changes', () => {
  const start = '2024-01-01T00:00:00Z';
  const at = (ms: number): number => Date.parse(start) + ms;
  it('waits until the next second while seconds show', () => {
    const now = at(12_300); // "12s"
    const wait = nextChange(start, now);
    expect(wait).toBe(200);
    expect(duration(start, null, now + wait)).toBe('13s');
    expect(duration(start, null, now + wait - 1)).toBe('12s');
  });
  it('waits until the next minute once hours show', () => {
    const now = at(3_725_000); // "1h 02m"
    const wait = nextChange(start, now);
    expect(duration(start, null, now + wait - 1)).toBe('1h 02m');
    expect(duration(start, null, now + wait)).toBe('1h 03m');
  });
  it('counts from zero for a start a little in the future (clocks apart)', () => {
    const now = at(-2_000);
    expect(duration(start, null, now)).toBe('0s');
    expect(duration(start, null, now + nextChange(start, now))).toBe('1s');
  });
  it('does not tick without a start', () => {
    expect(nextChange(null, Date.now())).toBe(Infinity);
  });
});

describe("a row's facts, from the one column list", () => {
  const ended = jobRow('train', 'SUCCEEDED', {
    username: 'alice',
    submissionTime: '2026-01-01T10:00:00Z',
    launchedTime: '2026-01-01T10:00:05Z',
    completedTime: '2026-01-01T10:02:05Z',
    retries: 1,
    totalGpuNumber: 2
  });

  it('shows each column with a text, in the list order, and leaves out the empty ones', () => {
    const facts = rowFacts(ended);
    expect(facts.map(([name]) => name)).toEqual(ROW_COLUMNS.map(c => c.name));
    expect(facts.slice(0, 4)).toEqual([
      ['user', 'alice'],
      ['duration', duration(ended.launchedTime, ended.completedTime)],
      ['gpus', '2 GPU'],
      ['retries', '1 retry']
    ]);
    const waiting = jobRow('queued', 'WAITING', { username: 'bob' });
    expect(rowFacts(waiting)).toEqual([['user', 'bob']]);
  });

  it('says the submission time as such in the tooltip only', () => {
    const submitted = rowFacts(ended).find(([name]) => name === 'submitted')?.[1] ?? '';
    expect(submitted).not.toBe('');
    expect(rowTip(ended).split(' · ')).toEqual([
      'alice',
      duration(ended.launchedTime, ended.completedTime),
      '2 GPU',
      '1 retry',
      `submitted ${submitted}`
    ]);
  });

  it('is drawn again when a column changes, not while a running duration ticks', () => {
    expect(rowKey({ ...ended, retries: 2 })).not.toBe(rowKey(ended));
    expect(rowKey({ ...ended, totalGpuNumber: 4 })).not.toBe(rowKey(ended));
    expect(rowKey({ ...ended, state: 'FAILED' })).not.toBe(rowKey(ended));
    const running = { ...ended, state: 'RUNNING', completedTime: null };
    expect(rowKey(running)).toBe(rowKey({ ...running }));
  });
});
