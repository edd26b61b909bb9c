import { describe, expect, it } from 'vitest';
import type { JobRow } from '../src/api';
import { jobRow } from './jobrow';
import { agoLabel, ticks } from '../src/chart';
import { useText } from '../src/capacity';
import { endedKernelJobs, freeName, kernelNotebook, plural, rowTitle } from '../src/format';

function job(name: string, state: string): JobRow {
  return jobRow(name, state);
}

describe('chart axes', () => {
  it('ticks are round steps from 0 that end at or above the top', () => {
    expect(ticks(115)).toEqual([0, 50, 100, 150]);
    expect(ticks(11.5)).toEqual([0, 5, 10, 15]);
    expect(ticks(4)).toEqual([0, 1, 2, 3, 4]);
    const t = ticks(0.23);
    expect(t[0]).toBe(0);
    expect(t[t.length - 1]).toBeGreaterThanOrEqual(0.23);
  });
  it('byte ticks step in powers of two', () => {
    const mib = 1024 * 1024;
    expect(ticks(300 * mib, 4, 'bytes')).toEqual([0, 128 * mib, 256 * mib, 384 * mib]);
  });
  it('a bad top still gives an axis', () => {
    expect(ticks(0)).toEqual([0, 1]);
    expect(ticks(Number.NaN)).toEqual([0, 1]);
  });
  it('the x axis counts seconds before now', () => {
    expect(agoLabel(0)).toBe('now');
    expect(agoLabel(30)).toBe('-30 s');
    expect(agoLabel(120)).toBe('-2 min');
    expect(agoLabel(90)).toBe('-90 s');
  });
});

describe('sidebar words', () => {
  it('says 1 minute, 2 minutes', () => {
    expect(plural(1, 'minute')).toBe('1 minute');
    expect(plural(2, 'minute')).toBe('2 minutes');
    expect(plural(0.5, 'minute')).toBe('0.5 minutes');
  });
  it('names a kernel job by its notebook', () => {
    expect(kernelNotebook('Untitled-kernel-1a2b3c')).toBe('Untitled');
    expect(kernelNotebook('mnist-kernel-00ff00')).toBe('mnist');
    expect(kernelNotebook('my-kernel-job')).toBeNull();
    expect(rowTitle('Untitled-kernel-1a2b3c')).toBe('Untitled.ipynb · kernel');
    expect(rowTitle('train')).toBe('train');
  });
  it('only ended kernel jobs are hidden or cleared', () => {
    const jobs = [
      job('a-kernel-000001', 'STOPPED'),
      job('b-kernel-000002', 'RUNNING'),
      job('train', 'STOPPED')
    ];
    expect(endedKernelJobs(jobs).map(j => j.name)).toEqual(['a-kernel-000001']);
  });
  it('proposes a free name for a clone', () => {
    expect(freeName('train', ['train'])).toBe('train-copy');
    expect(freeName('train', ['train', 'train-copy', 'train-copy-2'])).toBe('train-copy-3');
  });
  it('capacity text keeps one decimal', () => {
    expect(useText(1.5, 2, 'CPUs')).toBe('1.5 / 2 CPUs');
    expect(useText(0.25, 7.8125, 'GiB')).toBe('0.3 / 7.8 GiB');
  });
});
