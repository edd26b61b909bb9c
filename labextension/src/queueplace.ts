// The pure part of the queue view (queueview.ts), unit-tested: what it reads, and where up / down moves a job.

export const CLASSES = ['crit', 'prod', 'default', 'oppo'] as const;

export interface QueuedJob {
  job: string;
  username: string;
  name: string;
  ahead: number;
  jobPriority: string;
  waitingReason: string | null;
}

export interface WaitingQueue {
  virtualClusters: Record<string, QueuedJob[]>;
  canReorder: boolean;
}

/** The place to ask for when moving `job` by `step` (-1 up, +1 down) among the jobs of its own class in its
 *  line (what `position` means to the REST), or null when it is already first / last of its class. */
export function movedPlace(line: QueuedJob[], job: string, step: -1 | 1): number | null {
  const mine = line.find(j => j.job === job);
  if (!mine) {
    return null;
  }
  const same = line.filter(j => sameClass(j.jobPriority, mine.jobPriority));
  const at = same.findIndex(j => j.job === job);
  const to = at + step;
  return to < 0 || to >= same.length ? null : to;
}

function sameClass(a: string, b: string): boolean {
  const norm = (c: string): string => (c === 'test' ? 'default' : c); // test and default share a rank
  return norm(a) === norm(b);
}
