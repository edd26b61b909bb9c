// The SVG of a pai_jupyter icon from its shapes (24x24 box): the `jp-icon3` class lets Lab's light and dark themes
// recolour it. A service's shapes come from the services catalogue (pai_jupyter/common/services.py), sent with the
// form's definition, a task's services and the job page.
export const iconSvg = (shapes: string): string =>
  `<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 24 24"><g class="jp-icon3" fill="#616161">${shapes}</g></svg>`;
