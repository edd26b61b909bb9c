// What the sidebar's rows are, as data (no DOM; test/sidebarrows.test.ts): a sweep's trials under one row of their
// sweep (21 trials were 21 rows of one name), and names cut in the middle, where trials differ, not at their end.
import type { JobRow } from './api';
import { duration, when } from './format';
import { STATES } from './states';

/** A fact a job's row shows under its name: its class (`pai-JobRow-<name>`), its text ('' leaves it out) and, in
 * the row's tooltip, how it reads there. */
export interface RowColumn {
  name: string;
  text: (job: JobRow) => string;
  tip?: (text: string) => string;
}

/** The row's facts in order, the short ones first: a narrow sidebar cuts the submission time (whole in the
 * tooltip), never a number. A new column is one entry here; the row redraws when its text changes (`rowKey`). */
export const ROW_COLUMNS: readonly RowColumn[] = [
  { name: 'user', text: j => j.username },
  { name: 'duration', text: j => duration(j.launchedTime, j.completedTime) },
  { name: 'gpus', text: j => (j.totalGpuNumber ? `${j.totalGpuNumber} GPU` : '') },
  {
    name: 'retries',
    text: j => (j.retries ? `${j.retries} retr${j.retries === 1 ? 'y' : 'ies'}` : '')
  },
  { name: 'submitted', text: j => when(j.submissionTime), tip: text => `submitted ${text}` }
];

/** Each column's [name, text], those with a text only. */
export function rowFacts(job: JobRow): [string, string][] {
  return ROW_COLUMNS.map(c => [c.name, c.text(job)] as [string, string]).filter(([, text]) => text);
}

/** The row's tooltip: every fact, as the column says it there. */
export function rowTip(job: JobRow): string {
  return ROW_COLUMNS.map(c => {
    const text = c.text(job);
    return text && c.tip ? c.tip(text) : text;
  })
    .filter(text => text)
    .join(' · ');
}

/** What a drawn row depends on: it is drawn again when this changes. A running job's duration ticks on its own
 * (the sidebar's tick), so its start and end stand for it here. */
export function rowKey(job: JobRow): string {
  const facts = ROW_COLUMNS.filter(c => c.name !== 'duration').map(c => c.text(job));
  return [job.state, job.launchedTime, job.completedTime, ...facts].join('|');
}

/** One row of the sidebar: a job (`nested`: a trial shown under its open sweep), or a sweep's row. */
export type SidebarItem =
  | { kind: 'job'; key: string; job: JobRow; nested: boolean }
  | { kind: 'sweep'; key: string; sweep: string; jobs: JobRow[] };

const SHORT = 16; // a name this long fits any sidebar: not cut
const TAIL = 8;
const LAST_PART = /[-_.~ ][^-_.~ ]{1,8}$/;

/** A name as [head, tail]: the sidebar cuts the head (with an ellipsis) and always shows the tail, so names that
 * share a long start (a sweep's trials, `<sweep>-0001`) stay apart. The tail is the last part after a separator
 * ("-0001"), else the last 8 characters; a short name is all head. */
export function nameParts(name: string): [string, string] {
  if (name.length <= SHORT) {
    return [name, ''];
  }
  const cut = LAST_PART.exec(name)?.index ?? name.length - TAIL;
  return [name.slice(0, cut), name.slice(cut)];
}

/** The rows for these jobs (newest first, as listed): a sweep's trials become one row of the sweep where its
 * newest trial is, followed by the trials when the sweep is in `open`; other jobs keep their places. */
export function sidebarItems(jobs: JobRow[], open: ReadonlySet<string>): SidebarItem[] {
  const trials = new Map<string, JobRow[]>();
  for (const j of jobs) {
    if (j.sweep) {
      const of = trials.get(j.sweep);
      if (of) {
        of.push(j);
      } else {
        trials.set(j.sweep, [j]);
      }
    }
  }
  const items: SidebarItem[] = [];
  for (const j of jobs) {
    if (!j.sweep) {
      items.push({ kind: 'job', key: j.id, job: j, nested: false });
      continue;
    }
    const of = trials.get(j.sweep) as JobRow[];
    if (of[0] !== j) {
      continue; // drawn under its sweep's row
    }
    items.push({ kind: 'sweep', key: `sweep:${j.sweep}`, sweep: j.sweep, jobs: of });
    if (open.has(j.sweep)) {
      items.push(...of.map(t => ({ kind: 'job' as const, key: t.id, job: t, nested: true })));
    }
  }
  return items;
}

/** "21 trials · 2 running · 19 succeeded": how many trials, then how many in each state, in the states' order. */
export function sweepSummary(trials: JobRow[]): string {
  const counts = new Map<string, number>();
  for (const t of trials) {
    counts.set(t.state, (counts.get(t.state) ?? 0) + 1);
  }
  const order: readonly string[] = STATES;
  const states = [...counts.keys()].sort(
    (a, b) => (order.indexOf(a) + 1 || 99) - (order.indexOf(b) + 1 || 99)
  );
  const word = trials.length === 1 ? 'trial' : 'trials';
  return [
    `${trials.length} ${word}`,
    ...states.map(s => `${counts.get(s)} ${s.toLowerCase()}`)
  ].join(' · ');
}
