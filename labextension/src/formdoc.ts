// The Lab submit form's document: seed 001's v1 JSON (the "Edit JSON" format, as the widget form), built from
// the fields, and each server problem's path (taskRoles[0].memoryMB) mapped back to the field it is about.

export interface RoleValues {
  name: string;
  taskNumber: number;
  cpuNumber: number;
  memoryMB: number;
  gpuNumber: number;
  command: string;
}

export interface FormValues {
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
export const JOB_FIELDS = ['jobName', 'image', 'virtualCluster', 'retryCount', 'jobEnvs'] as const;

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
    jobName: v.jobName,
    image: v.image,
    virtualCluster: v.virtualCluster || 'default',
    retryCount: v.retryCount,
    taskRoles: v.roles.map(r => ({ ...r }))
  };
  const envs = envPairs(v.jobEnvs);
  if (Object.keys(envs).length) {
    doc.jobEnvs = envs;
  }
  return doc;
}

/** Form values from a v1 document (Import / Edit JSON / clone); unknown keys are ignored. */
export function fromV1(doc: Record<string, unknown>): FormValues {
  const roles = Array.isArray(doc.taskRoles) ? (doc.taskRoles as Record<string, unknown>[]) : [];
  const envs = (doc.jobEnvs || {}) as Record<string, unknown>;
  return {
    jobName: String(doc.jobName ?? ''),
    image: String(doc.image ?? ''),
    virtualCluster: String(doc.virtualCluster ?? 'default'),
    retryCount: Number(doc.retryCount ?? 0),
    jobEnvs: Object.entries(envs)
      .map(([k, val]) => `${k}=${val}`)
      .join('\n'),
    roles: roles.length
      ? roles.map(r => ({
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
  const head = path.split(/[.[]/)[0];
  const alias: Record<string, string> = { name: 'jobName' };
  const key = alias[head] || head;
  return (JOB_FIELDS as readonly string[]).includes(key) ? key : '';
}
