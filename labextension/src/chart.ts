// Live resource charts from the metrics websocket: one SVG line chart per measure (CPU %, memory, GPU use and
// memory where NVML reports them), the last `keep` samples of every task. Real axes: a y axis with round ticks in
// the measure's unit, an x axis of seconds before now, grid lines, and a legend naming each task's line. Colours
// and text come from Lab's theme variables, so the light and dark themes both apply.

const SVG = 'http://www.w3.org/2000/svg';
const COLORS = [
  'var(--jp-brand-color1)',
  'var(--jp-warn-color1)',
  'var(--jp-success-color1)',
  'var(--jp-error-color1)',
  'var(--jp-accent-color1)',
  'var(--jp-ui-font-color2)'
];
const W = 360;
const H = 160;
const M = { left: 56, right: 8, top: 8, bottom: 24 };

export interface Sample {
  time: number;
  values: Record<string, number>; // "role[index]" -> value
}

export interface Measure {
  key: string;
  title: string;
  unit: (v: number) => string;
  /** The tick step rule: 'bytes' steps are powers of 2 in KiB/MiB/GiB; others 1, 2, 5 × 10^n. */
  scale?: 'bytes' | 'linear';
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

/** Round tick values from 0 up to at least `top` (about `count` of them): 1, 2, 5 × 10^n steps, or powers of
 * two for bytes. The last tick is the axis's top, so every line stays under it. */
export function ticks(top: number, count = 4, scale: 'bytes' | 'linear' = 'linear'): number[] {
  if (!(top > 0) || !Number.isFinite(top)) {
    return [0, 1];
  }
  const raw = top / count;
  let step: number;
  if (scale === 'bytes') {
    step = 2 ** Math.ceil(Math.log2(raw));
  } else {
    const p = 10 ** Math.floor(Math.log10(raw));
    step = [1, 2, 5, 10].map(f => f * p).find(s => s >= raw) as number;
  }
  const out: number[] = [];
  for (let v = 0; v < top + step * 1e-9; v += step) {
    out.push(v);
  }
  if (out[out.length - 1] < top) {
    out.push(out[out.length - 1] + step);
  }
  return out;
}

/** "now", "-30 s", "-2 min": the x axis's labels, seconds before the newest sample. */
export function agoLabel(seconds: number): string {
  if (seconds <= 0) {
    return 'now';
  }
  return seconds >= 120 && seconds % 60 === 0 ? `-${seconds / 60} min` : `-${seconds} s`;
}

function svg<K extends keyof SVGElementTagNameMap>(
  tag: K,
  attrs: Record<string, string | number>,
  text = ''
): SVGElementTagNameMap[K] {
  const node = document.createElementNS(SVG, tag);
  for (const [k, v] of Object.entries(attrs)) {
    node.setAttribute(k, String(v));
  }
  if (text) {
    node.textContent = text;
  }
  return node;
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
    this.node.dataset.measure = measure.key;
    this.caption = document.createElement('figcaption');
    this.caption.className = 'pai-Chart-title';
    this.caption.textContent = measure.title;
    this.svg = svg('svg', { viewBox: `0 0 ${W} ${H}`, role: 'img', class: 'pai-Chart-svg' });
    this.svg.setAttribute('aria-label', measure.title);
    this.legend = document.createElement('div');
    this.legend.className = 'pai-Chart-legend';
    this.node.append(this.caption, this.svg, this.legend);
    this.draw();
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
    const series = new Set<string>();
    this.data.forEach(s => Object.keys(s.values).forEach(k => series.add(k)));
    const names = [...series];
    const tickValues = ticks(axisTop(this.data, this.floor), 4, this.measure.scale);
    const top = tickValues[tickValues.length - 1];
    const plotW = W - M.left - M.right;
    const plotH = H - M.top - M.bottom;
    const y = (v: number): number => M.top + plotH - (v / top) * plotH;
    // x: seconds before the newest sample, over a round window that holds every sample kept
    const newest = this.data.length ? this.data[this.data.length - 1].time : Date.now();
    const oldest = this.data.length ? this.data[0].time : newest;
    const xTicks = ticks(Math.max(30, (newest - oldest) / 1000), 4);
    const windowS = xTicks[xTicks.length - 1];
    const x = (time: number): number => M.left + plotW - ((newest - time) / 1000 / windowS) * plotW;
    const parts: SVGElement[] = [];
    const yAxis = svg('g', { class: 'pai-Chart-axis pai-Chart-y' });
    for (const v of tickValues) {
      yAxis.append(
        svg('line', { x1: M.left, x2: W - M.right, y1: y(v), y2: y(v), class: 'pai-Chart-grid' }),
        svg(
          'text',
          { x: M.left - 4, y: y(v) + 3, 'text-anchor': 'end', class: 'pai-Chart-tick' },
          this.measure.unit(v)
        )
      );
    }
    const xAxis = svg('g', { class: 'pai-Chart-axis pai-Chart-x' });
    xAxis.append(
      svg('line', { x1: M.left, x2: W - M.right, y1: y(0), y2: y(0), class: 'pai-Chart-baseline' })
    );
    for (const ago of xTicks) {
      const px = M.left + plotW - (ago / windowS) * plotW;
      xAxis.append(
        svg('line', { x1: px, x2: px, y1: y(0), y2: y(0) + 3, class: 'pai-Chart-baseline' }),
        svg(
          'text',
          {
            x: px,
            y: H - 6,
            'text-anchor': ago === 0 ? 'end' : ago === windowS ? 'start' : 'middle',
            class: 'pai-Chart-tick'
          },
          agoLabel(ago)
        )
      );
    }
    parts.push(yAxis, xAxis);
    names.forEach((name, i) => {
      const points = this.data
        .map(s => (name in s.values ? `${x(s.time)},${y(s.values[name])}` : ''))
        .filter(Boolean)
        .join(' ');
      const line = svg('polyline', {
        points,
        fill: 'none',
        'stroke-width': 1.5,
        class: 'pai-Chart-line'
      });
      line.style.stroke = COLORS[i % COLORS.length];
      line.dataset.series = name;
      parts.push(line);
    });
    if (!this.data.length) {
      parts.push(
        svg(
          'text',
          {
            x: M.left + plotW / 2,
            y: M.top + plotH / 2,
            'text-anchor': 'middle',
            class: 'pai-Chart-tick'
          },
          'waiting for the first sample…'
        )
      );
    }
    this.svg.replaceChildren(...parts);
    this.caption.textContent = names.length
      ? `${this.measure.title} · ${names.join(', ')}`
      : this.measure.title;
    this.svg.setAttribute('aria-label', this.caption.textContent);
    const last = this.data[this.data.length - 1];
    this.legend.replaceChildren(
      ...names.map((name, i) => {
        const item = document.createElement('span');
        item.className = 'pai-Chart-key';
        const swatch = document.createElement('span');
        swatch.className = 'pai-Chart-swatch';
        swatch.style.background = COLORS[i % COLORS.length];
        const v = last && name in last.values ? this.measure.unit(last.values[name]) : '–';
        item.append(swatch, document.createTextNode(`${name}: ${v}`));
        return item;
      })
    );
  }

  private readonly caption: HTMLElement;
  private readonly svg: SVGSVGElement;
  private readonly legend: HTMLElement;
  private readonly data: Sample[] = [];
}
