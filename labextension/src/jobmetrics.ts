// The job page's live resource charts: CPU, memory and (where NVML answers) GPU use and memory of each task,
// drawn from the server extension's metrics websocket while the job runs.
import { socketUrl } from './api';
import { LineChart, Sample } from './chart';
import { el } from './dom';
import { bytes } from './format';

const MIB64 = 64 * 1024 * 1024;
const percent = (v: number): string => `${Number(v.toFixed(1))} %`;
const size = (v: number): string => bytes(v).replace('.0 ', ' '); // axis ticks: "128 MiB"

export class JobMetrics {
  constructor(private readonly body: HTMLElement) {}

  get connected(): boolean {
    return this.socket !== null;
  }

  close(): void {
    this.socket?.close();
  }

  /** The job has ended: charts drawn while it ran stay; a page opened after it ended says why there are none. */
  ended(): void {
    this.close();
    if (!this.charts.length) {
      this.body.replaceChildren(
        el('div', 'pai-Muted', 'The job has ended: resource use is charted while a job runs.')
      );
    }
  }

  /** Open the websocket once (a later call while it is open does nothing). */
  connect(metricsUrl: string): void {
    if (this.socket) {
      return;
    }
    this.charts = [
      new LineChart({ key: 'cpu', title: 'CPU (% of one core)', unit: percent }, 10),
      new LineChart({ key: 'mem', title: 'Memory', unit: size, scale: 'bytes' }, MIB64),
      new LineChart({ key: 'gpu', title: 'GPU use (%)', unit: percent }, 10),
      new LineChart({ key: 'gmem', title: 'GPU memory', unit: size, scale: 'bytes' }, MIB64)
    ];
    const note = el('div', 'pai-Muted pai-Metrics-note');
    const charts = el('div', 'pai-Charts');
    charts.append(...this.charts.slice(0, 2).map(c => c.node));
    this.body.replaceChildren(charts, note);
    const ws = new WebSocket(socketUrl(metricsUrl));
    this.socket = ws;
    let gpuShown = false;
    ws.onmessage = event => {
      const msg = JSON.parse(String(event.data));
      if (msg.error) {
        note.textContent = `Metrics: ${msg.error.message}`;
        return;
      }
      const t = Date.parse(msg.time) || Date.now();
      const cpu: Sample = { time: t, values: {} };
      const mem: Sample = { time: t, values: {} };
      const gpu: Sample = { time: t, values: {} };
      const gmem: Sample = { time: t, values: {} };
      for (const task of msg.tasks || []) {
        const name = `${task.role}[${task.index}]`;
        if (typeof task.cpuPercent === 'number') {
          cpu.values[name] = task.cpuPercent;
        }
        if (typeof task.memoryBytes === 'number') {
          mem.values[name] = task.memoryBytes;
        }
        for (const g of task.gpus || []) {
          gpu.values[`${name} gpu${g.index}`] = g.utilizationPercent;
          gmem.values[`${name} gpu${g.index}`] = g.memoryUsedBytes;
        }
      }
      this.charts[0].push(cpu);
      this.charts[1].push(mem);
      if (Object.keys(gpu.values).length) {
        if (!gpuShown) {
          charts.append(this.charts[2].node, this.charts[3].node);
          gpuShown = true;
        }
        this.charts[2].push(gpu);
        this.charts[3].push(gmem);
      }
      note.textContent = msg.gpu && !msg.gpu.available && msg.gpu.message ? msg.gpu.message : '';
    };
    ws.onclose = () => {
      this.socket = null;
      if (this.charts[0].samples.length) {
        note.textContent = 'Resource use until the job ended (last samples kept).';
      }
    };
  }

  private socket: WebSocket | null = null;
  private charts: LineChart[] = [];
}
