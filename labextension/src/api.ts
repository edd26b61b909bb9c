// The server extension's routes (pai/api/...) and nothing else: the panel never talks to the daemon or to
// OpenPAI. Requests go through Jupyter's ServerConnection, so base_url, token and _xsrf are handled by Lab.
// Every interface here (and in sweepsapi.ts, queueplace.ts, formapi.ts) is an answer of the server, held to the
// Python type that shapes it (pai_jupyter/server/answers.py) by tests/unit/test_lab_api_contract.py: change a
// field on both sides.
import { URLExt } from '@jupyterlab/coreutils';
import { ServerConnection } from '@jupyterlab/services';

/** A task's service as the browser opens it (common/services.py Link): `icon` is its catalogue icon (SVG shapes
 * in a 24x24 box; "" for the Lab's own or none). */
export interface ServiceLink {
  name: string;
  title: string;
  url: string | null;
  icon: string;
}

/** A running task's service with its state (``TaskService`` of the client). */
export interface ListedService extends ServiceLink {
  state: string;
}

export interface TaskRow {
  role: string;
  index: number;
  state: string;
  services: ListedService[];
  terminalUrl: string | null;
  terminalPage: string | null;
}

/** What the job list's row and the job page both say of a job (the server reads them off one model). */
export interface JobFields {
  id: string;
  name: string;
  username: string;
  state: string;
  submissionTime: string | null;
  launchedTime: string | null;
  completedTime: string | null;
  retries: number;
  totalTaskNumber: number;
  totalGpuNumber: number;
  virtualCluster: string | null;
  metricsUrl: string;
}

export interface JobRow extends JobFields {
  appExitCode: number | null;
  preempting: boolean; // being preempted now: its tasks have their signal and are in their grace
  tasks: TaskRow[];
  servicesMessage: string | null;
  sweep: string | null; // the sweep this job is a trial of (its tag sweep:NAME), or null
}

export interface JobList {
  profile: string;
  user: string;
  jobs: JobRow[];
}

export interface TaskDetail {
  role: string;
  index: number;
  state: string;
  ip: string | null;
  ports: Record<string, unknown>;
  exitCode: number | null;
  diagnostics: string | null;
  retries: number;
  launchedTime: string | null;
  completedTime: string | null;
  terminalPage: string | null;
  services: ServiceLink[]; // only those the task has
  tensorboardPage?: string; // an ended task's TensorBoard, started on demand over its logdir
}

export interface JobDetail extends JobFields {
  final: boolean;
  exitCode: number | null;
  diagnostics: string | null;
  waitingReason: string | null;
  tasks: TaskDetail[];
  mlflowPage: string | null; // the job's MLflow run through this server; null: it has none
  serviceIcons: Record<string, string>; // the services catalogue's icons by name (SVG shapes)
  mlflowHint?: string | null; // for a job without a run: how to turn tracking on, where the cluster has it off
  events?: { time?: string; type?: string; reason?: string; message?: string }[];
  eventsMessage?: string;
}

export interface Problem {
  path: string;
  message: string;
}

/** A problem as the server answers it: with the form's field it is about ("" for the job as a whole). */
export interface PlacedProblem extends Problem {
  field: string;
}

export interface Validation {
  valid: boolean;
  problems: PlacedProblem[];
  refused?: boolean; // a valid job the cluster would not take
  id?: string; // submitted
  name?: string; // valid, not submitted
}

/** An answer other than 2xx, with the server's own words. */
export class PaiApiError extends Error {
  constructor(
    readonly status: number,
    message: string,
    readonly code: string = ''
  ) {
    super(message);
  }
}

export function jobPath(id: string): string {
  const [user, ...rest] = id.split('~');
  return `${encodeURIComponent(user)}~${encodeURIComponent(rest.join('~'))}`;
}

