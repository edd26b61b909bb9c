// The LabIcons of pai_jupyter's tabs and launcher items: the jobs list (sidebar, job pages, the form), a task's
// TensorBoard and remote desktop; a task's terminal and Jupyter use Lab's own icons. The
// `jp-icon3` class lets Lab's light and dark themes recolour them.
import { jupyterIcon, LabIcon, terminalIcon } from '@jupyterlab/ui-components';

const svg = (body: string): string =>
  `<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 24 24"><g class="jp-icon3" fill="#616161">${body}</g></svg>`;

export const paiIcon = new LabIcon({
  name: 'pai-jupyter:jobs',
  svgstr: svg(
    '<rect x="3" y="4" width="18" height="3" rx="1"/><rect x="3" y="10.5" width="13" height="3" rx="1"/>' +
      '<rect x="3" y="17" width="8" height="3" rx="1"/>'
  )
});

export const tensorboardIcon = new LabIcon({
  name: 'pai-jupyter:tensorboard',
  svgstr: svg(
    '<path d="M12 2 3 7.2v9.6L12 22l9-5.2V7.2L12 2zm0 2.3 6.9 4L12 12.3 5.1 8.3 12 4.3z' +
      'M5 10l6 3.5v6.2L5 16.2V10zm8 9.7v-6.2l6-3.5v6.2l-6 3.5z"/>'
  )
});

export const desktopIcon = new LabIcon({
  name: 'pai-jupyter:desktop',
  svgstr: svg(
    '<path d="M3 4h18a1 1 0 0 1 1 1v11a1 1 0 0 1-1 1h-7v2h3v2H7v-2h3v-2H3a1 1 0 0 1-1-1V5a1 1 0 0 1 1-1z' +
      'm1 2v9h16V6H4z"/>'
  )
});

/** The icon of a task service's tab. */
export function serviceIcon(service: string): LabIcon {
  switch (service) {
    case 'tensorboard':
      return tensorboardIcon;
    case 'desktop':
      return desktopIcon;
    case 'terminal':
      return terminalIcon;
    case 'jupyter':
      return jupyterIcon;
    default:
      return paiIcon;
  }
}

/** The Sweeps page: points of a search converging on the best one. */
export const sweepIcon = new LabIcon({
  name: 'pai-jupyter:sweeps',
  svgstr: svg(
    '<circle cx="5" cy="18" r="2"/><circle cx="9" cy="8" r="2"/><circle cx="19" cy="16" r="2"/>' +
      '<circle cx="15" cy="5" r="2"/><circle cx="12" cy="13" r="3"/>'
  )
});

/** The MLflow tab: a run's rising curve. */
export const mlflowIcon = new LabIcon({
  name: 'pai-jupyter:mlflow',
  svgstr: svg(
    '<path d="M3 19h18v2H3zM4 16.5 9 11l3.5 3L19 6.5 20.5 8 12.7 17 9.1 13.9 5.5 17.9z"/>'
  )
});
