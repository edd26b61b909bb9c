// Small DOM helpers shared by the job page and its parts (no framework: the page is plain DOM).
import type { LabIcon } from '@jupyterlab/ui-components';
export function el<K extends keyof HTMLElementTagNameMap>(
  tag: K,
  cls = '',
  text = ''
): HTMLElementTagNameMap[K] {
  const node = document.createElement(tag);
  if (cls) {
    node.className = cls;
  }
  if (text) {
    node.textContent = text;
  }
  return node;
}

/** The classes of a secondary action drawn as JupyterLab's dialog and form buttons are, at toolbar height;
 *  also for a download link (`a`) that should look like its neighbouring buttons. */
export const BUTTON_CLASS = 'jp-Button jp-mod-styled jp-mod-reject jp-mod-small pai-Button';

export function button(text: string, label: string, onclick: () => void): HTMLButtonElement {
  const b = el('button', BUTTON_CLASS, text);
  b.type = 'button';
  b.setAttribute('aria-label', label);
  b.onclick = onclick;
  return b;
}

export function section(title: string, cls: string): { node: HTMLElement; body: HTMLElement } {
  const node = el('section', `pai-Section ${cls}`);
  const h = el('h3', 'pai-Section-title', title);
  const id = `pai-h-${Math.random().toString(36).slice(2)}`;
  h.id = id;
  node.setAttribute('aria-labelledby', id);
  const body = el('div', 'pai-Section-body');
  node.append(h, body);
  return { node, body };
}

/** A button drawn as JupyterLab's own toolbar buttons are (icon and label), for a `jp-Toolbar` row. */
export function toolButton(
  text: string,
  label: string,
  icon: LabIcon,
  onclick: () => void
): HTMLButtonElement {
  const b = el('button', 'jp-ToolbarButtonComponent jp-Button jp-mod-minimal pai-ToolButton');
  b.type = 'button';
  b.title = label;
  b.setAttribute('aria-label', label);
  b.append(
    icon.element({ tag: 'span', className: 'jp-ToolbarButtonComponent-icon' }),
    el('span', 'jp-ToolbarButtonComponent-label', text)
  );
  b.onclick = onclick;
  return b;
}
