// "SSH…": a dialog with the exact commands to log in to a job's tasks — `ssh -i KEY -p PORT USER@HOST` (the job
// key saved beside this Lab's server, host key pinned: it works as shown in the Lab's own terminal) and the
// shorter `pai ssh JOB --role R --index I` — each with a Copy button, plus host, port and user.
import { Clipboard, Dialog, showDialog } from '@jupyterlab/apputils';
import { Widget } from '@lumino/widgets';
import { getSsh, SshTask } from './api';
import { button, el } from './dom';

function commandLine(label: string, text: string): HTMLElement {
  const row = el('div', 'pai-Ssh-command');
  const code = el('code', 'pai-Ssh-text', text);
  code.setAttribute('aria-label', label);
  const copy = button('Copy', `Copy: ${label}`, () => {
    Clipboard.copyToSystem(text);
    copy.textContent = 'Copied';
  });
  row.append(el('span', 'pai-Ssh-label', label), code, copy);
  return row;
}

/** The dialog's body for these tasks (pure DOM, so it can be checked without a dialog). */
export function sshBody(tasks: SshTask[], message: string | null): HTMLElement {
  const body = el('div', 'pai-Ssh');
  if (message) {
    body.append(el('p', 'pai-Muted', message));
  }
  for (const t of tasks) {
    const part = el('section', 'pai-Ssh-task');
    part.dataset.task = `${t.role}[${t.index}]`;
    part.append(el('h4', '', `${t.role}[${t.index}] · ${t.state}`));
    if (t.host && t.port) {
      part.append(el('div', 'pai-Muted', `host ${t.host} · port ${t.port} · user ${t.user}`));
    }
    if (t.problem) {
      part.append(el('div', 'pai-Error', t.problem));
    }
    if (t.ssh) {
      part.append(commandLine('ssh', t.ssh));
    } else {
      part.append(
        el('div', 'pai-Muted', 'No ssh address yet (the task has not started its sshd).')
      );
    }
    part.append(commandLine('pai ssh', t.pai));
    body.append(part);
  }
  if (!tasks.length && !message) {
    body.append(el('p', 'pai-Muted', 'No task of this job runs an sshd.'));
  }
  return body;
}

/** Ask the server and show the dialog (only `role`/`index` when given). */
export async function showSsh(id: string, role?: string, index?: number): Promise<void> {
  let body: HTMLElement;
  try {
    const answer = await getSsh(id);
    const tasks = answer.tasks.filter(
      t => (role === undefined || t.role === role) && (index === undefined || t.index === index)
    );
    body = sshBody(tasks, answer.message);
  } catch (err) {
    body = el('p', 'pai-Error', `Could not get the ssh details: ${(err as Error).message}`);
  }
  const widget = new Widget({ node: body });
  await showDialog({
    title: `SSH to ${id.split('~').slice(1).join('~')}`,
    body: widget,
    buttons: [Dialog.okButton({ label: 'Close' })]
  });
}
