// What follows the sidebar's job list: the status-bar item (running / waiting counts; a click opens the sidebar)
// and the notifications of notify.ts (a job seen live that ended, and the changes a job asked for).
import { JupyterFrontEnd } from '@jupyterlab/application';
import { IStatusBar } from '@jupyterlab/statusbar';
import { Widget } from '@lumino/widgets';
import { counts } from '../format';
import { JobNotifier } from '../notify';
import { JobsPanel } from '../sidebar';
import { OpenJob } from './jobpages';

export function registerStatus(
  app: JupyterFrontEnd,
  panel: JobsPanel,
  statusBar: IStatusBar | null,
  openJob: OpenJob
): void {
  const { shell } = app;
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

  const notifier = new JobNotifier(id => void openJob(id));
  panel.changed.connect((_, list) => {
    const c = counts(list.jobs);
    item.node.textContent = `PAI: ${c.running} running · ${c.waiting} waiting`;
    item.node.setAttribute('aria-label', `PAI jobs: ${c.running} running, ${c.waiting} waiting`);
    notifier.update(list);
  });
}
