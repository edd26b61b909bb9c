// The row and job-page actions that ask first, in JupyterLab's own dialogs: Stop (a confirmation) and Clone
// (the new job's name, a free one proposed; the copy is submitted under the name given, or not at all).
import { Dialog, showDialog } from '@jupyterlab/apputils';
import { Widget } from '@lumino/widgets';
import { el } from './dom';

/** Stop `id`? A cancel-first dialog with a warning "Stop" button. */
export async function confirmStop(id: string): Promise<boolean> {
  const answer = await showDialog({
    title: 'Stop job',
    body: `Stop ${id}? Its tasks are ended and it cannot be resumed (Clone starts it anew).`,
    buttons: [Dialog.cancelButton(), Dialog.warnButton({ label: 'Stop' })]
  });
  return answer.button.accept;
}

class NameBody extends Widget implements Dialog.IBodyWidget<string> {
  constructor(value: string) {
    super();
    const label = el('label', 'pai-Check', 'Name of the copy ');
    this.input.className = 'jp-mod-styled';
    this.input.value = value;
    this.input.setAttribute('aria-label', 'Name of the copy');
    label.append(this.input);
    this.node.append(label);
  }

  getValue(): string {
    return this.input.value.trim();
  }

  protected onAfterAttach(): void {
    this.input.focus();
    this.input.select();
  }

  private readonly input = el('input');
}

/** The copy's name, or null when the user cancels. */
export async function askCloneName(id: string, proposed: string): Promise<string | null> {
  const answer = await showDialog({
    title: `Clone ${id}`,
    body: new NameBody(proposed),
    focusNodeSelector: 'input',
    buttons: [Dialog.cancelButton(), Dialog.okButton({ label: 'Clone' })]
  });
  return answer.button.accept && answer.value ? answer.value : null;
}
