// One job's page in the main area: summary, task table, events, config (YAML/JSON, copy), the log's tail
// (stdout/stderr/all, follow, full-log download: the page never holds a whole huge log) and live charts
// from the metrics websocket (jobmetrics.ts); a tools row (jobtools.ts: work duration, SSH key, desktop).
// Service buttons open the task's terminal and the services it has (from the server's answer) as Lab tabs.
import { Widget } from '@lumino/widgets';
import { CommandRegistry } from '@lumino/commands';
import { getConfig, getJob, getLogTail, fullLogUrl, JobDetail, TaskDetail } from './api';
import { copyIcon, editIcon, refreshIcon, stopIcon } from '@jupyterlab/ui-components';
import { mlflowIcon, serviceIcon } from './icons';
import { button, BUTTON_CLASS, el, section, toolButton } from './dom';
import { selectBox } from './selectbox';
import { duration, emptyLog, rowTitle, when } from './format';
import { JobMetrics } from './jobmetrics';
import { JobTools } from './jobtools';
import { addNotebookButton } from './notebookjob';
import { CommandIDs } from './commands';

export class JobPage extends Widget {
  constructor(
    readonly jobId: string,
    private readonly commands: CommandRegistry
  ) {
    super();
    this.addClass('pai-JobPage');
    this.id = `pai-job-${jobId.replace(/[^A-Za-z0-9_-]/g, '_')}`;
    this.title.label = rowTitle(jobId.split('~').slice(1).join('~')); // a kernel job: its notebook
    this.title.caption = `PAI job ${jobId}`;
    this.title.closable = true;
    this.node.tabIndex = -1;

    const bar = el('div', 'jp-Toolbar pai-JobPage-toolbar');
    bar.setAttribute('role', 'toolbar');
    bar.setAttribute('aria-label', 'Job actions');
    this.stopButton = toolButton(
      'Stop',
      'Stop this job',
      stopIcon,
      () => void this.commands.execute(CommandIDs.stopJob, { id: jobId }).then(() => this.load())
    );
    bar.append(
      toolButton('Refresh', 'Refresh this job', refreshIcon, () => void this.load()),
      this.stopButton,
      toolButton(
        'Clone…',
        'Clone this job',
        copyIcon,
        () => void this.commands.execute(CommandIDs.cloneJob, { id: jobId })
      ),
      toolButton(
        'Clone to form',
        'Open this job in the submit form',
        editIcon,
        () => void this.commands.execute(CommandIDs.newJob, { from: jobId })
      )
    );
    this.mlflowButton = toolButton(
      'MLflow run',
      "Open this job's MLflow run",
      mlflowIcon,
      () =>
        void this.commands.execute(CommandIDs.openMlflow, { url: this.current?.mlflowPage ?? '' })
    );
    this.mlflowButton.hidden = true; // shown once the job's detail names its run
    bar.append(this.mlflowButton);
    addNotebookButton(jobId, commands, bar); // a notebook job: its executed notebook
    this.summary = section('Summary', 'pai-Summary');
    this.tasks = section('Tasks', 'pai-Tasks');
    this.events = section('Events', 'pai-Events');
    this.config = section('Config', 'pai-Config');
    this.logs = section('Log', 'pai-Logs');
    this.metrics = section('Resources', 'pai-Metrics');
    this.charts = new JobMetrics(this.metrics.body);
    this.tools = new JobTools(jobId, commands);
    this.mlflowNote.hidden = true;
    this.node.append(
      bar,
      this.mlflowNote,
      this.tools.node,
      this.summary.node,
      this.tasks.node,
      this.logs.node,
      this.metrics.node,
      this.config.node,
      this.events.node
    );
    this.buildConfig();
    this.buildLogs();
    void this.load();
  }

  get detail(): JobDetail | null {
    return this.current;
  }

  dispose(): void {
    window.clearTimeout(this.timer);
    window.clearTimeout(this.followTimer);
    this.charts.close();
    super.dispose();
  }

  /** Shown again (its tab chosen): a log that followed its end goes back there. */
  protected onAfterShow(): void {
    if (this.stick && this.follow.checked) {
      this.toLogEnd();
    }
  }

