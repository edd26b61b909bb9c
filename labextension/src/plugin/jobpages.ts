// A job's page in the main area and what its rows and toolbar do to the job (open, logs, stop, clone, delete),
// and a task's services (Jupyter, TensorBoard, terminal, desktop) as Lab tabs, ssh as a dialog.
import { JupyterFrontEnd } from '@jupyterlab/application';
import {
  Dialog,
  IFrame,
  MainAreaWidget,
  Notification,
  showDialog,
  WidgetTracker
} from '@jupyterlab/apputils';
import { URLExt } from '@jupyterlab/coreutils';
import { ServerConnection } from '@jupyterlab/services';
import { askCloneName, confirmStop } from '../actions';
import { cloneJob, deleteJob, jobPath, stopJob } from '../api';
import { CommandIDs } from '../commands';
import { freeName } from '../format';
import { FINAL } from '../states';
import { paiIcon, serviceIcon } from '../icons';
import { JobPage } from '../jobpage';
import { JobsPanel } from '../sidebar';
import { showSsh } from '../ssh';

/** Opens (or brings forward and reloads) a job's page. */
export type OpenJob = (id: string) => JobPage;

/** An error of a command as a Lab notification. */
export function fail(what: string, err: unknown): void {
  Notification.error(`${what}: ${(err as Error).message}`, { autoClose: 8000 });
}

/** "Submitted ID" (or "Cloned as ID"), with the way on to the job: Open, its page. */
export function submittedNotice(id: string, open: (id: string) => void, what = 'Submitted'): void {
  Notification.success(`${what} ${id}`, {
    autoClose: 10000,
    actions: [{ label: 'Open', caption: `Open the job page of ${id}`, callback: () => open(id) }]
  });
}

// a service's page: the url the server's answer gives for it (services: [{name, title, url}]), else its route
function serviceUrl(id: string, role: string, index: number, service: string): string {
  const base = ServerConnection.makeSettings().baseUrl;
  return URLExt.join(
    base,
    'pai/jobs',
    jobPath(id),
    encodeURIComponent(role),
    String(index),
    `${encodeURIComponent(service)}/`
  );
}

/** A tab's frame of a page the server serves sandboxed (a task's service, the MLflow UI: an opaque origin
 *  whatever the frame allows). */
export function serviceFrame(url: string): IFrame {
  const frame = new IFrame({
    sandbox: [
      'allow-scripts',
      'allow-same-origin',
      'allow-forms',
      'allow-downloads',
      'allow-popups',
      'allow-modals'
    ],
    referrerPolicy: 'same-origin'
  });
  frame.url = url;
  frame.addClass('pai-ServiceFrame');
  return frame;
}

/** The job commands and the trackers of job pages and service tabs; returns how to open a job's page. */
export function registerJobPages(app: JupyterFrontEnd, panel: JobsPanel): OpenJob {
  const { commands, shell } = app;
  const pages = new WidgetTracker<MainAreaWidget<JobPage>>({ namespace: 'pai-job' });
  const services = new WidgetTracker<MainAreaWidget<IFrame>>({ namespace: 'pai-service' });

  const openJob = (id: string): JobPage => {
    const found = pages.find(w => w.content.jobId === id);
    if (found) {
      shell.activateById(found.id);
      void found.content.load();
      return found.content;
    }
    const page = new JobPage(id, commands);
    const main = new MainAreaWidget({ content: page });
    main.id = page.id;
    main.title.label = page.title.label;
    main.title.caption = page.title.caption;
    main.title.icon = paiIcon;
    void pages.add(main);
    shell.add(main, 'main');
    shell.activateById(main.id);
    return page;
  };
  const jobArg = (args: Record<string, unknown>): string => String(args.id ?? '');
  const stateOf = (args: Record<string, unknown>): string | undefined =>
    panel.jobs.find(j => j.id === jobArg(args))?.state;

  commands.addCommand(CommandIDs.openJob, {
    label: 'Open job page',
    execute: args => void openJob(jobArg(args))
  });
  commands.addCommand(CommandIDs.openLogs, {
    label: 'Logs',
    execute: args => {
      const page = openJob(jobArg(args));
      window.setTimeout(() => page.focusLogs(), 0);
    }
  });
  commands.addCommand(CommandIDs.stopJob, {
    label: 'Stop',
    isEnabled: args => {
      const state = stateOf(args);
      return !state || !FINAL.has(state);
    },
    execute: async args => {
      if (!(await confirmStop(jobArg(args)))) {
        return;
      }
      try {
        await stopJob(jobArg(args));
        Notification.info(`Stopping ${jobArg(args)}`, { autoClose: 4000 });
        void panel.refresh();
      } catch (err) {
        fail(`Stop ${jobArg(args)}`, err);
      }
    }
  });
  commands.addCommand(CommandIDs.cloneJob, {
    label: 'Clone…',
    execute: async args => {
      const from = jobArg(args);
      const old = from.split('~').slice(1).join('~');
      const name = await askCloneName(
        from,
        freeName(
          old,
          panel.jobs.map(j => j.name)
        )
      );
      if (!name) {
        return;
      }
      try {
        const { id } = await cloneJob(from, name);
        submittedNotice(id, openJob, 'Cloned as');
        void panel.refresh();
      } catch (err) {
        fail(`Clone ${jobArg(args)}`, err);
      }
    }
  });
  commands.addCommand(CommandIDs.deleteJob, {
    label: 'Delete…',
    isEnabled: args => {
      const state = stateOf(args);
      return !state || FINAL.has(state);
    },
    execute: async args => {
      const id = jobArg(args);
      const answer = await showDialog({
        title: 'Delete job',
        body: `Delete ${id} and its logs? This cannot be undone.`,
        buttons: [Dialog.cancelButton(), Dialog.warnButton({ label: 'Delete' })]
      });
      if (!answer.button.accept) {
        return;
      }
      try {
        await deleteJob(id);
        void panel.refresh();
      } catch (err) {
        fail(`Delete ${id}`, err);
      }
    }
  });
  commands.addCommand(CommandIDs.openService, {
    label: args =>
      `${String(args.title ?? args.service)} of ${String(args.role)}[${String(args.index)}]`,
    execute: args => {
      const id = jobArg(args);
      const role = String(args.role);
      const index = Number(args.index);
      const service = String(args.service);
      const title = String(args.title ?? service);
      if (service === 'ssh') {
        // a row menu's task, or (no role) every task of the job
        void (args.role === undefined ? showSsh(id) : showSsh(id, role, index));
        return;
      }
      const key = `pai-${service}-${id}-${role}-${index}`.replace(/[^A-Za-z0-9_-]/g, '_');
      const found = services.find(w => w.id === key);
      if (found) {
        shell.activateById(key);
        return;
      }
      const frame = serviceFrame(
        args.url ? String(args.url) : serviceUrl(id, role, index, service)
      );
      const main = new MainAreaWidget({ content: frame });
      main.id = key;
      main.title.label = `${title}: ${role}[${index}] ${id.split('~').slice(1).join('~')}`;
      main.title.caption = `${title} of ${role}[${index}] of ${id}`;
      main.title.closable = true;
      main.title.icon = serviceIcon(service);
      void services.add(main);
      shell.add(main, 'main');
      shell.activateById(key);
    }
  });
  return openJob;
}
