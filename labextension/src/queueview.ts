// The waiting queue as a main-area panel (command "Show PAI waiting queue"): each virtual cluster's waiting jobs
// in order, with their place, priority class and why they wait. An admin changes a job's class (a select) or
// its place among its class's waiting jobs (up / down), through pai/api/jobs/{job}/priority; a user sees their
// own waiting jobs as plain text, without controls (the daemon lets only an admin reorder). Redrawn when the
// sidebar's job list changes (no poll of its own), after each change and on Refresh. All text goes in as text,
// never as HTML.
import { JupyterFrontEnd } from '@jupyterlab/application';
import { ICommandPalette, MainAreaWidget, Notification } from '@jupyterlab/apputils';
import { LabIcon, refreshIcon } from '@jupyterlab/ui-components';
import { Widget } from '@lumino/widgets';
import { jobPath, request } from './api';
import { button, el, toolButton } from './dom';
import { selectBox } from './selectbox';
import { CLASSES, movedPlace, QueuedJob, WaitingQueue } from './queueplace';
import { JobsPanel } from './sidebar';
import { CommandIDs } from './commands';

export class QueueView extends Widget {
  constructor() {
    super();
    this.id = 'pai-queue-view';
    this.addClass('pai-QueueView');
    this.title.label = 'PAI queue';
    this.title.caption = 'PAI waiting queue';
    this.title.closable = true;
    this.node.setAttribute('role', 'region');
    this.node.setAttribute('aria-label', 'PAI waiting queue');
    const header = el('div', 'pai-QueueView-header');
    header.append(
      el('h2', 'pai-QueueView-title', 'Waiting jobs'),
      toolButton('Refresh', 'Refresh the waiting queue', refreshIcon, () => void this.load())
    );
    this.statusNode = el('div', 'pai-QueueView-status');
    this.statusNode.setAttribute('role', 'status');
    this.body = el('div', 'pai-QueueView-body');
    this.node.append(header, this.statusNode, this.body);
  }

  async load(): Promise<void> {
    try {
      this.draw(await request<WaitingQueue>('api/queue'));
    } catch (err) {
      this.statusNode.textContent = `Could not read the queue: ${(err as Error).message}`;
    }
  }

  private draw(queue: WaitingQueue): void {
    const lines = Object.entries(queue.virtualClusters);
    const admin = queue.canReorder;
    this.statusNode.textContent = lines.length
      ? admin
        ? 'You may change the class or place of any waiting job.'
        : 'Your waiting jobs; only an admin may reorder the queue.'
      : 'No job is waiting.';
    this.body.replaceChildren();
    for (const [vc, line] of lines) {
      const table = el('table', 'pai-Table pai-QueueTable');
      table.setAttribute('aria-label', `Waiting jobs of virtual cluster ${vc}`);
      const head = el('tr');
      // a user who may not reorder sees no controls at all (not disabled ones that only say no)
      for (const h of ['Place', 'Job', 'Priority', 'Why waiting', ...(admin ? ['Move'] : [])]) {
        head.append(el('th', '', h));
      }
      table.append(head);
      for (const job of line) {
        table.append(this.row(job, line, admin));
      }
      this.body.append(el('h3', 'pai-QueueView-vc', `Virtual cluster ${vc}`), table);
    }
  }

  private row(job: QueuedJob, line: QueuedJob[], admin: boolean): HTMLTableRowElement {
    const tr = el('tr', 'pai-QueueRow');
    tr.dataset.job = job.job;
    const shown = job.jobPriority === 'test' ? 'default' : job.jobPriority;
    tr.append(
      el('td', 'pai-QueuePlace', String(job.ahead + 1)),
      el('td', 'pai-QueueJob', job.job),
      admin ? this.classCell(job, shown) : el('td', 'pai-QueueClass', shown),
      el('td', 'pai-QueueReason', job.waitingReason ?? '')
    );
    if (admin) {
      tr.append(this.moveCell(job, line));
    }
    return tr;
  }

  /** An admin's class select. */
  private classCell(job: QueuedJob, shown: string): HTMLTableCellElement {
    const select = el('select', 'pai-QueuePriority');
    select.setAttribute('aria-label', `Priority class of ${job.job}`);
    for (const c of CLASSES) {
      const option = el('option', '', c);
      option.value = c;
      select.append(option);
    }
    select.value = shown;
    select.onchange = () => void this.change(job.job, { jobPriority: select.value });
    const cell = el('td');
    cell.append(selectBox(select));
    return cell;
  }

  /** An admin's up / down, each disabled at the end of the job's class. */
  private moveCell(job: QueuedJob, line: QueuedJob[]): HTMLTableCellElement {
    const moves = el('td', 'pai-QueueMoves');
    for (const [text, step] of [
      ['Up', -1],
      ['Down', 1]
    ] as const) {
      const place = movedPlace(line, job.job, step);
      const b = button(text, `Move ${job.job} ${text.toLowerCase()}`, () => {
        if (place !== null) {
          void this.change(job.job, { position: place });
        }
      });
      b.disabled = place === null;
      moves.append(b);
    }
    return moves;
  }

  private async change(
    job: string,
    body: { jobPriority?: string; position?: number }
  ): Promise<void> {
    try {
      await request(`api/jobs/${jobPath(job)}/priority`, {
        method: 'PUT',
        body: JSON.stringify(body)
      });
    } catch (err) {
      Notification.error(`Reordering ${job}: ${(err as Error).message}`, { autoClose: 8000 });
    }
    await this.load();
  }

  private readonly statusNode: HTMLElement;
  private readonly body: HTMLElement;
}

/** The command, its palette entry, and a redraw whenever the sidebar's job list changes. */
export function registerQueueView(
  app: JupyterFrontEnd,
  panel: JobsPanel,
  icon: LabIcon,
  palette: ICommandPalette | null
): void {
  let main: MainAreaWidget<QueueView> | null = null;
  app.commands.addCommand(CommandIDs.showQueue, {
    label: 'Show PAI waiting queue',
    execute: () => {
      if (!main || main.isDisposed) {
        main = new MainAreaWidget({ content: new QueueView() });
        main.id = 'pai-queue';
        main.title.label = 'PAI queue';
        main.title.icon = icon;
        app.shell.add(main, 'main');
      }
      app.shell.activateById(main.id);
      void main.content.load();
    }
  });
  palette?.addItem({ command: CommandIDs.showQueue, category: 'PAI' });
  panel.changed.connect(() => {
    if (main && !main.isDisposed && main.isVisible) {
      void main.content.load();
    }
  });
}