  private toLogEnd(): void {
    this.logPre.scrollTop = this.logPre.scrollHeight;
    this.stick = true;
  }

  /** Show the log section and focus it (the "logs" row action). */
  focusLogs(): void {
    this.logs.node.scrollIntoView();
    this.streamSelect.focus();
  }

  async load(): Promise<void> {
    window.clearTimeout(this.timer);
    try {
      const detail = await getJob(this.jobId, true);
      this.current = detail;
      this.error.textContent = '';
      this.stopButton.disabled = detail.final;
      this.mlflowButton.hidden = !detail.mlflowPage;
      this.mlflowNote.textContent = detail.mlflowHint || '';
      this.mlflowNote.hidden = !detail.mlflowHint;
      this.stopButton.title = detail.final
        ? `The job has ended (${detail.state})`
        : 'Stop this job';
      this.drawSummary(detail);
      this.drawTasks(detail);
      this.drawEvents(detail);
      this.fillTaskSelect(detail);
      void this.tools.update(detail);
      if (!this.configLoaded) {
        void this.loadConfig();
      }
      if (!this.logLoaded) {
        void this.loadLog();
      }
      if (!detail.final) {
        this.charts.connect(detail.metricsUrl);
        this.timer = window.setTimeout(() => void this.load(), 3000);
      } else {
        this.charts.ended();
        if (this.lastState !== detail.state) {
          void this.loadLog(); // the last lines once it ended
        }
      }
      this.lastState = detail.state;
    } catch (err) {
      this.error.textContent = `Could not load ${this.jobId}: ${(err as Error).message}`;
      this.summary.body.replaceChildren(this.error);
    }
  }

  private drawSummary(d: JobDetail): void {
    const dl = el('dl', 'pai-Summary-list');
    const rows: [string, string][] = [
      ['Job', d.id],
      ['State', d.state],
      ['User', d.username],
      ['Virtual cluster', d.virtualCluster || ''],
      ['Submitted', when(d.submissionTime)],
      ['Started', when(d.launchedTime)],
      ['Completed', when(d.completedTime)],
      ['Duration', duration(d.launchedTime, d.completedTime)],
      ['Tasks', String(d.totalTaskNumber)],
      ['GPUs', String(d.totalGpuNumber)],
      ['Retries', String(d.retries)],
      ['Exit code', d.exitCode === null || d.exitCode === undefined ? '' : String(d.exitCode)],
      ['Diagnostics', d.diagnostics || (d.state === 'WAITING' ? d.waitingReason || '' : '')]
    ];
    for (const [k, v] of rows) {
      if (!v) {
        continue;
      }
      const dt = el('dt', '', k);
      const dd = el('dd', k === 'State' ? `pai-Badge pai-Badge-${v.toLowerCase()}` : '', v);
      dl.append(dt, dd);
    }
    this.summary.body.replaceChildren(dl);
  }

  private drawTasks(d: JobDetail): void {
    for (const [name, shapes] of Object.entries(d.serviceIcons ?? {})) {
      serviceIcon(name, shapes); // the catalogue's icons, known by name for the buttons and tabs
    }
    const table = el('table', 'pai-Table');
    const head = el('tr');
    for (const h of ['Role', 'Index', 'State', 'IP', 'Ports', 'Exit code', 'Diagnostics', 'Open']) {
      const th = el('th', '', h);
      th.scope = 'col';
      head.append(th);
    }
    const thead = el('thead');
    thead.append(head);
    const tbody = el('tbody');
    for (const t of d.tasks) {
      const tr = el('tr');
      const ports = Object.entries(t.ports || {})
        .map(([k, v]) => `${k}:${v}`)
        .join(' ');
      for (const v of [
        t.role,
        String(t.index),
        t.state,
        t.ip || '',
        ports,
        t.exitCode === null ? '' : String(t.exitCode),
        t.diagnostics || ''
      ]) {
        tr.append(el('td', '', v));
      }
      const open = el('td', 'pai-Task-open');
      open.append(...this.serviceButtons(d, t));
      tr.append(open);
      tbody.append(tr);
    }
    table.append(thead, tbody);
    this.tasks.body.replaceChildren(table);
  }

