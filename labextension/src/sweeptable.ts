// The Sweeps page's trial table as data (no DOM, tested in test/sweeptable.test.ts): its columns for a sweep
// (trial, job, state, each parameter, each metric), a cell's value and text, and the rows sorted by a column.
import type { SweepDetail, TrialRow } from './sweepsapi';

export interface Column {
  key: string; // 'number', 'name', 'state', 'param:x', 'metric:loss'
  label: string;
  numeric: boolean;
}

export type Direction = 'ascending' | 'descending';

/** The columns of a sweep's table: the fixed ones, then each parameter and each metric any trial has. */
export function columns(sweep: SweepDetail): Column[] {
  const metrics = new Set<string>();
  for (const t of sweep.trials) {
    Object.keys(t.metrics).forEach(m => metrics.add(m));
  }
  const params = sweep.params.length
    ? sweep.params
    : [...new Set(sweep.trials.flatMap(t => Object.keys(t.params)))].sort();
  return [
    { key: 'number', label: 'Trial', numeric: true },
    { key: 'name', label: 'Job', numeric: false },
    { key: 'state', label: 'State', numeric: false },
    ...params.map(p => ({
      key: `param:${p}`,
      label: p,
      numeric: sweep.trials.every(t => typeof t.params[p] === 'number')
    })),
    ...[...metrics].sort().map(m => ({ key: `metric:${m}`, label: m, numeric: true }))
  ];
}

/** A trial's value in a column (undefined: none yet). */
export function cell(trial: TrialRow, key: string): unknown {
  if (key.startsWith('param:')) {
    return trial.params[key.slice(6)];
  }
  if (key.startsWith('metric:')) {
    return trial.metrics[key.slice(7)];
  }
  return (trial as unknown as Record<string, unknown>)[key];
}

/** A value as the table shows it: numbers to 4 significant digits, nothing as an en dash. */
export function cellText(value: unknown): string {
  if (value === undefined || value === null) {
    return '–';
  }
  if (typeof value === 'number') {
    return Number.isInteger(value) ? String(value) : String(Number(value.toPrecision(4)));
  }
  return String(value);
}

function compare(a: unknown, b: unknown): number {
  if (typeof a === 'number' && typeof b === 'number') {
    return a - b;
  }
  return String(a).localeCompare(String(b), undefined, { numeric: true });
}

/** The trials sorted by a column; trials without a value in it come last either way. */
export function sortTrials(trials: TrialRow[], key: string, direction: Direction): TrialRow[] {
  const sign = direction === 'ascending' ? 1 : -1;
  return [...trials].sort((x, y) => {
    const a = cell(x, key);
    const b = cell(y, key);
    const missingA = a === undefined || a === null;
    const missingB = b === undefined || b === null;
    if (missingA || missingB) {
      return missingA === missingB ? x.number - y.number : missingA ? 1 : -1;
    }
    return sign * compare(a, b) || x.number - y.number;
  });
}
