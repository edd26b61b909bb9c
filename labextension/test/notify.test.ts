import { describe, expect, it } from 'vitest';
import type { JobRow } from '../src/api';
import { jobRow } from './jobrow';
import { advance, changesSince, notice, preemptedNotice, Seen, summary } from '../src/notifyrules';
import { movedPlace, QueuedJob } from '../src/queueplace';

function job(name: string, state: string, retries = 0, user = 'alice', launched = true): JobRow {
  const launchedTime = launched ? '2026-01-01T00:00:00Z' : null;
  return jobRow(name, state, { retries, username: user, launchedTime });
}

const seen = (...rows: [string, string, number][]): Map<string, Seen> =>
  new Map(rows.map(([id, state, retries]) => [id, { state, retries }]));

describe('advance', () => {
  const list = (profile: string, user: string, ...jobs: JobRow[]) => ({ profile, user, jobs });
  it('tells of a change after the first list, not of what the first list shows', () => {
    const first = advance(null, list('local', 'alice', job('a', 'RUNNING')));
    expect(first.changes).toEqual([]);
    const next = advance(
      first.after,
      list('local', 'alice', job('a', 'SUCCEEDED'), job('b', 'RUNNING'))
    );
    expect(next.changes.map(c => [c.job.name, c.change])).toEqual([
      ['a', 'SUCCEEDED'],
      ['b', 'RUNNING']
    ]);
  });
  it('takes the list of another profile or user as a new baseline (a profile switch is not news)', () => {
    const first = advance(null, list('local', 'alice', job('a', 'RUNNING')));
    const other = advance(first.after, list('slurm', 'alice', job('x', 'SUCCEEDED')));
    expect(other.changes).toEqual([]);
    const carol = advance(other.after, list('slurm', 'carol', job('y', 'SUCCEEDED', 0, 'carol')));
    expect(carol.changes).toEqual([]);
    const back = advance(carol.after, list('local', 'alice', job('a', 'SUCCEEDED')));
    expect(back.changes).toEqual([]);
    expect(advance(back.after, list('local', 'alice', job('c', 'RUNNING'))).changes).toHaveLength(
      1
    );
  });
});

describe('changesSince', () => {
  it('sees nothing in the first list', () => {
    expect(changesSince(null, [job('a', 'RUNNING')])).toEqual([]);
  });
  it('counts RUNNING once (the first attempt), RETRIED per new attempt, then the final state', () => {
    const before = seen(
      ['alice~a', 'WAITING', 0],
      ['alice~b', 'RUNNING', 0],
      ['alice~c', 'RUNNING', 1]
    );
    const after = [job('a', 'RUNNING'), job('b', 'WAITING', 1), job('c', 'FAILED', 1)];
    const got = changesSince(before, after).map(c => [c.job.name, c.change, c.wasLive]);
    expect(got).toEqual([
      ['a', 'RUNNING', true],
      ['b', 'RETRIED', true],
      ['c', 'FAILED', true]
    ]);
  });
  it('a job that ran and ended between two lists started and ended; an ended job stays quiet', () => {
    const before = seen(['alice~old', 'SUCCEEDED', 0]);
    const after = [
      job('new', 'SUCCEEDED'),
      job('old', 'SUCCEEDED'),
      job('never', 'STOPPED', 0, 'alice', false)
    ];
    const got = changesSince(before, after).map(c => [c.job.name, c.change, c.wasLive]);
    expect(got).toEqual([
      ['new', 'RUNNING', false],
      ['new', 'SUCCEEDED', false],
      ['never', 'STOPPED', false]
    ]);
  });
});

describe('notice', () => {
  const [running] = changesSince(seen(['alice~a', 'WAITING', 0]), [job('a', 'RUNNING')]);
  const [ended] = changesSince(seen(['alice~a', 'RUNNING', 0]), [job('a', 'SUCCEEDED')]);
  it("tells a job's own changes in OpenPAI's words, and only those it asked for", () => {
    expect(notice(running, new Set(['RUNNING', 'SUCCEEDED']), true)).toBe(
      'The job a has started running.'
    );
    expect(notice(running, new Set(['SUCCEEDED']), true)).toBeNull();
    expect(notice(ended, new Set(['RUNNING']), true)).toBeNull();
    expect(summary('a', 'RETRIED', 2)).toBe('The job a has retried for 2 time(s).');
  });
  it('a job that asked for nothing (or not our own) is told of its end when it was seen live', () => {
    expect(notice(ended, new Set(), true)).toBe('PAI job a SUCCEEDED');
    expect(notice(ended, new Set(['RUNNING']), false)).toBe('PAI job a SUCCEEDED');
    expect(notice(running, null, true)).toBeNull();
  });
});

