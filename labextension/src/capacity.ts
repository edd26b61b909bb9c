// The sidebar's cluster capacity view: per virtual cluster, CPUs, GPUs and memory in use against its quota (a
// meter each), the user's waiting jobs with the reason the scheduler gives, and what each user ran lately (the
// figures fair share orders users by: GPU-hours allocated, used and idle, CPU-hours, mean wait). Asked for while
// it is open.
import { Capacity, getCapacity, Resources, UsageRow } from './api';
import { el } from './dom';

/** "1.5 / 2 CPUs" style text of one resource. */
export function useText(used: number, total: number, unit: string): string {
  const n = (v: number): string => String(Number(v.toFixed(1)));
  return `${n(used)} / ${n(total)} ${unit}`;
}

/** "7 days", "24 hours". */
export function windowText(hours: number): string {
  const days = hours / 24;
  if (days >= 1 && Number.isInteger(days)) {
    return days === 1 ? '1 day' : `${days} days`;
  }
  return hours === 1 ? '1 hour' : `${Number(hours.toFixed(2))} hours`;
}

/** Hours with two decimals; "–" where unknown (GPU use the cluster does not sample). */
export function hoursText(h: number | null): string {
  return h === null ? '–' : h.toFixed(2);
}

/** "45 s", "3 min", "2.5 h"; "–" without a started job. */
export function waitText(s: number | null): string {
  if (s === null) {
    return '–';
  }
  if (s < 90) {
    return `${Math.round(s)} s`;
  }
  if (s < 90 * 60) {
    return `${Math.round(s / 60)} min`;
  }
  return `${Number((s / 3600).toFixed(1))} h`;
}

export const USAGE_HEAD = ['Who', 'VC', 'GPU-h', 'used', 'idle', 'CPU-h', 'Jobs', 'Mean wait'];

/** The usage table's cells: each user's row ("all N users" for a virtual cluster's total). */
export function usageCells(rows: UsageRow[]): string[][] {
  return rows.map(r => [
    r.username ?? (r.users === 1 ? 'all (1 user)' : `all (${r.users} users)`),
    r.virtualCluster,
    hoursText(r.gpuHoursAllocated),
    hoursText(r.gpuHoursUsed),
    hoursText(r.gpuHoursIdle),
    hoursText(r.cpuHours),
    String(r.jobsStarted),
    waitText(r.waitMeanSeconds)
  ]);
}

const ROWS: { key: keyof Resources; label: string; unit: string; scale: number }[] = [
  { key: 'cpu', label: 'CPU', unit: 'CPUs', scale: 1 },
  { key: 'gpu', label: 'GPU', unit: 'GPUs', scale: 1 },
  { key: 'memoryMB', label: 'Memory', unit: 'GiB', scale: 1 / 1024 }
];

export class CapacityView {
  readonly node = el('details', 'pai-Capacity');

  constructor() {
    const summary = el('summary', 'pai-Capacity-title', 'Cluster capacity');
    this.body.setAttribute('aria-live', 'polite');
    this.node.append(summary, this.body);
    this.node.ontoggle = () => {
      if (this.node.open) {
        void this.refresh();
      }
    };
  }

  /** Ask again (only while open: a closed view costs nothing). */
  async refresh(): Promise<void> {
    if (!this.node.open) {
      return;
    }
    try {
      this.draw(await getCapacity());
    } catch (err) {
      this.body.replaceChildren(
        el('div', 'pai-Error', `Could not read the capacity: ${(err as Error).message}`)
      );
    }
  }

  draw(c: Capacity): void {
    const parts: HTMLElement[] = [];
    for (const vc of c.virtualClusters) {
      const box = el('div', 'pai-Capacity-vc');
      box.dataset.vc = vc.name;
      box.append(el('div', 'pai-Capacity-name', `Virtual cluster ${vc.name}`));
      for (const r of ROWS) {
        const used = vc.used[r.key] * r.scale;
        const total = vc.total[r.key] * r.scale;
        if (r.key === 'gpu' && total === 0 && used === 0) {
          continue;
        }
        const line = el('div', 'pai-Capacity-row');
        line.dataset.resource = r.key;
        const meter = el('meter', 'pai-Capacity-meter');
        meter.min = 0;
        meter.max = Math.max(total, used, 1e-9);
        meter.value = used;
        meter.high = meter.max * 0.9;
        const text = useText(used, total, r.unit);
        meter.setAttribute('aria-label', `${r.label} of ${vc.name}: ${text}`);
        line.append(
          el('span', 'pai-Capacity-label', r.label),
          meter,
          el('span', 'pai-Capacity-text', text)
        );
        box.append(line);
      }
      parts.push(box);
    }
    const waiting = el('div', 'pai-Capacity-waiting');
    waiting.append(
      el(
        'div',
        'pai-Capacity-name',
        c.waitingCount ? `Waiting: ${c.waitingCount} of your jobs` : 'Nothing of yours is waiting.'
      )
    );
    const list = el('ul', 'pai-Capacity-list');
    for (const w of c.waiting) {
      const item = el('li', '');
      item.append(
        el('span', 'pai-Capacity-job', w.name),
        el('span', 'pai-Muted', ` (${w.virtualCluster || 'default'}): ${w.reason || 'queued'}`)
      );
      list.append(item);
    }
    waiting.append(list);
    parts.push(waiting);
    if (c.usage) {
      parts.push(usageBox(c.usage));
    }
    this.body.replaceChildren(...parts);
  }

  private readonly body = el('div', 'pai-Capacity-body');
}

function usageBox(u: NonNullable<Capacity['usage']>): HTMLElement {
  const box = el('div', 'pai-Capacity-usage');
  box.append(el('div', 'pai-Capacity-name', `Usage, last ${windowText(u.windowHours)}`));
  if (!u.rows.length) {
    box.append(el('div', 'pai-Muted', 'Nothing ran.'));
    return box;
  }
  const table = el('table', 'pai-Table pai-Capacity-usageTable');
  const head = el('tr');
  for (const h of USAGE_HEAD) {
    head.append(el('th', '', h));
  }
  table.append(el('thead'), el('tbody'));
  table.tHead?.append(head);
  usageCells(u.rows).forEach((cells, i) => {
    const tr = el('tr');
    tr.dataset.user = u.rows[i].username ?? '';
    tr.dataset.vc = u.rows[i].virtualCluster;
    for (const cell of cells) {
      tr.append(el('td', '', cell));
    }
    table.tBodies[0].append(tr);
  });
  box.append(table);
  if (u.gpuUseMessage) {
    box.append(el('div', 'pai-Muted', `GPU used/idle: ${u.gpuUseMessage}`));
  }
  return box;
}
