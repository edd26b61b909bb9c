// The jobs sidebar: the profile's jobs with state badges, a state filter, search, a cheap auto-refresh
// (conditional requests: an unchanged list is a bodiless 304) and per-row actions. A sweep's trials sit under
// one row of their sweep (sidebarrows.ts), opened with a click. The list is virtualised: only the rows in view
// exist in the DOM, so 10,000 jobs draw as fast as 30. Running durations tick between refreshes.
import { Menu, Widget } from '@lumino/widgets';
import { CommandRegistry } from '@lumino/commands';
import { ISignal, Signal } from '@lumino/signaling';
import { JobList, JobRow, listJobs } from './api';
import { ProfileSwitch } from './profiles';
import { Dialog, showDialog } from '@jupyterlab/apputils';
import { addIcon, refreshIcon } from '@jupyterlab/ui-components';
import { deleteJob } from './api';
import { CapacityView } from './capacity';
import {
  badgeClass,
  duration,
  endedKernelJobs,
  filterJobs,
  kernelNotebook,
  nextChange,
  plural,
  rowTitle
} from './format';
import { FINAL, STATES } from './states';
import {
  nameParts,
  rowFacts,
  rowKey,
  rowTip,
  SidebarItem,
  sidebarItems,
  sweepSummary
} from './sidebarrows';
import { visibleRange } from './virtual';
import { button, el, toolButton } from './dom';
import { selectBox } from './selectbox';
import { CommandIDs } from './commands';

export const ROW_HEIGHT = 46;

export interface RefreshStats {
  bytes: number;
  changed: boolean;
  ms: number;
}

export class JobsPanel extends Widget {
  constructor(private readonly commands: CommandRegistry) {
    super();
    this.id = 'pai-jobs-panel';
    this.addClass('pai-JobsPanel');
    this.title.caption = 'PAI jobs';
    this.node.setAttribute('role', 'region');
    this.node.setAttribute('aria-label', 'PAI jobs');

    const header = el('div', 'pai-JobsPanel-header');
    const heading = el('h2', 'pai-JobsPanel-title', 'PAI jobs');
    this.profileNode = el('span', 'pai-JobsPanel-profile');
    this.profileNode.setAttribute('aria-label', 'Cluster profile');
    const refresh = toolButton(
      '',
      'Refresh the job list',
      refreshIcon,
      () => void this.refresh(true)
    );
    const submit = toolButton(
      'New job',
      'New PAI job',
      addIcon,
      () => void this.commands.execute(CommandIDs.newJob)
    );
    this.profiles = new ProfileSwitch(() => void this.refresh(true));
    header.append(heading, this.profileNode, submit, refresh, this.profiles.node);
    void this.profiles.load();

    const tools = el('div', 'pai-JobsPanel-tools');
    this.stateSelect = el('select', 'jp-mod-styled pai-StateFilter');
    this.stateSelect.setAttribute('aria-label', 'Filter jobs by state');
    for (const s of ['', ...STATES]) {
      const option = el('option', '', s || 'All states');
      option.value = s;
      this.stateSelect.append(option);
    }
    this.stateSelect.onchange = () => this.draw(true);
    this.searchInput = el('input', 'jp-mod-styled pai-Search');
    this.searchInput.type = 'search';
    this.searchInput.placeholder = 'Search name or user';
    this.searchInput.setAttribute('aria-label', 'Search jobs by name or user');
    this.searchInput.oninput = () => this.draw(true);
    tools.append(selectBox(this.stateSelect), this.searchInput);

    // "Python on PAI" kernels are jobs too: ended ones can be hidden, or deleted in one go
    const kernels = el('div', 'pai-JobsPanel-tools pai-Kernels');
    const hideLabel = el('label', 'pai-Check');
    this.hideKernels = el('input');
    this.hideKernels.type = 'checkbox';
    this.hideKernels.checked = true;
    this.hideKernels.onchange = () => this.draw(true);
    hideLabel.append(this.hideKernels, document.createTextNode(' Hide ended kernels'));
    this.clearKernels = button(
      'Clear',
      'Delete the ended kernel jobs',
      () => void this.clearEndedKernels()
    );
    kernels.append(hideLabel, this.clearKernels);

    this.scroller = el('div', 'pai-JobList');
    this.scroller.setAttribute('role', 'list');
    this.scroller.setAttribute('aria-label', 'Jobs');
    this.spacer = el('div', 'pai-JobList-spacer');
    this.scroller.append(this.spacer);
    this.scroller.onscroll = () => this.draw(false);
    this.scroller.onkeydown = event => this.onKey(event);

    this.statusNode = el('div', 'pai-JobsPanel-status');
    this.statusNode.setAttribute('role', 'status');
    this.statusNode.setAttribute('aria-live', 'polite');
    this.capacity = new CapacityView();
    this.node.append(header, tools, kernels, this.scroller, this.statusNode, this.capacity.node);
  }

