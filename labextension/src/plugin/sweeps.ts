// The Sweeps page in the main area: its command (palette and launcher, with its icon), and a read of the page at
// each tick of the sidebar's refresh while the page is visible (no timer of its own).
import { JupyterFrontEnd } from '@jupyterlab/application';
import { ICommandPalette, MainAreaWidget } from '@jupyterlab/apputils';
import { ILauncher } from '@jupyterlab/launcher';
import { CommandIDs } from '../commands';
import { sweepIcon } from '../icons';
import { JobsPanel } from '../sidebar';
import { SweepsView } from '../sweepsview';

export function registerSweeps(
  app: JupyterFrontEnd,
  panel: JobsPanel,
  palette: ICommandPalette | null,
  launcher: ILauncher | null
): void {
  let main: MainAreaWidget<SweepsView> | null = null;
  app.commands.addCommand(CommandIDs.showSweeps, {
    label: 'PAI sweeps',
    caption: 'The sweeps and their trials: parameters, reported metrics, best trial',
    icon: args => (args.isPalette ? undefined : sweepIcon),
    execute: args => {
      if (!main || main.isDisposed) {
        main = new MainAreaWidget({ content: new SweepsView(app.commands) });
        main.id = 'pai-sweeps';
        main.title.label = 'PAI sweeps';
        main.title.icon = sweepIcon;
        main.title.closable = true;
        app.shell.add(main, 'main');
      }
      app.shell.activateById(main.id);
      if (args.name) {
        main.content.select(String(args.name));
      } else {
        void main.content.load();
      }
    }
  });
  palette?.addItem({ command: CommandIDs.showSweeps, category: 'PAI' });
  launcher?.add({ command: CommandIDs.showSweeps, category: 'Other', rank: 2 });
  panel.ticked.connect(() => {
    if (main && !main.isDisposed && main.isVisible) {
      void main.content.load();
    }
  });
}
