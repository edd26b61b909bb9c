// Notebooks as PAI jobs: "Run as PAI job" on a .ipynb in the file browser (papermill runs it in a task, its
// parameters cell overridden by the JSON asked for), and the executed notebook of such a job, opened read-only in
// a Lab tab: the server renders what the task has written so far into a sandboxed page, which the tab reloads
// while the job runs (pai/api/jobs/{id}/notebook?format=html).
import { JupyterFrontEnd } from '@jupyterlab/application';
import { IFrame, InputDialog, MainAreaWidget, Notification } from '@jupyterlab/apputils';
import { URLExt } from '@jupyterlab/coreutils';
import { IFileBrowserFactory } from '@jupyterlab/filebrowser';
import { ServerConnection } from '@jupyterlab/services';
import { CommandRegistry } from '@lumino/commands';
import { jobPath } from './api';
import { button } from './dom';
import { parseParameters } from './notebookparams';
import { CommandIDs } from './commands';
import { FINAL } from './states';
import { selectedFile } from './fileselection';

const RELOAD_MS = 3000;

export function notebookUrl(id: string, format: 'json' | 'html'): string {
  const base = ServerConnection.makeSettings().baseUrl;
  return (
    URLExt.join(base, 'pai/api/jobs', jobPath(id), 'notebook') +
    (format === 'html' ? '?format=html' : '')
  );
}

async function call(url: string, init: RequestInit): Promise<Record<string, unknown>> {
  const settings = ServerConnection.makeSettings();
  const response = await ServerConnection.makeRequest(url, init, settings);
  const body = (await response.json().catch(() => ({}))) as Record<string, unknown>;
  if (!response.ok) {
    throw new Error(String(body.message ?? response.statusText));
  }
  return body;
}

/** Add "Executed notebook" to a job page's toolbar when the job is a notebook job (a few lines in jobpage.ts). */
export function addNotebookButton(
  jobId: string,
  commands: CommandRegistry,
  bar: HTMLElement
): void {
  const settings = ServerConnection.makeSettings();
  void ServerConnection.makeRequest(notebookUrl(jobId, 'json'), { method: 'GET' }, settings).then(
    r => {
      if (r.ok) {
        bar.append(
          button(
            'Executed notebook',
            'Open the executed notebook of this job (read-only)',
            () => void commands.execute(CommandIDs.openExecutedNotebook, { id: jobId })
          )
        );
      }
    }
  );
}

export function registerNotebookJobs(
  app: JupyterFrontEnd,
  browsers: IFileBrowserFactory | null,
  openJob: (id: string) => unknown
): void {
  const { commands, shell } = app;
  const selectedNotebook = (): string | null => {
    const path = selectedFile(browsers)?.path;
    return path && path.endsWith('.ipynb') ? path : null;
  };
  commands.addCommand(CommandIDs.runNotebook, {
    label: 'Run as PAI job',
    caption: 'Run this notebook as a PAI job with papermill (its parameters cell overridden)',
    isVisible: args => !!(args.path || selectedNotebook()),
    execute: async args => {
      const path = String(args.path || selectedNotebook() || '');
      if (!path) {
        return;
      }
      const typed = await InputDialog.getText({
        title: `Run ${path} as a PAI job`,
        label: 'Parameters (JSON; they override the cell tagged "parameters")',
        placeholder: '{"lr": 0.1, "epochs": 2}',
        text: '{}'
      });
      if (!typed.button.accept) {
        return;
      }
      const parameters = parseParameters(typed.value ?? '');
      if (typeof parameters === 'string') {
        Notification.error(parameters, { autoClose: 8000 });
        return;
      }
      try {
        const base = ServerConnection.makeSettings().baseUrl;
        const answer = await call(URLExt.join(base, 'pai/api/notebook-jobs'), {
          method: 'POST',
          body: JSON.stringify({ path, parameters })
        });
        const id = String(answer.id);
        Notification.success(`Submitted ${id}`, { autoClose: 5000 });
        openJob(id);
      } catch (err) {
        Notification.error(`Run ${path}: ${(err as Error).message}`, { autoClose: 8000 });
      }
    }
  });
  commands.addCommand(CommandIDs.openExecutedNotebook, {
    label: 'Open executed notebook',
    execute: args => {
      const id = String(args.id ?? '');
      const key = `pai-notebook-${id}`.replace(/[^A-Za-z0-9_-]/g, '_');
      if (document.getElementById(key)) {
        shell.activateById(key);
        return;
      }
      const frame = new IFrame({ sandbox: ['allow-scripts'], referrerPolicy: 'same-origin' });
      frame.url = notebookUrl(id, 'html');
      // the page sits in an opaque origin and cannot reload itself with our cookie: reload it from here when
      // what the task has written changes, until the job has ended
      let seen = '';
      const timer = window.setInterval(async () => {
        try {
          const body = await call(notebookUrl(id, 'json'), { method: 'GET' });
          const now = `${String(body.state)} ${JSON.stringify(body.notebook ?? null).length}`;
          if (now !== seen) {
            frame.url = `${notebookUrl(id, 'html')}&t=${Date.now()}`;
          }
          seen = now;
          if (FINAL.has(String(body.state))) {
            window.clearInterval(timer);
          }
        } catch {
          window.clearInterval(timer);
        }
      }, RELOAD_MS);
      frame.addClass('pai-ServiceFrame');
      const main = new MainAreaWidget({ content: frame });
      main.id = key;
      main.title.label = `Executed: ${id.split('~').slice(1).join('~')}`;
      main.title.caption = `The executed notebook of ${id} (read-only)`;
      main.title.closable = true;
      main.disposed.connect(() => window.clearInterval(timer));
      shell.add(main, 'main');
      shell.activateById(key);
    }
  });
  app.contextMenu.addItem({
    command: CommandIDs.runNotebook,
    selector: '.jp-DirListing-item[data-file-type="notebook"]',
    rank: 11
  });
}