  /** Emitted with every new list (not on an unchanged refresh). */
  get changed(): ISignal<this, JobList> {
    return this._changed;
  }

  /** Emitted at each tick of the refresh interval while the page is visible: other views (the Sweeps page) poll at
   * the sidebar's cadence without a timer of their own. */
  get ticked(): ISignal<this, void> {
    return this._ticked;
  }

  get jobs(): JobRow[] {
    return this.all;
  }

  get lastStats(): RefreshStats | null {
    return this._lastStats;
  }

  /** Ask the server; with `force` the ETag is dropped and the whole list comes again. */
  async refresh(force = false): Promise<RefreshStats | null> {
    const t0 = performance.now();
    try {
      const { list, etag, bytes, parseMs } = await listJobs(force ? null : this.etag);
      this.etag = etag;
      this.error = '';
      if (list) {
        const t1 = performance.now();
        this.all = list.jobs;
        this.byId = new Map(list.jobs.map(j => [j.id, j]));
        this.profileNode.textContent = `${list.profile} · ${list.user}`;
        this.draw(true);
        // a User Timing entry (parse + filter + draw of a new list): what `make bench` P11 reads
        performance.measure('pai:jobs-render', {
          start: t1 - (parseMs ?? 0),
          end: performance.now()
        });
        this._changed.emit(list);
      }
      this._lastStats = { bytes, changed: list !== null, ms: performance.now() - t0 };
      this.updateStatus();
      return this._lastStats;
    } catch (err) {
      // what the list showed is not known any more (a stopped cluster's RUNNING jobs are not running): no rows,
      // and the next answer is the whole list again
      this.error = `Could not list jobs: ${(err as Error).message}`;
      this.etag = null;
      this.all = [];
      this.byId.clear();
      this.draw(true);
      return null;
    }
  }

  /** Refresh every `seconds` while the page is visible. */
  setInterval(seconds: number): void {
    window.clearInterval(this.timer);
    this.timer = window.setInterval(
      () => {
        if (!document.hidden) {
          void this.refresh();
          void this.capacity.refresh();
          this._ticked.emit();
        }
      },
      Math.max(1, seconds) * 1000
    );
  }

  dispose(): void {
    window.clearInterval(this.timer);
    window.clearTimeout(this.tickTimer);
    super.dispose();
  }

  protected onAfterShow(): void {
    this.draw(true);
  }

  protected onResize(): void {
    this.draw(false);
  }

  private updateStatus(): void {
    const shown = this.shownJobs.length;
    const total = this.all.length;
    const text = shown === total ? plural(total, 'job') : `${shown} of ${plural(total, 'job')}`;
    const ended = endedKernelJobs(this.all).length;
    this.clearKernels.disabled = ended === 0;
    this.clearKernels.textContent = ended ? `Clear (${ended})` : 'Clear';
    this.statusNode.textContent = this.error || text;
    this.statusNode.classList.toggle('pai-mod-error', !!this.error);
  }

