// Live resource charts from the metrics websocket: one small SVG line chart per measure (CPU %, memory,
// GPU use and memory where NVML reports them), the last `keep` samples of every task.

const SVG = 'http://www.w3.org/2000/svg';
const COLORS = ['#1f77b4', '#ff7f0e', '#2ca02c', '#d62728', '#9467bd', '#8c564b'];

export interface Sample {
  time: number;
  values: Record<string, number>; // "role[index]" -> value
}

export interface Measure {
  key: string;
  title: string;
  unit: (v: number) => string;
}

/** The y-axis top: a little above the largest value (headroom), at least `floor`. */
export function axisTop(samples: Sample[], floor: number): number {
  let top = floor;
  for (const s of samples) {
    for (const v of Object.values(s.values)) {
      top = Math.max(top, v);
    }
  }
  return top * 1.15;
}

export class LineChart {
  readonly node: HTMLElement;

  constructor(
    readonly measure: Measure,
    private readonly floor: number,
    private readonly keep = 120
  ) {
    this.node = document.createElement('figure');
    this.node.className = 'pai-Chart';
    const caption = document.createElement('figcaption');
    caption.textContent = measure.title;
    this.svg = document.createElementNS(SVG, 'svg');
    this.svg.setAttribute('viewBox', '0 0 300 100');
    this.svg.setAttribute('preserveAspectRatio', 'none');
    this.svg.setAttribute('role', 'img');
    this.svg.setAttribute('aria-label', measure.title);
    this.legend = document.createElement('div');
    this.legend.className = 'pai-Chart-legend';
    this.node.append(caption, this.svg, this.legend);
  }

  get samples(): Sample[] {
    return this.data;
  }

  push(sample: Sample): void {
    this.data.push(sample);
    if (this.data.length > this.keep) {
      this.data.splice(0, this.data.length - this.keep);
    }
    this.draw();
  }

  private draw(): void {
    const top = axisTop(this.data, this.floor);
    const series = new Set<string>();
    this.data.forEach(s => Object.keys(s.values).forEach(k => series.add(k)));
    this.svg.replaceChildren();
    const n = Math.max(1, this.keep - 1);
    const offset = this.keep - this.data.length;
    [...series].forEach((name, i) => {
      const points = this.data
        .map((s, j) =>
          name in s.values
            ? `${((offset + j) * 300) / n},${100 - (s.values[name] / top) * 100}`
            : ''
        )
        .filter(Boolean)
        .join(' ');
      const line = document.createElementNS(SVG, 'polyline');
      line.setAttribute('points', points);
      line.setAttribute('fill', 'none');
      line.setAttribute('stroke', COLORS[i % COLORS.length]);
      line.setAttribute('stroke-width', '1.5');
      line.setAttribute('vector-effect', 'non-scaling-stroke');
      this.svg.append(line);
    });
    const last = this.data[this.data.length - 1];
    this.legend.replaceChildren(
      ...[...series].map((name, i) => {
        const item = document.createElement('span');
        item.style.color = COLORS[i % COLORS.length];
        const v = last && name in last.values ? this.measure.unit(last.values[name]) : '–';
        item.textContent = `${name}: ${v}`;
        return item;
      })
    );
  }

  private readonly svg: SVGSVGElement;
  private readonly legend: HTMLElement;
  private readonly data: Sample[] = [];
}