  private serviceButtons(d: JobDetail, t: TaskDetail): HTMLElement[] {
    const where = `${t.role}[${t.index}] of ${d.name}`;
    const open = (service: string, title: string, url: string | null) => () =>
      void this.commands.execute(CommandIDs.openService, {
        id: d.id,
        role: t.role,
        index: t.index,
        service,
        title,
        url
      });
    if (!t.terminalPage) {
      // an ended task's TensorBoard: started on demand over the logs it wrote
      return t.tensorboardPage
        ? [
            toolButton(
              'TensorBoard',
              `TensorBoard of ${where}`,
              serviceIcon('tensorboard'),
              open('tensorboard', 'TensorBoard', t.tensorboardPage)
            )
          ]
        : [];
    }
    return [
      toolButton(
        'Terminal',
        `Terminal of ${where}`,
        serviceIcon('terminal'),
        open('terminal', 'Terminal', t.terminalPage)
      ),
      ...t.services
        .filter(s => s.url)
        .map(s =>
          toolButton(
            s.title,
            `${s.title} of ${where}`,
            serviceIcon(s.name, s.icon),
            open(s.name, s.title, s.url)
          )
        )
    ];
  }

  /** The job's events, oldest first, each from its time (to the second) on. */
  private drawEvents(d: JobDetail): void {
    const list = el('ul', 'pai-Events-list');
    for (const e of d.events || []) {
      const li = el('li');
      const at = when(e.time, true);
      if (at) {
        const time = el('time', '', at);
        time.dateTime = e.time as string;
        li.append(time, ' · ');
      }
      li.append([e.type, e.reason, e.message].filter(Boolean).join(' · '));
      list.append(li);
    }
    if (!list.childElementCount) {
      list.append(el('li', 'pai-Muted', d.eventsMessage || 'No events.'));
    }
    this.events.body.replaceChildren(list);
  }

  // ---- config ----------------------------------------------------------------------------------------------
  private buildConfig(): void {
    const bar = el('div', 'pai-Row');
    this.formatSelect = el('select', 'jp-mod-styled');
    this.formatSelect.setAttribute('aria-label', 'Config format');
    for (const f of ['yaml', 'json']) {
      const o = el('option', '', f.toUpperCase());
      o.value = f;
      this.formatSelect.append(o);
    }
    this.formatSelect.onchange = () => void this.loadConfig();
    const copy = button(
      'Copy',
      'Copy the config',
      () => void navigator.clipboard?.writeText(this.configPre.textContent || '')
    );
    bar.append(selectBox(this.formatSelect), copy);
    this.configPre = el('pre', 'pai-Pre pai-ConfigText');
    this.configPre.tabIndex = 0;
    this.configPre.setAttribute('aria-label', 'Job config as submitted');
    this.config.body.append(bar, this.configPre);
  }

  private async loadConfig(): Promise<void> {
    try {
      const { text } = await getConfig(this.jobId, this.formatSelect.value as 'yaml' | 'json');
      this.configPre.textContent = text;
      this.configLoaded = true;
    } catch (err) {
      this.configPre.textContent = `Could not load the config: ${(err as Error).message}`;
    }
  }

