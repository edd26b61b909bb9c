// pai_jupyter's JupyterLab face: the jobs sidebar, job pages, task services as Lab tabs, the submit form,
// "Submit as PAI job" on job files, a status-bar item and end-of-job notifications. Everything talks only to
// the Jupyter server extension's routes (pai/...).
import { ILayoutRestorer, JupyterFrontEnd, JupyterFrontEndPlugin } from '@jupyterlab/application';
import {
  Dialog,
  ICommandPalette,
  IFrame,
  MainAreaWidget,
  Notification,
  showDialog,
  ToolbarButton,
  WidgetTracker
} from '@jupyterlab/apputils';
import { PageConfig, URLExt } from '@jupyterlab/coreutils';
import { DocumentRegistry, IDocumentWidget } from '@jupyterlab/docregistry';
import { IFileBrowserFactory } from '@jupyterlab/filebrowser';
import { ILauncher } from '@jupyterlab/launcher';
import { ServerConnection } from '@jupyterlab/services';
import { ISettingRegistry } from '@jupyterlab/settingregistry';
import { IStatusBar } from '@jupyterlab/statusbar';
import { Widget } from '@lumino/widgets';
import { cloneJob, deleteJob, getConfig, jobPath, stopJob, validate } from './api';
import { counts, freeName } from './format';
import { JobNotifier } from './notify';
import { registerQueueView } from './queueview';
import { SubmitForm } from './form';
import { JobPage } from './jobpage';
import { registerNotebookJobs } from './notebookjob';
import { JobsPanel } from './sidebar';
import { askCloneName, confirmStop } from './actions';
import { paiIcon, serviceIcon } from './icons';
import { showSsh } from './ssh';

export { paiIcon };

const PLUGIN_ID = 'pai-jupyter:plugin';

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

