// The Lab submit form's document: seed 001's v1 JSON (the "Edit JSON" format, as the widget form), built from
// the fields, and each server problem's path (taskRoles[0].memoryMB) mapped back to the field it is about.

export interface RoleValues {
  base?: Record<string, unknown>; // keys of an imported role the form has no field for, kept as they are
  name: string;
  taskNumber: number;
  cpuNumber: number;
  memoryMB: number;
  gpuNumber: number;
  command: string;
}

export interface FormValues {
  base?: Record<string, unknown>; // keys of an imported document the form has no field for, kept as they are
  maxRunTimeMinutes: string; // extras.maxRunTimeMinutes ("" = no limit)
  jobName: string;
  image: string;
  virtualCluster: string;
  retryCount: number;
  jobEnvs: string; // KEY=value lines
  roles: RoleValues[];
}

export const ROLE_FIELDS = [
  'name',
  'taskNumber',
  'cpuNumber',
  'memoryMB',
  'gpuNumber',
  'command'
] as const;
export const JOB_FIELDS = [
  'jobName',
  'image',
  'virtualCluster',
  'retryCount',
  'jobEnvs',
  'maxRunTimeMinutes'
] as const;

export function defaultRole(name = 'main'): RoleValues {
  return { name, taskNumber: 1, cpuNumber: 1, memoryMB: 1024, gpuNumber: 0, command: '' };
}

export function envPairs(text: string): Record<string, string> {
  const out: Record<string, string> = {};
  for (const line of text.split('\n')) {
    const t = line.trim();
    if (!t) {
      continue;
    }
    const i = t.indexOf('=');
    out[i < 0 ? t : t.slice(0, i).trim()] = i < 0 ? '' : t.slice(i + 1);
  }
  return out;
}

export function toV1(v: FormValues): Record<string, unknown> {
  const doc: Record<string, unknown> = {
    ...(v.base || {}),
    jobName: v.jobName,
    image: v.image,
    virtualCluster: v.virtualCluster || 'default',
    retryCount: v.retryCount,
    taskRoles: v.roles.map(({ base, ...r }) => ({ ...(base || {}), ...r }))
  };
  delete doc.jobEnvs;
  const envs = envPairs(v.jobEnvs);
  if (Object.keys(envs).length) {
    doc.jobEnvs = envs;
  }
  const extras = { ...((v.base?.extras as Record<string, unknown>) || {}) };
  delete extras.maxRunTimeMinutes;
  if (v.maxRunTimeMinutes.trim()) {
    const n = Number(v.maxRunTimeMinutes);
    extras.maxRunTimeMinutes = Number.isNaN(n) ? v.maxRunTimeMinutes : n; // the server says what is wrong
  }
  if (Object.keys(extras).length) {
    doc.extras = extras;
  } else {
    delete doc.extras;
  }
  return doc;
}

const MANAGED_JOB = ['jobName', 'image', 'virtualCluster', 'retryCount', 'jobEnvs', 'taskRoles'];
const MANAGED_ROLE = ['name', 'taskNumber', 'cpuNumber', 'memoryMB', 'gpuNumber', 'command'];

function without(obj: Record<string, unknown>, keys: string[]): Record<string, unknown> {
  return Object.fromEntries(Object.entries(obj).filter(([k]) => !keys.includes(k)));
}

/** Form values from a v1 document (Import / Edit JSON / clone); keys without a field are kept in `base`. */
export function fromV1(doc: Record<string, unknown>): FormValues {
  const roles = Array.isArray(doc.taskRoles) ? (doc.taskRoles as Record<string, unknown>[]) : [];
  const envs = (doc.jobEnvs || {}) as Record<string, unknown>;
  const extras = (doc.extras || {}) as Record<string, unknown>;
  return {
    base: without(doc, MANAGED_JOB),
    maxRunTimeMinutes:
      extras.maxRunTimeMinutes === undefined ? '' : String(extras.maxRunTimeMinutes),
    jobName: String(doc.jobName ?? ''),
    image: String(doc.image ?? ''),
    virtualCluster: String(doc.virtualCluster ?? 'default'),
    retryCount: Number(doc.retryCount ?? 0),
    jobEnvs: Object.entries(envs)
      .map(([k, val]) => `${k}=${val}`)
      .join('\n'),
    roles: roles.length
      ? roles.map(r => ({
          base: without(r, MANAGED_ROLE),
          name: String(r.name ?? ''),
          taskNumber: Number(r.taskNumber ?? 1),
          cpuNumber: Number(r.cpuNumber ?? 1),
          memoryMB: Number(r.memoryMB ?? 1024),
          gpuNumber: Number(r.gpuNumber ?? 0),
          command: String(r.command ?? '')
        }))
      : [defaultRole()]
  };
}

/** The field key a problem path is about: "jobName", "roles.0.memoryMB", or "" (shown above the form). */
export function fieldOf(path: string): string {
  const role = /^taskRoles\[(\d+)\](?:\.(\w+))?/.exec(path);
  if (role) {
    const key = role[2] || 'name';
    return (ROLE_FIELDS as readonly string[]).includes(key) ? `roles.${role[1]}.${key}` : '';
  }
  if (path.startsWith('extras.maxRunTimeMinutes')) {
    return 'maxRunTimeMinutes';
  }
  const head = path.split(/[.[]/)[0];
  const alias: Record<string, string> = { name: 'jobName' };
  const key = alias[head] || head;
  return (JOB_FIELDS as readonly string[]).includes(key) ? key : '';
}
