// The job page's tools row: "Set work duration" (the job's max run time, minutes from its launch), the job's
// SSH key download (jobs with the ssh plugin) and a Desktop button per task with the desktop plugin.
// Where the cluster cannot do one (a remote OpenPAI) the row says so instead of offering it.
import { CommandRegistry } from '@lumino/commands';
import { getAccess, JobAccess, JobDetail, PaiApiError, setMaxRunTime, sshKeyUrl } from './api';
import { button, BUTTON_CLASS, el } from './dom';
import { plural } from './format';
import { CommandIDs } from './commands';

/** The minutes typed, or an error message (the server checks again). */
export function parseMinutes(text: string): number | string {
  const value = Number(text.trim());
  if (!text.trim() || !Number.isFinite(value) || value <= 0) {
    return 'Give the work duration as a number of minutes above 0.';
  }
  return value;
}

export class JobTools {
  readonly node = el('div', 'pai-Row pai-JobTools');

  constructor(
    private readonly jobId: string,
    private readonly commands: CommandRegistry
  ) {
    const label = el('label', 'pai-Check', 'Work duration (min) ');
    this.minutes.type = 'number';
    this.minutes.min = '0';
    this.minutes.step = 'any';
    this.minutes.className = 'jp-mod-styled pai-Minutes';
    this.minutes.setAttribute('aria-label', 'Work duration in minutes (max run time)');
    label.append(this.minutes);
    this.set = button(
      'Set work duration',
      'Set the max run time of this job',
      () => void this.apply()
    );
    this.status.setAttribute('role', 'status');
    this.node.append(label, this.set, this.links, this.status);
  }

  /** Redraw for the job's current detail (a finished job has no duration to set, no desktop to open). */
  async update(d: JobDetail): Promise<void> {
    this.set.disabled = d.final;
    this.minutes.disabled = d.final;
    if (this.accessFor === d.state) {
      return;
    }
    this.accessFor = d.state;
    let access: JobAccess;
    try {
      access = await getAccess(this.jobId);
    } catch (err) {
      this.links.replaceChildren(
        el('span', 'pai-Muted', `No SSH / desktop: ${(err as Error).message}`)
      );
      return;
    }
    const items: HTMLElement[] = [];
    if (access.sshKey) {
      const a = el('a', `${BUTTON_CLASS} pai-SshKey`, 'SSH key');
      a.href = sshKeyUrl(this.jobId);
      a.setAttribute('download', '');
      a.setAttribute('aria-label', `Download the SSH private key of ${this.jobId}`);
      items.push(
        a,
        button(
          'SSH…',
          `How to log in to ${this.jobId} with ssh`,
          () =>
            void this.commands.execute(CommandIDs.openService, { id: this.jobId, service: 'ssh' })
        )
      );
    }
    for (const desk of access.desktops) {
      if (d.final || desk.state === 'stopped') {
        continue;
      }
      items.push(
        button(
          `Desktop ${desk.role}[${desk.index}]`,
          `Remote desktop of ${desk.role}[${desk.index}]`,
          () =>
            void this.commands.execute(CommandIDs.openService, {
              id: this.jobId,
              role: desk.role,
              index: desk.index,
              service: 'desktop'
            })
        )
      );
    }
    if (access.message) {
      items.push(el('span', 'pai-Muted', access.message));
    }
    this.links.replaceChildren(...items);
  }

  private async apply(): Promise<void> {
    const minutes = parseMinutes(this.minutes.value);
    if (typeof minutes === 'string') {
      this.status.textContent = minutes;
      return;
    }
    try {
      await setMaxRunTime(this.jobId, minutes);
      this.status.textContent = `Work duration set to ${plural(minutes, 'minute')} from the job's start.`;
    } catch (err) {
      const e = err as PaiApiError;
      this.status.textContent =
        e.status === 501
          ? 'Setting the work duration is not available on this cluster (a remote OpenPAI).'
          : `Could not set the work duration: ${e.message}`;
    }
  }

  private readonly minutes = el('input');
  private readonly set: HTMLButtonElement;
  private readonly links = el('span', 'pai-JobTools-links');
  private readonly status = el('span', 'pai-Muted pai-JobTools-status');
  private accessFor = '';
}