describe('preemption', () => {
  const being = (name: string) =>
    jobRow(name, 'RUNNING', {
      appExitCode: -1003,
      preempting: true,
      launchedTime: 't',
      username: 'alice'
    });
  const stale = (name: string, state: string, retries = 0) =>
    jobRow(name, state, { appExitCode: -1003, launchedTime: 't', username: 'alice', retries });
  it('tells the owner once when a job starts being preempted, whatever it asked for', () => {
    const before = seen(['alice~a', 'RUNNING', 0]);
    const [c] = changesSince(before, [being('a')]);
    expect(c.change).toBe('PREEMPTED');
    expect(notice(c, null, true)).toContain('PAI job a is being preempted');
    expect(notice(c, new Set(['SUCCEEDED']), true)).toContain('is being preempted');
    expect(notice(c, null, false)).toBeNull(); // another user's job
    const after = advance(
      { source: 'local\u0000alice', seen: before },
      { profile: 'local', user: 'alice', jobs: [being('a')] }
    );
    const again = advance(after.after, { profile: 'local', user: 'alice', jobs: [being('a')] });
    expect(again.changes).toEqual([]); // once
    expect(
      changesSince(before, [jobRow('a', 'RUNNING', { appExitCode: 0, username: 'alice' })])
    ).toEqual([]);
  });
  it('tells of a job new in the list being preempted, not of the next attempt (the old exit code)', () => {
    expect(changesSince(seen(), [being('a')]).map(c => c.change)).toEqual(['RUNNING', 'PREEMPTED']);
    const waitsAgain = { state: 'WAITING', retries: 0, preempting: false };
    const next = changesSince(new Map([['alice~a', waitsAgain]]), [stale('a', 'RUNNING')]);
    expect(next.map(c => c.change)).toEqual(['RUNNING']); // (runs again: as OpenPAI's first start)
    const after = changesSince(new Map([['alice~a', { ...waitsAgain, state: 'RUNNING' }]]), [
      stale('a', 'RUNNING')
    ]);
    expect(after).toEqual([]);
  });
  it('tells of a preemption whose grace ended between two lists (the job waits again)', () => {
    const [c, ...rest] = changesSince(seen(['alice~a', 'RUNNING', 0]), [stale('a', 'WAITING')]);
    expect([c.change, rest]).toEqual(['PREEMPTED', []]);
    expect(notice(c, null, true)).toBe(
      'PAI job a was preempted. It waits again and will resume from its checkpoint.'
    );
    // told once: while it was being preempted, or a retry (its retries grew), is no news of this kind
    const told = new Map([['alice~a', { state: 'RUNNING', retries: 0, preempting: true }]]);
    expect(changesSince(told, [stale('a', 'WAITING')])).toEqual([]);
    expect(
      changesSince(seen(['alice~a', 'RUNNING', 0]), [stale('a', 'WAITING', 1)]).map(c => c.change)
    ).toEqual(['RETRIED']);
  });
  it("says the daemon's words: who, why, the signal and the grace", () => {
    const grace = '; its tasks get SIGTERM, SIGKILL 20 s later';
    expect(preemptedNotice('a', `preempted by bob~u: a crit job needs 1 GPU${grace}`)).toBe(
      'PAI job a is being preempted by bob~u: a crit job needs 1 GPU; its tasks get SIGTERM, SIGKILL 20 s ' +
        'later. Save your work; it will wait again and resume from its checkpoint.'
    );
    expect(preemptedNotice('a', `node maintenance (root)${grace}`)).toBe(
      'PAI job a is being preempted: node maintenance (root); its tasks get SIGTERM, SIGKILL 20 s later. ' +
        'Save your work; it will wait again and resume from its checkpoint.'
    );
    expect(preemptedNotice('a', null, true)).toBe(
      'PAI job a was preempted. It waits again and will resume from its checkpoint.'
    );
  });
});

describe('movedPlace', () => {
  const q = (name: string, jobPriority: string): QueuedJob => ({
    job: `u~${name}`,
    username: 'u',
    name,
    ahead: 0,
    jobPriority,
    waitingReason: null
  });
  const line = [
    q('p1', 'prod'),
    q('d1', 'default'),
    q('t1', 'test'),
    q('d2', 'default'),
    q('o1', 'oppo')
  ];
  it('moves among the jobs of its own class (test and default share one)', () => {
    expect(movedPlace(line, 'u~d2', -1)).toBe(1);
    expect(movedPlace(line, 'u~d1', 1)).toBe(1);
    expect(movedPlace(line, 'u~d1', -1)).toBeNull();
    expect(movedPlace(line, 'u~p1', 1)).toBeNull();
    expect(movedPlace(line, 'u~o1', -1)).toBeNull();
    expect(movedPlace(line, 'u~gone', 1)).toBeNull();
  });
});