  /** Draw the rows in view; with `refilter` the filter and search apply again first. */
  draw(refilter: boolean): void {
    if (refilter) {
      const hidden = this.hideKernels.checked ? new Set(endedKernelJobs(this.all)) : null;
      this.shownJobs = filterJobs(this.all, this.stateSelect.value, this.searchInput.value).filter(
        j => !hidden?.has(j)
      );
      this.items = sidebarItems(this.shownJobs, this.openSweeps);
      this.spacer.style.height = `${this.items.length * ROW_HEIGHT}px`;
      this.scroller.setAttribute('aria-rowcount', String(this.items.length));
      this.updateStatus();
    }
    const range = visibleRange(
      this.scroller.scrollTop,
      this.scroller.clientHeight || 600,
      ROW_HEIGHT,
      this.items.length
    );
    const wanted = new Set<string>();
    for (let i = range.start; i < range.end; i++) {
      wanted.add(this.items[i].key);
    }
    for (const [key, row] of this.rows) {
      if (!wanted.has(key)) {
        row.remove();
        this.rows.delete(key);
      }
    }
    for (let i = range.start; i < range.end; i++) {
      const item = this.items[i];
      const row =
        item.kind === 'sweep'
          ? this.renderSweep(item.sweep, item.jobs, i)
          : this.renderRow(item.job, item.nested, i);
      if (!row.isConnected) {
        this.scroller.append(row);
      }
    }
    this.tick();
  }

  /** The running durations in view, each again when its text changes (a list unchanged on the server draws
   * nothing: its durations went on all the same). */
  private tick(): void {
    window.clearTimeout(this.tickTimer);
    const now = Date.now();
    let next = Infinity;
    for (const row of this.rows.values()) {
      const job = row.dataset.id ? this.byId.get(row.dataset.id) : undefined;
      const dur = row.querySelector('.pai-JobRow-duration');
      if (!job || !dur || FINAL.has(job.state) || job.completedTime) {
        continue;
      }
      dur.textContent = duration(job.launchedTime, null, now);
      next = Math.min(next, nextChange(job.launchedTime, now));
    }
    if (next < Infinity) {
      this.tickTimer = window.setTimeout(() => this.tick(), Math.max(50, next));
    }
  }

  private place(row: HTMLElement, position: number): void {
    row.style.top = `${position * ROW_HEIGHT}px`;
    row.setAttribute('aria-posinset', String(position + 1));
    row.setAttribute('aria-setsize', String(this.items.length));
  }

  /** A sweep's row: its name and its trials' states; a click (or Enter) shows or hides the trials under it. */
  private renderSweep(sweep: string, trials: JobRow[], position: number): HTMLElement {
    const key = `sweep:${sweep}`;
    let row = this.rows.get(key);
    if (!row) {
      row = el('div', 'pai-JobRow pai-SweepGroup');
      row.setAttribute('role', 'listitem');
      row.tabIndex = 0;
      row.dataset.sweep = sweep;
      row.onclick = event => {
        if (!(event.target as HTMLElement).closest('button')) {
          this.toggleSweep(sweep);
        }
      };
      this.rows.set(key, row);
    }
    this.place(row, position);
    const open = this.openSweeps.has(sweep);
    const summary = sweepSummary(trials);
    if (row.dataset.key === `${open}|${summary}`) {
      return row;
    }
    row.dataset.key = `${open}|${summary}`;
    row.setAttribute('aria-expanded', String(open));
    row.setAttribute('aria-label', `Sweep ${sweep}, ${summary}`);
    const top = el('div', 'pai-JobRow-top');
    const caret = el('span', 'pai-SweepGroup-caret', open ? '▾' : '▸');
    caret.setAttribute('aria-hidden', 'true');
    const name = this.nameNode('pai-SweepGroup-name', sweep);
    name.title = `Sweep ${sweep}: click to ${open ? 'hide' : 'show'} its trials`;
    const page = el('button', 'pai-JobRow-more', '⋯');
    page.setAttribute('aria-label', `Show sweep ${sweep} on the Sweeps page`);
    page.title = 'Show the sweep on the Sweeps page';
    page.onclick = event => {
      event.stopPropagation();
      void this.commands.execute(CommandIDs.showSweeps, { name: sweep });
    };
    top.append(caret, name, el('span', 'pai-SweepGroup-kind', 'sweep'), page);
    const meta = el('div', 'pai-JobRow-meta');
    meta.append(el('span', 'pai-SweepGroup-summary', summary));
    meta.title = summary;
    row.replaceChildren(top, meta);
    return row;
  }