export async function request<T>(path: string, init: RequestInit = {}): Promise<T> {
  const settings = ServerConnection.makeSettings();
  const url = URLExt.join(settings.baseUrl, 'pai', path);
  const response = await ServerConnection.makeRequest(url, init, settings);
  return (await answer(response)) as T;
}

async function answer(response: Response): Promise<unknown> {
  const text = await response.text();
  let body: unknown = null;
  try {
    body = text ? JSON.parse(text) : null;
  } catch {
    body = null;
  }
  if (!response.ok) {
    const err = (body || {}) as { message?: string; code?: string };
    throw new PaiApiError(response.status, err.message || response.statusText, err.code);
  }
  return body;
}

/** The job list with a conditional request: null when nothing changed since the ETag given. */
export async function listJobs(
  etag: string | null,
  limit?: number
): Promise<{ list: JobList | null; etag: string | null; bytes: number; parseMs?: number }> {
  const settings = ServerConnection.makeSettings();
  const query = limit ? `?limit=${limit}` : '';
  const url = URLExt.join(settings.baseUrl, 'pai/api/jobs') + query;
  const headers: Record<string, string> = {};
  if (etag) {
    headers['If-None-Match'] = etag;
  }
  const response = await ServerConnection.makeRequest(
    url,
    { headers, cache: 'no-store' },
    settings
  );
  if (response.status === 304) {
    return { list: null, etag, bytes: 0 };
  }
  const text = await response.text();
  if (!response.ok) {
    let message = response.statusText;
    try {
      message = JSON.parse(text).message || message;
    } catch {
      /* not JSON */
    }
    throw new PaiApiError(response.status, message);
  }
  const t0 = performance.now();
  const list = JSON.parse(text) as JobList;
  return {
    list,
    etag: response.headers.get('ETag'),
    bytes: text.length,
    parseMs: performance.now() - t0
  };
}

export function getJob(id: string, events = false): Promise<JobDetail> {
  return request<JobDetail>(`api/jobs/${jobPath(id)}${events ? '?events=1' : ''}`);
}

export function getConfig(id: string, format: 'yaml' | 'json' | 'v1'): Promise<{ text: string }> {
  return request(`api/jobs/${jobPath(id)}/config?format=${format}`);
}

export function logQuery(role: string, index: number, stream: string): string {
  const q = new URLSearchParams({ role, index: String(index), stream });
  return q.toString();
}

export function getLogTail(
  id: string,
  role: string,
  index: number,
  stream: string
): Promise<{ text: string }> {
  return request(`api/jobs/${jobPath(id)}/log?${logQuery(role, index, stream)}`);
}

/** The URL of the whole log as a download (the page never loads it). */
export function fullLogUrl(id: string, role: string, index: number, stream: string): string {
  const settings = ServerConnection.makeSettings();
  return (
    URLExt.join(settings.baseUrl, 'pai/api/jobs', jobPath(id), 'log') +
    `?${logQuery(role, index, stream)}&full=1`
  );
}

export function stopJob(id: string): Promise<unknown> {
  return request(`api/jobs/${jobPath(id)}/stop`, { method: 'POST' });
}

export function cloneJob(id: string, name?: string): Promise<{ id: string }> {
  return request(`api/jobs/${jobPath(id)}/clone`, {
    method: 'POST',
    body: JSON.stringify(name ? { name } : {})
  });
}

export function deleteJob(id: string): Promise<unknown> {
  return request(`api/jobs/${jobPath(id)}`, { method: 'DELETE' });
}

export function validate(text: string, submit: boolean): Promise<Validation> {
  return request('api/validate', { method: 'POST', body: JSON.stringify({ text, submit }) });
}

/** ws(s):// URL of a path on this server (the metrics websocket). */
export function socketUrl(path: string): string {
  const settings = ServerConnection.makeSettings();
  const base = new URL(settings.wsUrl);
  const token = settings.token ? `?token=${encodeURIComponent(settings.token)}` : '';
  return `${base.protocol}//${base.host}${path}${token}`;
}