  // ---- logs ------------------------------------------------------------------------------------------------
  private buildLogs(): void {
    const bar = el('div', 'pai-Row');
    this.taskSelect = el('select', 'jp-mod-styled');
    this.taskSelect.setAttribute('aria-label', 'Task whose log to show');
    this.taskSelect.onchange = () => void this.loadLog();
    this.streamSelect = el('select', 'jp-mod-styled');
    this.streamSelect.setAttribute('aria-label', 'Log stream');
    for (const s of ['all', 'stdout', 'stderr']) {
      const o = el('option', '', s);
      o.value = s;
      this.streamSelect.append(o);
    }
    this.streamSelect.onchange = () => void this.loadLog();
    const followLabel = el('label', 'pai-Check');
    this.follow = el('input');
    this.follow.type = 'checkbox';
    this.follow.checked = true;
    this.follow.onchange = () => void this.loadLog();
    followLabel.append(this.follow, document.createTextNode(' Follow'));
    this.download = el('a', BUTTON_CLASS, 'Full log');
    this.download.setAttribute('download', '');
    this.download.setAttribute('aria-label', 'Download the full log');
    bar.append(
      selectBox(this.taskSelect),
      selectBox(this.streamSelect),
      followLabel,
      button('Tail', 'Show the log tail', () => void this.loadLog()),
      this.download
    );
    this.logPre = el('pre', 'pai-Pre pai-LogText');
    this.logPre.tabIndex = 0;
    this.logPre.setAttribute('aria-label', 'Log tail');
    this.logPre.setAttribute('aria-live', 'off');
    // whether the view sticks to the log's end: the reader's own scrolling decides, measured only while the page
    // is shown (a hidden page measures 0 and forgets its scroll position, which once ended the following)
    this.logPre.onscroll = () => {
      if (this.logPre.clientHeight > 0) {
        this.stick =
          this.logPre.scrollTop + this.logPre.clientHeight >= this.logPre.scrollHeight - 4;
      }
    };
    const note = el(
      'div',
      'pai-Muted',
      'The last 16 KiB of the log; "Full log" downloads all of it.'
    );
    this.logs.body.append(bar, this.logPre, note);
  }

  private fillTaskSelect(d: JobDetail): void {
    const keys = d.tasks.map(t => `${t.role}/${t.index}`);
    const have = [...this.taskSelect.options].map(o => o.value);
    if (keys.join() === have.join()) {
      return;
    }
    const keep = this.taskSelect.value;
    this.taskSelect.replaceChildren(
      ...d.tasks.map(t => {
        const o = el('option', '', `${t.role}[${t.index}]`);
        o.value = `${t.role}/${t.index}`;
        return o;
      })
    );
    if (keys.includes(keep)) {
      this.taskSelect.value = keep;
    }
  }

  private async loadLog(): Promise<void> {
    window.clearTimeout(this.followTimer);
    const [role, index] = (this.taskSelect.value || '/0').split('/');
    if (!role) {
      return;
    }
    const stream = this.streamSelect.value;
    this.download.href = fullLogUrl(this.jobId, role, Number(index), stream);
    try {
      const { text } = await getLogTail(this.jobId, role, Number(index), stream);
      const task = this.current?.tasks.find(t => t.role === role && t.index === Number(index));
      this.logPre.textContent = text || emptyLog(task?.state, stream);
      if (this.stick || !this.logLoaded) {
        this.toLogEnd();
      }
      this.logLoaded = true;
    } catch (err) {
      this.logPre.textContent = `No log yet: ${(err as Error).message}`;
    }
    if (this.follow.checked && this.current && !this.current.final) {
      this.followTimer = window.setTimeout(() => void this.loadLog(), 2000);
    }
  }

  private current: JobDetail | null = null;
  private lastState = '';
  private timer = 0;
  private followTimer = 0;
  private configLoaded = false;
  private logLoaded = false;
  private stick = true;
  private readonly stopButton: HTMLButtonElement;
  private readonly mlflowButton: HTMLButtonElement;
  private readonly mlflowNote = el('div', 'pai-Muted pai-MlflowHint');
  private readonly charts: JobMetrics;
  private readonly tools: JobTools;
  private readonly error = el('p', 'pai-Error');
  private readonly summary: { node: HTMLElement; body: HTMLElement };
  private readonly tasks: { node: HTMLElement; body: HTMLElement };
  private readonly events: { node: HTMLElement; body: HTMLElement };
  private readonly config: { node: HTMLElement; body: HTMLElement };
  private readonly logs: { node: HTMLElement; body: HTMLElement };
  private readonly metrics: { node: HTMLElement; body: HTMLElement };
  private formatSelect!: HTMLSelectElement;
  private configPre!: HTMLPreElement;
  private taskSelect!: HTMLSelectElement;
  private streamSelect!: HTMLSelectElement;
  private follow!: HTMLInputElement;
  private download!: HTMLAnchorElement;
  private logPre!: HTMLPreElement;
}