  private toggleSweep(sweep: string): void {
    if (!this.openSweeps.delete(sweep)) {
      this.openSweeps.add(sweep);
    }
    this.draw(true);
    this.rows.get(`sweep:${sweep}`)?.focus();
  }

  /** A name that an ellipsis cuts in the middle: its end (where trials of one sweep differ) always shows. */
  private nameNode(cls: string, text: string): HTMLElement {
    const [head, tail] = nameParts(text);
    const name = el('span', cls);
    name.append(el('span', 'pai-Name-head', head));
    if (tail) {
      name.append(el('span', 'pai-Name-tail', tail));
    }
    return name;
  }

  private renderRow(job: JobRow, nested: boolean, position: number): HTMLElement {
    const key = rowKey(job);
    let row = this.rows.get(job.id);
    if (!row) {
      row = el('div', 'pai-JobRow');
      row.setAttribute('role', 'listitem');
      row.tabIndex = 0;
      row.dataset.id = job.id;
      row.onclick = event => {
        if (!(event.target as HTMLElement).closest('button')) {
          void this.commands.execute(CommandIDs.openJob, { id: job.id });
        }
      };
      row.oncontextmenu = event => {
        event.preventDefault();
        event.stopPropagation();
        this.openMenu(job.id, event.clientX, event.clientY);
      };
      this.rows.set(job.id, row);
    }
    row.classList.toggle('pai-mod-nested', nested);
    this.place(row, position);
    if (row.dataset.key === key) {
      return row;
    }
    row.dataset.key = key;
    row.replaceChildren();
    row.setAttribute('aria-label', `${job.name}, ${job.state}`);
    const top = el('div', 'pai-JobRow-top');
    const name = this.nameNode('pai-JobRow-name', rowTitle(job.name));
    name.title = kernelNotebook(job.name) === null ? job.id : `Kernel job ${job.id}`;
    const badge = el('span', badgeClass(job.state), job.state);
    const more = el('button', 'pai-JobRow-more', '⋯');
    more.setAttribute('aria-label', `Actions for ${job.name}`);
    more.setAttribute('aria-haspopup', 'menu');
    more.onclick = event => {
      event.stopPropagation();
      const r = more.getBoundingClientRect();
      this.openMenu(job.id, r.left, r.bottom);
    };
    top.append(name, badge, more);
    const meta = el('div', 'pai-JobRow-meta');
    for (const [cls, text] of rowFacts(job)) {
      meta.append(el('span', `pai-JobRow-${cls}`, text));
    }
    meta.title = rowTip(job);
    row.append(top, meta);
    return row;
  }

  private onKey(event: KeyboardEvent): void {
    const row = (event.target as HTMLElement).closest('.pai-JobRow') as HTMLElement | null;
    if (!row) {
      return;
    }
    const id = row.dataset.id;
    const sweep = row.dataset.sweep;
    if (event.key === 'Enter') {
      if (sweep !== undefined) {
        this.toggleSweep(sweep);
      } else {
        void this.commands.execute(CommandIDs.openJob, { id });
      }
    } else if (id && (event.key === 'ContextMenu' || (event.key === 'F10' && event.shiftKey))) {
      const r = row.getBoundingClientRect();
      this.openMenu(id, r.left, r.bottom);
      event.preventDefault();
    } else if (event.key === 'ArrowDown' || event.key === 'ArrowUp') {
      const key = sweep !== undefined ? `sweep:${sweep}` : id;
      const i =
        this.items.findIndex(item => item.key === key) + (event.key === 'ArrowDown' ? 1 : -1);
      if (i >= 0 && i < this.items.length) {
        this.scroller.scrollTop = Math.min(this.scroller.scrollTop, i * ROW_HEIGHT);
        if ((i + 1) * ROW_HEIGHT > this.scroller.scrollTop + this.scroller.clientHeight) {
          this.scroller.scrollTop = (i + 1) * ROW_HEIGHT - this.scroller.clientHeight;
        }
        this.draw(false);
        this.rows.get(this.items[i].key)?.focus();
      }
      event.preventDefault();
    }
  }

