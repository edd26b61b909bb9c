// A job list row (JobRow, as pai/api/jobs answers) for the unit tests: name and state, the rest at rest.
import type { JobRow } from '../src/api';

export function jobRow(name: string, state: string, over: Partial<JobRow> = {}): JobRow {
  const username = over.username ?? 'root';
  return {
    id: `${username}~${name}`,
    name,
    username,
    state,
    submissionTime: null,
    launchedTime: null,
    completedTime: null,
    retries: 0,
    totalTaskNumber: 1,
    totalGpuNumber: 0,
    virtualCluster: null,
    appExitCode: null,
    preempting: false,
    metricsUrl: '',
    tasks: [],
    servicesMessage: null,
    sweep: null,
    ...over
  };
}
