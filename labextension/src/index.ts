// pai_jupyter's JupyterLab face: the jobs sidebar, job pages, task services as Lab tabs, the submit form,
// "Submit as PAI job" on job files, the waiting queue, the sweeps page, a status-bar item and end-of-job
// notifications. Everything talks only to the Jupyter server extension's routes (pai/...). Each group of what
// the plugin registers lives in plugin/ (its commands' ids in commands.ts); activate wires them together.
import { ILayoutRestorer, JupyterFrontEnd, JupyterFrontEndPlugin } from '@jupyterlab/application';
import { ICommandPalette } from '@jupyterlab/apputils';
import { PageConfig } from '@jupyterlab/coreutils';
import { IFileBrowserFactory } from '@jupyterlab/filebrowser';
import { ILauncher } from '@jupyterlab/launcher';
import { ISettingRegistry } from '@jupyterlab/settingregistry';
import { IStatusBar } from '@jupyterlab/statusbar';
import { paiIcon } from './icons';
import { registerFileCommands } from './plugin/files';
import { registerForm } from './plugin/form';
import { registerJobPages } from './plugin/jobpages';
import { registerMlflow } from './plugin/mlflow';
import { registerSettings } from './plugin/settings';
import { registerSidebar } from './plugin/sidebar';
import { registerStatus } from './plugin/status';
import { registerSweeps } from './plugin/sweeps';
import { registerQueueView } from './queueview';

export { paiIcon };

const PLUGIN_ID = 'pai-jupyter:plugin';

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
    const panel = registerSidebar(app, restorer, palette);
    const openJob = registerJobPages(app, panel);
    registerForm(app, panel, palette, launcher);
    registerFileCommands(app, browsers, panel, openJob);
    registerQueueView(app, panel, paiIcon, palette);
    registerSweeps(app, panel, palette, launcher);
    registerMlflow(app, palette, launcher);
    registerStatus(app, panel, statusBar, openJob);
    registerSettings(PLUGIN_ID, panel, settings);
    void panel.refresh();
    document.body.dataset.paiJupyter = 'active';
  }
};

export default plugin;