  /** The row's actions: open, logs, stop, clone, delete, and each running task's services. */
  openMenu(id: string, x: number, y: number): void {
    const job = this.all.find(j => j.id === id);
    if (!job) {
      return;
    }
    const menu = new Menu({ commands: this.commands });
    menu.addClass('pai-RowMenu');
    for (const command of [
      CommandIDs.openJob,
      CommandIDs.openLogs,
      CommandIDs.stopJob,
      CommandIDs.cloneJob,
      CommandIDs.deleteJob
    ]) {
      menu.addItem({ command, args: { id } });
    }
    const services = job.tasks.flatMap(t => [
      // a web page opens in a tab; ssh (no page) opens the dialog with the command that logs in
      ...t.services.flatMap(s =>
        s.url || s.name === 'ssh' ? [{ t, name: s.name, title: s.title, url: s.url }] : []
      ),
      ...(t.terminalUrl ? [{ t, name: 'terminal', title: 'Terminal', url: null }] : [])
    ]);
    if (services.length) {
      menu.addItem({ type: 'separator' });
      for (const { t, name, title, url } of services) {
        menu.addItem({
          command: CommandIDs.openService,
          args: { id, role: t.role, index: t.index, service: name, title, url }
        });
      }
    }
    menu.open(x, y);
  }

  /** Delete every ended kernel job, after a confirmation. */
  private async clearEndedKernels(): Promise<void> {
    const ended = endedKernelJobs(this.all);
    if (!ended.length) {
      return;
    }
    const answer = await showDialog({
      title: 'Clear ended kernel jobs',
      body: `Delete ${ended.length} ended "Python on PAI" kernel job${ended.length === 1 ? '' : 's'} and their logs?`,
      buttons: [Dialog.cancelButton(), Dialog.warnButton({ label: 'Delete' })]
    });
    if (!answer.button.accept) {
      return;
    }
    const failed = (await Promise.allSettled(ended.map(j => deleteJob(j.id)))).filter(
      r => r.status === 'rejected'
    ).length;
    await this.refresh(true);
    if (failed) {
      this.error = `${failed} of ${ended.length} kernel jobs could not be deleted`;
      this.updateStatus();
    }
  }

  private readonly capacity: CapacityView;
  private readonly hideKernels: HTMLInputElement;
  private readonly clearKernels: HTMLButtonElement;
  private readonly profileNode: HTMLElement;
  readonly profiles: ProfileSwitch;
  private readonly stateSelect: HTMLSelectElement;
  private readonly searchInput: HTMLInputElement;
  private readonly scroller: HTMLElement;
  private readonly spacer: HTMLElement;
  private readonly statusNode: HTMLElement;
  private readonly rows = new Map<string, HTMLElement>(); // by item key: a job's id, or sweep:NAME
  private readonly openSweeps = new Set<string>(); // the sweeps whose trials show under them
  private all: JobRow[] = [];
  private byId = new Map<string, JobRow>();
  private shownJobs: JobRow[] = []; // the jobs the filter and search keep
  private items: SidebarItem[] = []; // their rows: sweeps' trials under their sweep
  private tickTimer = 0;
  private etag: string | null = null;
  private error = '';
  private timer = 0;
  private _lastStats: RefreshStats | null = null;
  private readonly _changed = new Signal<this, JobList>(this);
  private readonly _ticked = new Signal<this, void>(this);
}