export interface JobAccess {
  sshKey: string | null;
  desktops: { role: string; index: number; state: string; url: string }[];
  message: string | null;
}

/** Whether the job has an SSH key to download and which tasks have a remote desktop. */
export function getAccess(id: string): Promise<JobAccess> {
  return request(`api/jobs/${jobPath(id)}/access`);
}

/** The download URL of the job's SSH private key (owner only). */
export function sshKeyUrl(id: string): string {
  const settings = ServerConnection.makeSettings();
  return URLExt.join(settings.baseUrl, 'pai/api/jobs', jobPath(id), 'ssh-key');
}

export interface MaxRunTime {
  id: string;
  minutes: number;
  deadline: number | null;
}

/** Set the job's max run time ("work duration", minutes from its launch); 501 on a remote OpenPAI. */
export function setMaxRunTime(id: string, minutes: number): Promise<MaxRunTime> {
  return request(`api/jobs/${jobPath(id)}/maxRunTime`, {
    method: 'PUT',
    body: JSON.stringify({ minutes })
  });
}

export interface ProfileInfo {
  name: string;
  url: string;
  username: string;
  default: boolean;
  current: boolean;
}

export interface ProfileList {
  current: string;
  profiles: ProfileInfo[];
}

export interface ProfileChoice {
  current: string;
  user: string;
}

/** The Jupyter user's cluster profiles (names and URLs; the server never sends tokens). */
export function listProfiles(): Promise<ProfileList> {
  return request('api/profiles');
}

/** Make the server show (and proxy) this profile's jobs from now on. */
export function selectProfile(name: string): Promise<ProfileChoice> {
  return request('api/profiles/current', { method: 'PUT', body: JSON.stringify({ name }) });
}

export interface SshTask {
  role: string;
  index: number;
  state: string;
  host: string | null;
  port: number | null;
  user: string;
  key: string | null;
  problem: string | null;
  ssh: string | null; // the exact ssh command (none while the task has no address)
  pai: string; // the `pai ssh` command
}

export interface SshInfo {
  id: string;
  tasks: SshTask[];
  message: string | null; // why there is none
}

/** How to log in to each task of the job (its ssh plugin). */
export function getSsh(id: string): Promise<SshInfo> {
  return request(`api/jobs/${jobPath(id)}/ssh`);
}

export interface Resources {
  cpu: number;
  memoryMB: number;
  gpu: number;
}

export interface Capacity {
  virtualClusters: { name: string; used: Resources; total: Resources }[];
  waiting: { id: string; name: string; virtualCluster: string | null; reason: string | null }[];
  waitingCount: number;
  /** What each user ran per virtual cluster lately (the user's own rows, an admin's everyone's, then each
   *  virtual cluster's total: `username` null); null where the cluster keeps none (an OpenPAI server). */
  usage: {
    windowHours: number;
    gpuUseMessage: string | null;
    rows: {
      username: string | null;
      users: number;
      virtualCluster: string;
      gpuHoursAllocated: number;
      gpuHoursUsed: number | null;
      gpuHoursIdle: number | null;
      cpuHours: number;
      jobsStarted: number;
      waitMeanSeconds: number | null;
    }[];
  } | null;
}

/** One row of the capacity view's usage table. */
export type UsageRow = NonNullable<Capacity['usage']>['rows'][number];

/** Use and quota per virtual cluster, and the user's waiting jobs with their reasons. */
export function getCapacity(): Promise<Capacity> {
  return request('api/capacity');
}

/** Which state changes the job asked to hear of. */
export interface JobNotification {
  id: string;
  states: string[];
}

/** MLflow's compare view of these jobs' runs (server/mlflow_proxy.py): its page through this server, and the jobs
 *  left out for having no run. */
export function compareInMlflow(jobs: string[]): Promise<{ url: string; without: string[] }> {
  const query = jobs.map(j => `job=${encodeURIComponent(j)}`).join('&');
  return request(`api/mlflow/compare?${query}`);
}
