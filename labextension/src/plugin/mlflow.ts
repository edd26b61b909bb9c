// The cluster's MLflow UI in one Lab tab (server/mlflow_proxy.py serves it behind Jupyter's login, with the
// user's own MLflow credentials): "MLflow" in the palette and the launcher, a job page's "MLflow run", the Sweeps
// page's "Compare in MLflow" (MLflow's compare view of chosen jobs' runs).
import { JupyterFrontEnd } from '@jupyterlab/application';
import { ICommandPalette, IFrame, MainAreaWidget, Notification } from '@jupyterlab/apputils';
import { URLExt } from '@jupyterlab/coreutils';
import { ILauncher } from '@jupyterlab/launcher';
import { ServerConnection } from '@jupyterlab/services';
import { compareInMlflow } from '../api';
import { CommandIDs } from '../commands';
import { mlflowIcon } from '../icons';
import { serviceFrame } from './jobpages';

const TAB_ID = 'pai-mlflow';

export function registerMlflow(
  app: JupyterFrontEnd,
  palette: ICommandPalette | null,
  launcher: ILauncher | null
): void {
  let main: MainAreaWidget<IFrame> | null = null;
  const open = (url: string): void => {
    if (!main || main.isDisposed) {
      const frame = serviceFrame(url);
      main = new MainAreaWidget({ content: frame });
      main.id = TAB_ID;
      main.title.label = 'MLflow';
      main.title.caption = 'Your jobs as MLflow runs';
      main.title.icon = mlflowIcon;
      main.title.closable = true;
      app.shell.add(main, 'main');
    }
    main.content.url = url; // (again for the same url: back to that page from wherever the tab went)
    app.shell.activateById(main.id);
  };
  app.commands.addCommand(CommandIDs.openMlflow, {
    label: 'MLflow',
    caption: 'Your jobs as MLflow runs: parameters, metrics, artifacts, compare',
    icon: args => (args.isPalette ? undefined : mlflowIcon),
    execute: args => {
      const base = ServerConnection.makeSettings().baseUrl;
      open(args.url ? String(args.url) : URLExt.join(base, 'pai/mlflow/'));
    }
  });
  app.commands.addCommand(CommandIDs.compareInMlflow, {
    label: 'Compare in MLflow',
    caption: "Open MLflow's compare view of these jobs' runs",
    execute: async args => {
      const jobs = ((args.jobs as string[] | undefined) ?? []).map(String);
      try {
        const { url, without } = await compareInMlflow(jobs);
        open(url);
        if (without.length) {
          Notification.info(`Not compared (no MLflow run): ${without.join(', ')}`, {
            autoClose: 6000
          });
        }
      } catch (err) {
        Notification.error(`Compare in MLflow: ${(err as Error).message}`, { autoClose: 8000 });
      }
    }
  });
  palette?.addItem({ command: CommandIDs.openMlflow, category: 'PAI' });
  launcher?.add({ command: CommandIDs.openMlflow, category: 'Other', rank: 3 });
}
