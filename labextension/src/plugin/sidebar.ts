// The jobs sidebar: the panel in Lab's left area, restored with the layout, and its two commands (show, refresh).
import { ILayoutRestorer, JupyterFrontEnd } from '@jupyterlab/application';
import { ICommandPalette } from '@jupyterlab/apputils';
import { CommandIDs } from '../commands';
import { paiIcon } from '../icons';
import { JobsPanel } from '../sidebar';

/** Add the jobs panel to the left area and its commands; the panel is what the other groups follow. */
export function registerSidebar(
  app: JupyterFrontEnd,
  restorer: ILayoutRestorer | null,
  palette: ICommandPalette | null
): JobsPanel {
  const { commands, shell } = app;
  const panel = new JobsPanel(commands);
  panel.title.icon = paiIcon;
  shell.add(panel, 'left', { rank: 300 });
  restorer?.add(panel, 'pai-jobs-panel');
  commands.addCommand(CommandIDs.showJobs, {
    label: 'Show PAI jobs',
    execute: () => shell.activateById(panel.id)
  });
  commands.addCommand(CommandIDs.refreshJobs, {
    label: 'Refresh PAI jobs',
    execute: () => panel.refresh(true)
  });
  palette?.addItem({ command: CommandIDs.showJobs, category: 'PAI' });
  palette?.addItem({ command: CommandIDs.refreshJobs, category: 'PAI' });
  return panel;
}
