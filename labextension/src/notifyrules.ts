// The pure part of Lab job notifications (notify.ts), unit-tested: which changes two job lists show, as OpenPAI's
// notification service counts them, and what to say of each.
import type { JobRow } from './api';
import { FINAL } from './states';

export type Change = 'RUNNING' | 'SUCCEEDED' | 'FAILED' | 'STOPPED' | 'RETRIED' | 'PREEMPTED';

/** The exit code of a preempted attempt (OpenPAI's PodPreemptedForCriticalPod; cluster/core/ending.py PREEMPTED):
 *  a job still RUNNING with it is being preempted, its tasks in their grace (docs/queue.md, "Preemption"). */
export const PREEMPTED_EXIT = -1003;

export interface Seen {
  state: string;
  retries: number;
  preempting?: boolean;
}

/** Whether the job is being preempted now (its tasks have their signal and are in their grace): the server's
 *  `preempting` (RUNNING, AttemptDeletionPending and PREEMPTED_EXIT; not the next attempt, whose list item still
 *  has the preempted attempt's exit code). */
export function preempting(job: JobRow): boolean {
  return job.preempting === true;
}

/** Whether a job seen running, not being preempted, now waits again as a preempted attempt's next one: its grace
 *  ended between two lists (its tasks ended at the signal), so the list never showed it being preempted. */
function requeuedByPreemption(was: Seen | undefined, job: JobRow): boolean {
  return (
    was?.state === 'RUNNING' &&
    !was.preempting &&
    job.state === 'WAITING' &&
    job.appExitCode === PREEMPTED_EXIT &&
    (job.retries ?? 0) === was.retries
  );
}

export interface JobChange {
  job: JobRow;
  change: Change;
  /** Whether the job was in the previous list and not final there (seen live in this session). */
  wasLive: boolean;
}

/** The changes between two lists, as OpenPAI's notification service counts them: RUNNING at the first
 *  attempt's start, RETRIED at each new attempt, then the final state. `before` null (the first list): none.
 *  A job new in `after` changed from nothing (it may have run and ended between two polls). */
export function changesSince(before: Map<string, Seen> | null, after: JobRow[]): JobChange[] {
  if (!before) {
    return [];
  }
  const out: JobChange[] = [];
  for (const job of after) {
    const was = before.get(job.id);
    const retries = job.retries ?? 0;
    const wasLive = was !== undefined && !FINAL.has(was.state);
    if (was && FINAL.has(was.state)) {
      continue;
    }
    const started = job.state === 'RUNNING' || (FINAL.has(job.state) && Boolean(job.launchedTime));
    if (started && retries === 0 && (was === undefined || was.state === 'WAITING')) {
      out.push({ job, change: 'RUNNING', wasLive });
    }
    if (retries > (was?.retries ?? 0)) {
      out.push({ job, change: 'RETRIED', wasLive });
    }
    if ((preempting(job) && !was?.preempting) || requeuedByPreemption(was, job)) {
      out.push({ job, change: 'PREEMPTED', wasLive });
    }
    if (FINAL.has(job.state)) {
      out.push({ job, change: job.state as Change, wasLive });
    }
  }
  return out;
}

/** What the last list showed: whose jobs (profile and user) and each job's state. */
export interface Baseline {
  source: string;
  seen: Map<string, Seen>;
}

/** The changes a new list shows against the last one, and the next baseline. A list of another profile or user
 *  (the sidebar switched profile) is a new baseline, like the first list: its jobs are not news. */
export function advance(
  before: Baseline | null,
  list: { profile: string; user: string; jobs: JobRow[] }
): { changes: JobChange[]; after: Baseline } {
  const source = `${list.profile}\u0000${list.user}`;
  const changes = changesSince(before?.source === source ? before.seen : null, list.jobs);
  const seen = new Map(
    list.jobs.map(j => [
      j.id,
      { state: j.state, retries: j.retries ?? 0, preempting: preempting(j) }
    ])
  );
  return { changes, after: { source, seen } };
}

/** OpenPAI's words for a change (the e-mail's summary, cluster/core/notify.py). */
export function summary(name: string, change: Change, retries: number): string {
  switch (change) {
    case 'RUNNING':
      return `The job ${name} has started running.`;
    case 'SUCCEEDED':
      return `The job ${name} has succeeded.`;
    case 'FAILED':
      return `The job ${name} has failed.`;
    case 'STOPPED':
      return `The job ${name} has been stopped.`;
    case 'RETRIED':
      return `The job ${name} has retried for ${retries} time(s).`;
    case 'PREEMPTED':
      return `The job ${name} is being preempted.`;
  }
}

/** What to tell the owner of a job being preempted: who and why, its signal and grace (the daemon's diagnostics:
 *  "preempted by bob~urgent: a crit job needs 1 GPU; its tasks get SIGTERM, SIGKILL 30 s later"), and what
 *  follows. Never silent, whatever the job asked to be told of. `waiting`: its grace already ended (the list
 *  shows it waiting again). */
export function preemptedNotice(name: string, diagnostics: string | null, waiting = false): string {
  const words = diagnostics?.trim() ?? '';
  const why = words.startsWith('preempted by ')
    ? words.slice('preempted'.length)
    : words
      ? `: ${words}`
      : '';
  return waiting
    ? `PAI job ${name} was preempted${why}. ` +
        'It waits again and will resume from its checkpoint.'
    : `PAI job ${name} is being preempted${why}. ` +
        'Save your work; it will wait again and resume from its checkpoint.';
}

/** What to show for a change: `asked` (the job's own list of changes; null: it asked for none), `own` (the
 *  user's job: only those can ask). Null: nothing. */
export function notice(c: JobChange, asked: Set<string> | null, own: boolean): string | null {
  if (c.change === 'PREEMPTED') {
    return own ? preemptedNotice(c.job.name, null, c.job.state === 'WAITING') : null; // (notify.ts: + why)
  }
  if (own && asked && asked.size) {
    return asked.has(c.change) ? summary(c.job.name, c.change, c.job.retries ?? 0) : null;
  }
  if (FINAL.has(c.change) && c.wasLive) {
    return `PAI job ${c.job.name} ${c.change}`; // the end of a job seen live in this session
  }
  return null;
}