const plugin: JupyterFrontEndPlugin<void> = {
  id: PLUGIN_ID,
  description: 'PAI jobs in JupyterLab: sidebar, job pages, submit form, task terminals',
  autoStart: true,
  optional: [
    ILayoutRestorer,
    ICommandPalette,
    ILauncher,
    ISettingRegistry,
    IStatusBar,
    IFileBrowserFactory
  ],
  activate: (
    app: JupyterFrontEnd,
    restorer: ILayoutRestorer | null,
    palette: ICommandPalette | null,
    launcher: ILauncher | null,
    settings: ISettingRegistry | null,
    statusBar: IStatusBar | null,
    browsers: IFileBrowserFactory | null
  ) => {
    if (PageConfig.getOption('paiJupyterApi') !== '1') {
      // no pai_jupyter server extension behind this Lab (e.g. the in-task Jupyter of a job): nothing to show
      document.body.dataset.paiJupyter = 'no-server-extension';
      return;
    }
    const { commands, shell } = app;
    const panel = new JobsPanel(commands);
    panel.title.icon = paiIcon;
    shell.add(panel, 'left', { rank: 300 });
    restorer?.add(panel, 'pai-jobs-panel');
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
    const fail = (what: string, err: unknown): void => {
      Notification.error(`${what}: ${(err as Error).message}`, { autoClose: 8000 });
    };

    commands.addCommand('pai:show-jobs', {
      label: 'Show PAI jobs',
      execute: () => shell.activateById(panel.id)
    });
    commands.addCommand('pai:refresh-jobs', {
      label: 'Refresh PAI jobs',
      execute: () => panel.refresh(true)
    });
    commands.addCommand('pai:open-job', {
      label: 'Open job page',
      execute: args => void openJob(jobArg(args))
    });
    commands.addCommand('pai:open-logs', {
      label: 'Logs',
      execute: args => {
        const page = openJob(jobArg(args));
        window.setTimeout(() => page.focusLogs(), 0);
      }
    });
    commands.addCommand('pai:stop-job', {
      label: 'Stop',
      isEnabled: args => {
        const job = panel.jobs.find(j => j.id === jobArg(args));
        return !job || !['SUCCEEDED', 'FAILED', 'STOPPED'].includes(job.state);
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
    commands.addCommand('pai:clone-job', {
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
          Notification.success(`Cloned as ${id}`, { autoClose: 5000 });
          void panel.refresh();
        } catch (err) {
          fail(`Clone ${jobArg(args)}`, err);
        }
      }
    });
    commands.addCommand('pai:delete-job', {
      label: 'Delete…',
      isEnabled: args => {
        const job = panel.jobs.find(j => j.id === jobArg(args));
        return !job || ['SUCCEEDED', 'FAILED', 'STOPPED'].includes(job.state);
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
    commands.addCommand('pai:open-service', {
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
        frame.url = args.url ? String(args.url) : serviceUrl(id, role, index, service);
        frame.addClass('pai-ServiceFrame');
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

    const openForm = (doc?: Record<string, unknown>): void => {
      const form = new SubmitForm(doc); // several roles open in pro mode, each role by its name
      const main = new MainAreaWidget({ content: form });
      main.id = form.id;
      main.title.label = 'New PAI job';
      main.title.icon = paiIcon;
      main.title.closable = true;
      form.submitted.connect((_, id) => {
        Notification.success(`Submitted ${id}`, { autoClose: 5000 });
        void panel.refresh();
      });
      shell.add(main, 'main');
      shell.activateById(main.id);
    };
    commands.addCommand('pai:new-job', {
      label: args => (args.from ? 'Clone to form' : 'New PAI job'),
      caption: 'Fill in and submit a PAI job',
      icon: args => (args.isPalette ? undefined : paiIcon),
      execute: async args => {
        if (!args.from) {
          openForm();
          return;
        }
        try {
          const { text } = await getConfig(String(args.from), 'v1'); // v2 jobs converted by the server
          const doc = JSON.parse(text);
          doc.jobName = `${doc.jobName ?? 'job'}-copy`;
          openForm(doc);
        } catch (err) {
          fail('Clone to form', err);
        }
      }
    });

    const isJobFile = (path: string): boolean => /\.(ya?ml|json)$/i.test(path);
    const selectedFile = (): string | null => {
      const browser = browsers?.tracker.currentWidget;
      const item = browser ? browser.selectedItems().next() : undefined;
      const model =
        item && 'value' in item
          ? (item as { value?: { path: string; type: string } }).value
          : (item as { path: string; type: string } | undefined);
      return model && model.type !== 'directory' && isJobFile(model.path) ? model.path : null;
    };
    commands.addCommand('pai:submit-file', {
      label: 'Submit as PAI job',
      isVisible: args => !!(args.path || selectedFile()),
      execute: async args => {
        const path = String(args.path || selectedFile() || '');
        if (!path) {
          return;
        }
        try {
          const model = await app.serviceManager.contents.get(path, {
            content: true,
            format: 'text'
          });
          const answer = await validate(String(model.content), true);
          if (answer.problems.length) {
            const lines = answer.problems.map(p =>
              p.path ? `${p.path}: ${p.message}` : p.message
            );
            await showDialog({
              title: (answer as { refused?: boolean }).refused
                ? `${path} was not submitted`
                : `${path} is not a valid job`,
              body: lines.join('\n'),
              buttons: [Dialog.okButton()]
            });
            return;
          }
          Notification.success(`Submitted ${answer.id}`, { autoClose: 5000 });
          void panel.refresh();
        } catch (err) {
          fail(`Submit ${path}`, err);
        }
      }
    });
    // a toolbar button on an open job file (saved first, then submitted as it is on disk)
    const submitButton: DocumentRegistry.IWidgetExtension<
      IDocumentWidget,
      DocumentRegistry.IModel
    > = {
      createNew: (widget, context) => {
        if (!isJobFile(context.path)) {
          return;
        }
        const button = new ToolbarButton({
          label: 'Submit as PAI job',
          tooltip: 'Save this file and submit it as a PAI job',
          onClick: async () => {
            await context.save();
            await commands.execute('pai:submit-file', { path: context.path });
          }
        });
        button.addClass('pai-SubmitFileButton');
        widget.toolbar.insertItem(10, 'paiSubmit', button);
        return button;
      }
    };
    for (const factory of ['Editor', 'JSON']) {
      app.docRegistry.addWidgetExtension(factory, submitButton);
    }
    registerNotebookJobs(app, browsers, openJob); // "Run as PAI job" on notebooks, their executed copy
    app.contextMenu.addItem({
      command: 'pai:submit-file',
      selector: '.jp-DirListing-item[data-isdir="false"]',
      rank: 10
    });

    palette?.addItem({ command: 'pai:new-job', category: 'PAI' });
    palette?.addItem({ command: 'pai:show-jobs', category: 'PAI' });
    registerQueueView(app, panel, paiIcon, palette); // queueview.ts
    palette?.addItem({ command: 'pai:refresh-jobs', category: 'PAI' });
    launcher?.add({ command: 'pai:new-job', category: 'Other', rank: 1 });

    // status bar: running / waiting counts; a click opens the sidebar
    const item = new Widget();
    item.addClass('pai-StatusItem');
    item.node.setAttribute('role', 'button');
    item.node.tabIndex = 0;
    item.node.title = 'PAI jobs: click to show the list';
    item.node.onclick = () => shell.activateById(panel.id);
    item.node.onkeydown = event => {
      if (event.key === 'Enter' || event.key === ' ') {
        shell.activateById(panel.id);
      }
    };
    statusBar?.registerStatusItem('pai-jupyter:status', { item, align: 'left', rank: 5 });

    // notifications (notify.ts): a job seen live that ended, and the changes a job asked for
    const notifier = new JobNotifier(id => void openJob(id));
    panel.changed.connect((_, list) => {
      const c = counts(list.jobs);
      item.node.textContent = `PAI: ${c.running} running · ${c.waiting} waiting`;
      item.node.setAttribute('aria-label', `PAI jobs: ${c.running} running, ${c.waiting} waiting`);
      notifier.update(list);
    });

    const apply = (s: ISettingRegistry.ISettings | null): void => {
      const seconds = s ? Number(s.get('refreshSeconds').composite) : 5;
      panel.setInterval(seconds || 5);
      const profile = s ? String(s.get('defaultProfile').composite || '') : '';
      if (profile) {
        void panel.profiles.useDefault(profile);
      }
    };
    if (settings) {
      void settings
        .load(PLUGIN_ID)
        .then(s => {
          apply(s);
          s.changed.connect(() => apply(s));
        })
        .catch(() => apply(null));
    } else {
      apply(null);
    }
    void panel.refresh();
    document.body.dataset.paiJupyter = 'active';
  }
};

export default plugin;
