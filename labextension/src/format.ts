// Pure helpers of the panel (unit-tested): times, durations, filters, badges.
import type { JobRow } from './api';
import { FINAL, STATES } from './states';

/** "1h 02m", "3m 05s", "12s"; "" without a start. */
export function duration(
  start: string | null | undefined,
  end: string | null | undefined,
  now = Date.now()
): string {
  if (!start) {
    return '';
  }
  const from = Date.parse(start);
  const to = end ? Date.parse(end) : now;
  if (Number.isNaN(from) || Number.isNaN(to)) {
    return '';
  }
  let s = Math.max(0, Math.round((to - from) / 1000));
  const h = Math.floor(s / 3600);
  s -= h * 3600;
  const m = Math.floor(s / 60);
  s -= m * 60;
  const two = (n: number): string => String(n).padStart(2, '0');
  if (h > 0) {
    return `${h}h ${two(m)}m`;
  }
  if (m > 0) {
    return `${m}m ${two(s)}s`;
  }
  return `${s}s`;
}

/** Milliseconds from `now` until a running duration's text (`duration(start, null, now)`) next changes: the next
 * second while seconds show, the next minute once hours do; Infinity without a start. */
export function nextChange(start: string | null | undefined, now = Date.now()): number {
  const from = start ? Date.parse(start) : Number.NaN;
  if (Number.isNaN(from)) {
    return Infinity;
  }
  const elapsed = now - from;
  const shown = Math.max(0, Math.round(elapsed / 1000)); // the seconds `duration` shows
  const next = shown >= 3600 ? (Math.floor(shown / 60) + 1) * 60 : shown + 1;
  return (next - 0.5) * 1000 - elapsed; // Math.round reaches `next` half a second before it
}

/** Local "YYYY-MM-DD HH:MM" of an ISO time (with `seconds`, ":SS" too), "" without one. */
export function when(iso: string | null | undefined, seconds = false): string {
  if (!iso) {
    return '';
  }
  const d = new Date(iso);
  if (Number.isNaN(d.getTime())) {
    return '';
  }
  const two = (n: number): string => String(n).padStart(2, '0');
  const day = `${d.getFullYear()}-${two(d.getMonth() + 1)}-${two(d.getDate())}`;
  return `${day} ${two(d.getHours())}:${two(d.getMinutes())}${seconds ? `:${two(d.getSeconds())}` : ''}`;
}

/** The jobs a state filter ('' = all) and a search text (name, id or user, any case) keep, order kept. */
export function filterJobs(jobs: JobRow[], state: string, search: string): JobRow[] {
  const needle = search.trim().toLowerCase();
  return jobs.filter(
    j =>
      (!state || j.state === state) &&
      (!needle ||
        j.name.toLowerCase().includes(needle) ||
        j.username.toLowerCase().includes(needle))
  );
}

/** The CSS class of a state's badge. */
export function badgeClass(state: string): string {
  const known = (STATES as readonly string[]).includes(state) ? state.toLowerCase() : 'unknown';
  return `pai-Badge pai-Badge-${known}`;
}

/** Running and waiting counts, for the status bar. */
export function counts(jobs: JobRow[]): { running: number; waiting: number } {
  let running = 0;
  let waiting = 0;
  for (const j of jobs) {
    if (j.state === 'RUNNING') {
      running++;
    } else if (j.state === 'WAITING') {
      waiting++;
    }
  }
  return { running, waiting };
}

/** Jobs that were live in `before` and are final in `after`: the ones to notify about. */
export function endedSince(before: Map<string, string>, after: JobRow[]): JobRow[] {
  return after.filter(
    j => FINAL.has(j.state) && before.has(j.id) && !FINAL.has(before.get(j.id) as string)
  );
}

export function bytes(n: number): string {
  const units = ['B', 'KiB', 'MiB', 'GiB', 'TiB'];
  let i = 0;
  let v = n;
  while (v >= 1024 && i < units.length - 1) {
    v /= 1024;
    i++;
  }
  return `${v.toFixed(i === 0 ? 0 : 1)} ${units[i]}`;
}

/** "1 minute", "2 minutes", "1.5 minutes". */
export function plural(n: number, word: string): string {
  return `${n} ${word}${n === 1 ? '' : 's'}`;
}

const KERNEL_JOB = /^(.*)-kernel-[0-9a-f]{6}$/;

/** The notebook a "Python on PAI" kernel job runs for ("Untitled" of "Untitled-kernel-1a2b3c"), or null. */
export function kernelNotebook(name: string): string | null {
  const m = KERNEL_JOB.exec(name);
  return m ? m[1] || 'notebook' : null;
}

/** A row's name as the sidebar shows it: a kernel job by its notebook ("Untitled.ipynb · kernel"). */
export function rowTitle(name: string): string {
  const notebook = kernelNotebook(name);
  return notebook === null ? name : `${notebook}.ipynb · kernel`;
}

/** Ended kernel jobs: what "Hide ended kernels" hides and "Clear" deletes. */
export function endedKernelJobs(jobs: JobRow[]): JobRow[] {
  return jobs.filter(j => FINAL.has(j.state) && kernelNotebook(j.name) !== null);
}

/** "name-copy", else "name-copy-2", … : the first that no job in `taken` has. */
export function freeName(name: string, taken: Iterable<string>): string {
  const used = new Set(taken);
  const base = `${name}-copy`;
  if (!used.has(base)) {
    return base;
  }
  let n = 2;
  while (used.has(`${base}-${n}`)) {
    n++;
  }
  return `${base}-${n}`;
}

/** What the log box says when a task's stream ('all', 'stdout', 'stderr') is empty: whether anything is still to
 * come depends on the task's state. */
export function emptyLog(taskState: string | undefined, stream: string): string {
  const what = stream === 'all' ? 'output' : stream;
  if (taskState === 'WAITING' || taskState === undefined) {
    return `(no ${what} yet: the task has not started)`;
  }
  if (FINAL.has(taskState)) {
    return `(the task wrote no ${what})`;
  }
  return `(no ${what} yet: it shows here as the task writes it)`;
}
