// Job status notifications in the Lab. From the job list the sidebar already polls (no poll of its own): a job
// that asked for them (extras.jobStatusChangeNotification, `%%pai_submit --notify`) is told of the changes it
// named, in OpenPAI's words, for the user's own jobs; any other job seen live in this session is told of its end.
// The first list, and the first after a profile switch, is a baseline: what it shows happened before.
// Which changes a job asked for is read once per job (pai/api/jobs/{job}/notification), when a change of it is
// first seen. The pure part is notifyrules.ts.
import { Notification } from '@jupyterlab/apputils';
import { getJob, JobList, JobNotification, jobPath, request } from './api';
import { advance, Baseline, JobChange, notice, preemptedNotice } from './notifyrules';

/** Feeds on each new job list (the sidebar's `changed`) and shows the notices. */
export class JobNotifier {
  constructor(private readonly open: (id: string) => void) {}

  update(list: JobList): void {
    const { changes, after } = advance(this.last, list);
    this.last = after;
    for (const c of changes) {
      void this.tell(c, c.job.username === list.user);
    }
  }

  private async tell(c: JobChange, own: boolean): Promise<void> {
    if (c.change === 'PREEMPTED') {
      return own ? this.preempted(c) : undefined;
    }
    const asked = own ? await this.asked(c.job.id) : null;
    const text = notice(c, asked, own);
    if (!text) {
      return;
    }
    const say =
      c.change === 'SUCCEEDED'
        ? Notification.success
        : c.change === 'FAILED' || c.change === 'STOPPED'
          ? Notification.warning
          : Notification.info;
    say(text, {
      autoClose: 10000,
      actions: [{ label: 'Open', callback: () => this.open(c.job.id) }]
    });
  }

  /** A job of the user's being preempted: who, why, its signal and grace (the job's diagnostics), shown until
   *  dismissed (the grace may be long; a kernel or a Hub server's owner must not miss it). */
  private async preempted(c: JobChange): Promise<void> {
    const diagnostics = await getJob(c.job.id)
      .then(d => d.diagnostics)
      .catch(() => null);
    Notification.warning(preemptedNotice(c.job.name, diagnostics, c.job.state === 'WAITING'), {
      autoClose: false,
      actions: [{ label: 'Open', callback: () => this.open(c.job.id) }]
    });
  }

  private asked(id: string): Promise<Set<string> | null> {
    let found = this.wanted.get(id);
    if (!found) {
      found = request<JobNotification>(`api/jobs/${jobPath(id)}/notification`)
        .then(answer => new Set(answer.states))
        .catch(() => null);
      this.wanted.set(id, found);
    }
    return found;
  }

  private last: Baseline | null = null;
  private wanted = new Map<string, Promise<Set<string> | null>>();
}
