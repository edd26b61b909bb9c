// The submit form in the main area: "New PAI job" (empty, or filled from a job: "Clone to form"), in the palette
// and the launcher.
import { JupyterFrontEnd } from '@jupyterlab/application';
import { ICommandPalette, MainAreaWidget } from '@jupyterlab/apputils';
import { ILauncher } from '@jupyterlab/launcher';
import { getConfig } from '../api';
import { CommandIDs } from '../commands';
import { SubmitForm } from '../form';
import { paiIcon } from '../icons';
import { JobsPanel } from '../sidebar';
import { fail, submittedNotice } from './jobpages';

export function registerForm(
  app: JupyterFrontEnd,
  panel: JobsPanel,
  palette: ICommandPalette | null,
  launcher: ILauncher | null
): void {
  const { commands, shell } = app;
  const openJob = (id: string): void => void commands.execute(CommandIDs.openJob, { id });
  const openForm = (doc?: Record<string, unknown>): void => {
    const form = new SubmitForm(doc, openJob); // several roles open in pro mode, each role by its name
    const main = new MainAreaWidget({ content: form });
    main.id = form.id;
    main.title.label = 'New PAI job';
    main.title.icon = paiIcon;
    main.title.closable = true;
    form.submitted.connect((_, id) => {
      submittedNotice(id, openJob);
      void panel.refresh();
    });
    shell.add(main, 'main');
    shell.activateById(main.id);
  };
  commands.addCommand(CommandIDs.newJob, {
    label: args => (args.from ? 'Clone to form' : 'New PAI job'),
    caption: 'Fill in and submit a PAI job',
    icon: args => (args.isPalette ? undefined : paiIcon),
    execute: async args => {
      if (!args.from) {
        openForm();
        return;
      }
      try {
        const { text } = await getConfig(String(args.from), 'v1'); // v2 jobs converted by the server
        const doc = JSON.parse(text);
        doc.jobName = `${doc.jobName ?? 'job'}-copy`;
        openForm(doc);
      } catch (err) {
        fail('Clone to form', err);
      }
    }
  });
  palette?.addItem({ command: CommandIDs.newJob, category: 'PAI' });
  launcher?.add({ command: CommandIDs.newJob, category: 'Other', rank: 1 });
}
