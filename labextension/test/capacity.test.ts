import { describe, expect, it } from 'vitest';
import type { UsageRow } from '../src/api';
import { hoursText, usageCells, waitText, windowText } from '../src/capacity';

function row(over: Partial<UsageRow>): UsageRow {
  return {
    username: 'alice',
    users: 1,
    virtualCluster: 'default',
    gpuHoursAllocated: 2,
    gpuHoursUsed: null,
    gpuHoursIdle: null,
    cpuHours: 4.256,
    jobsStarted: 3,
    waitMeanSeconds: 42,
    ...over
  };
}

describe('capacity usage', () => {
  it('names the window in days or hours', () => {
    expect(windowText(168)).toBe('7 days');
    expect(windowText(24)).toBe('1 day');
    expect(windowText(12)).toBe('12 hours');
    expect(windowText(1)).toBe('1 hour');
  });
  it('shows unknown GPU use as a dash, never as 0', () => {
    expect(hoursText(null)).toBe('–');
    expect(hoursText(0)).toBe('0.00');
    expect(hoursText(1.234)).toBe('1.23');
  });
  it('says waits in seconds, minutes or hours', () => {
    expect(waitText(null)).toBe('–');
    expect(waitText(42.4)).toBe('42 s');
    expect(waitText(600)).toBe('10 min');
    expect(waitText(9000)).toBe('2.5 h');
  });
  it('a user row has its name, a total how many users it covers', () => {
    const cells = usageCells([
      row({}),
      row({ username: null, users: 3, gpuHoursUsed: 1, gpuHoursIdle: 1, waitMeanSeconds: null })
    ]);
    expect(cells[0]).toEqual(['alice', 'default', '2.00', '–', '–', '4.26', '3', '42 s']);
    expect(cells[1]).toEqual([
      'all (3 users)',
      'default',
      '2.00',
      '1.00',
      '1.00',
      '4.26',
      '3',
      '–'
    ]);
  });
});
