// The LabIcons of pai_jupyter's tabs and launcher items: the jobs list (sidebar, job pages, the form), the
// sweeps and MLflow pages, and each task service's from the services catalogue (its shapes come with the service:
// `serviceIcon`); a task's terminal and Jupyter use Lab's own icons.
import { jupyterIcon, LabIcon, terminalIcon } from '@jupyterlab/ui-components';
import { iconSvg as svg } from './iconsvg';

export const paiIcon = new LabIcon({
  name: 'pai-jupyter:jobs',
  svgstr: svg(
    '<rect x="3" y="4" width="18" height="3" rx="1"/><rect x="3" y="10.5" width="13" height="3" rx="1"/>' +
      '<rect x="3" y="17" width="8" height="3" rx="1"/>'
  )
});

const LABS_OWN: Record<string, LabIcon> = { terminal: terminalIcon, jupyter: jupyterIcon };
const known = new Map<string, LabIcon>();

/** The icon of a task service's button and tab: the catalogue's `shapes` (the server sends them with the service;
 * given once, it is known by name after), Lab's own for a terminal and Jupyter, else the jobs icon. */
export function serviceIcon(service: string, shapes = ''): LabIcon {
  if (shapes && !known.has(service)) {
    known.set(
      service,
      new LabIcon({ name: `pai-jupyter:service-${service}`, svgstr: svg(shapes) })
    );
  }
  return known.get(service) ?? LABS_OWN[service] ?? paiIcon;
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
