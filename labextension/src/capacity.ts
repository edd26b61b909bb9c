// The sidebar's cluster capacity view: per virtual cluster, CPUs, GPUs and memory in use against its quota (a
// meter each), and the user's waiting jobs with the reason the scheduler gives. Asked for while it is open.
import { Capacity, getCapacity, Resources } from './api';
import { el } from './dom';

/** "1.5 / 2 CPUs" style text of one resource. */
export function useText(used: number, total: number, unit: string): string {
  const n = (v: number): string => String(Number(v.toFixed(1)));
  return `${n(used)} / ${n(total)} ${unit}`;
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
    this.body.replaceChildren(...parts);
  }

  private readonly body = el('div', 'pai-Capacity-body');
}
