// The Sweeps page's calls to the Jupyter server extension (server/lab_sweeps.py): the user's sweeps, and one
// sweep with its trials. A module of its own so that api.ts stays the job list's.
import { request } from './api';

export interface BestTrial {
  number: number;
  job: string;
  value: number;
}

export interface SweepRow {
  name: string;
  status: string | null; // new, running, stopping, stopping all, done
  objective: string | null;
  mode: 'min' | 'max' | null;
  done: number; // trials ended
  submitted: number;
  total: number; // the sweep's size (max_trials)
  best: BestTrial | null;
  updated: number | null;
}

export interface TrialRow {
  number: number;
  job: string; // user~name
  name: string;
  params: Record<string, unknown>;
  state: string;
  value: number | null;
  metrics: Record<string, number>;
}

export interface SweepDetail extends SweepRow {
  params: string[];
  trials: TrialRow[];
}

export function listSweeps(): Promise<{ sweeps: SweepRow[] }> {
  return request('api/sweeps');
}

export function getSweep(name: string): Promise<SweepDetail> {
  return request(`api/sweeps/${encodeURIComponent(name)}`);
}
