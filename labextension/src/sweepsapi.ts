// The Sweeps page's calls to the Jupyter server extension (server/lab_sweeps.py): in one request, the user's
// sweeps and the one picked with its trials. A module of its own so that api.ts stays the job list's. Each
// interface is held to its Python twin (pai_jupyter/server/answers.py) by tests/unit/test_lab_api_contract.py.
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

export interface SweepsPage {
  sweeps: SweepRow[]; // the newest first
  sweep: SweepDetail | null; // the one asked for (the newest when none was), null when there is no such sweep
}

/** What one refresh of the page shows: the list, and the sweep picked (or the newest) with its trials. */
export function getSweepsPage(picked: string): Promise<SweepsPage> {
  return request(`api/sweeps${picked ? `?sweep=${encodeURIComponent(picked)}` : ''}`);
}
