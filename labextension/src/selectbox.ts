// Lab's drop-down look for a plain select, kept apart from dom.ts so that the unit-tested modules importing
// dom.ts stay free of @jupyterlab/ui-components' runtime (it needs a browser).
import { caretDownEmptyIcon } from '@jupyterlab/ui-components';
import { el } from './dom';

/** `select` in a wrapper with JupyterLab's drop-down caret, as its own HTMLSelect draws it (a `jp-mod-styled`
 *  select has no arrow of its own). The select keeps its classes; place the wrapper where it goes. */
export function selectBox(select: HTMLSelectElement): HTMLDivElement {
  select.classList.add('jp-mod-styled');
  const box = el('div', 'jp-HTMLSelect pai-Select');
  box.append(select, caretDownEmptyIcon.element({ tag: 'span', className: 'pai-Select-caret' }));
  return box;
}
