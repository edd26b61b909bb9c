// The Sweeps page (command "Show PAI sweeps"): the user's sweeps (name, state, trials done / total, best value of
// the objective) and, for the one picked, a results table of its trials (trial, job linking to its job page,
// state, each parameter, each metric), sortable by any column, the best trial marked. Read again at each tick of
// the sidebar's refresh while the page is visible (plugin/sweeps.ts); all text goes in as text, never as HTML.
import { Widget } from '@lumino/widgets';
import { CommandRegistry } from '@lumino/commands';
import { CommandIDs } from './commands';
import { button, el } from './dom';
import { getSweepsPage, SweepDetail, SweepRow } from './sweepsapi';
import { cell, cellText, columns, Direction, sortTrials } from './sweeptable';

function bestText(s: SweepRow): string {
  return s.best
    ? `${s.objective ?? 'value'} ${cellText(s.best.value)} (trial ${s.best.number})`
    : '–';
}

export class SweepsView extends Widget {
  constructor(private readonly commands: CommandRegistry) {
    super();
    this.id = 'pai-sweeps-view';
    this.addClass('pai-SweepsView');
    this.node.setAttribute('role', 'region');
    this.node.setAttribute('aria-label', 'PAI sweeps');
    const header = el('div', 'pai-SweepsView-header');
    header.append(
      el('h2', 'pai-SweepsView-title', 'Sweeps'),
      button('Refresh', 'Refresh the sweeps', () => void this.load())
    );
    this.statusNode = el('div', 'pai-SweepsView-status pai-Muted');
    this.statusNode.setAttribute('role', 'status');
    this.list = el('table', 'pai-Table pai-SweepList');
    this.list.setAttribute('aria-label', 'Your sweeps');
    this.detail = el('section', 'pai-SweepDetail');
    this.node.append(header, this.statusNode, this.list, this.detail);
  }

  /** Show this sweep's trials (the newest sweep when none was picked). */
  select(name: string): void {
    this.selected = name;
    void this.load();
  }

  /** Read the list and the picked sweep again, in one request (one read at a time: a tick during a read is
   *  skipped). */
  async load(): Promise<void> {
    if (this.loading) {
      return;
    }
    this.loading = true;
    try {
      const { sweeps, sweep } = await getSweepsPage(this.selected);
      if (!this.selected && sweep) {
        this.selected = sweep.name;
      }
      this.drawList(sweeps);
      this.statusNode.textContent = sweeps.length
        ? ''
        : 'No sweep yet: start one with pai_jupyter.Sweep or %%pai_sweep in a notebook.';
      if (sweep) {
        this.drawDetail(sweep);
      } else {
        this.detail.replaceChildren();
      }
    } catch (err) {
      this.statusNode.textContent = `Could not read the sweeps: ${(err as Error).message}`;
    } finally {
      this.loading = false;
    }
  }

  private drawList(sweeps: SweepRow[]): void {
    const head = el('tr');
    for (const h of ['Sweep', 'State', 'Trials done', 'Best']) {
      head.append(el('th', '', h));
    }
    const rows = sweeps.map(s => {
      const tr = el('tr', 'pai-SweepRow');
      tr.dataset.sweep = s.name;
      tr.classList.toggle('pai-mod-selected', s.name === this.selected);
      const name = el('td');
      const open = el('button', 'pai-LinkButton pai-SweepName', s.name);
      open.type = 'button';
      open.setAttribute('aria-label', `Show the trials of sweep ${s.name}`);
      open.onclick = () => this.select(s.name);
      name.append(open);
      tr.append(
        name,
        el('td', 'pai-SweepStatus', s.status ?? ''),
        el('td', 'pai-SweepDone', `${s.done} / ${s.total}`),
        el('td', 'pai-SweepBest', bestText(s))
      );
      return tr;
    });
    this.list.replaceChildren(head, ...rows);
  }

  private drawDetail(sweep: SweepDetail): void {
    const cols = columns(sweep);
    const title = el('h3', 'pai-Section-title', `Trials of ${sweep.name}`);
    const about = el(
      'div',
      'pai-Muted pai-SweepAbout',
      `${sweep.status ?? ''} · ${sweep.done} of ${sweep.total} trials done · ` +
        `objective ${sweep.objective ?? '?'} (${sweep.mode === 'max' ? 'higher' : 'lower'} is better)`
    );
    const table = el('table', 'pai-Table pai-TrialTable');
    table.setAttribute('aria-label', `Trials of sweep ${sweep.name}`);
    const head = el('tr');
    for (const c of cols) {
      const th = el('th');
      th.dataset.column = c.key;
      const sorted = this.sortKey === c.key;
      th.setAttribute('aria-sort', sorted ? this.direction : 'none');
      const b = el(
        'button',
        'pai-SortButton',
        c.label + (sorted ? (this.direction === 'ascending' ? ' ▲' : ' ▼') : '')
      );
      b.type = 'button';
      b.setAttribute('aria-label', `Sort by ${c.label}`);
      b.onclick = () => {
        this.direction = sorted && this.direction === 'ascending' ? 'descending' : 'ascending';
        this.sortKey = c.key;
        this.drawDetail(sweep);
      };
      th.append(b);
      head.append(th);
    }
    const trials = sortTrials(sweep.trials, this.sortKey, this.direction);
    const rows = trials.map(t => {
      const tr = el('tr', 'pai-TrialRow');
      tr.dataset.trial = String(t.number);
      tr.classList.toggle('pai-mod-best', sweep.best?.number === t.number);
      for (const c of cols) {
        const td = el('td', c.numeric ? 'pai-Num' : '');
        td.dataset.column = c.key;
        if (c.key === 'name') {
          const link = el('button', 'pai-LinkButton pai-TrialJob', t.name);
          link.type = 'button';
          link.title = `Open the job page of ${t.job}`;
          link.onclick = () => void this.commands.execute(CommandIDs.openJob, { id: t.job });
          td.append(link);
        } else {
          td.textContent = cellText(cell(t, c.key));
        }
        tr.append(td);
      }
      return tr;
    });
    table.replaceChildren(head, ...rows);
    const jobs = sweep.trials.map(t => t.job).filter(Boolean);
    const compare = button(
      'Compare in MLflow',
      `Compare the runs of the ${jobs.length} trials of ${sweep.name} in MLflow`,
      () => void this.commands.execute(CommandIDs.compareInMlflow, { jobs })
    );
    compare.classList.add('pai-CompareTrials');
    compare.hidden = jobs.length < 2;
    this.detail.replaceChildren(title, about, compare, table);
  }

  private readonly statusNode: HTMLElement;
  private readonly list: HTMLTableElement;
  private readonly detail: HTMLElement;
  private selected = '';
  private loading = false;
  private sortKey = 'number';
  private direction: Direction = 'ascending';
}
