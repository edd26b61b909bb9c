// Job files and notebooks as PAI jobs: "Submit as PAI job" on a .yaml/.yml/.json (file browser menu, and a
// toolbar button on an open job file), and "Run as PAI job" on a notebook (notebookjob.ts).
import { JupyterFrontEnd } from '@jupyterlab/application';
import { Dialog, showDialog, ToolbarButton } from '@jupyterlab/apputils';
import { DocumentRegistry, IDocumentWidget } from '@jupyterlab/docregistry';
import { IFileBrowserFactory } from '@jupyterlab/filebrowser';
import { Widget } from '@lumino/widgets';
import { Problem, validate } from '../api';
import { el } from '../dom';
import { CommandIDs } from '../commands';
import { selectedFile } from '../fileselection';
import { registerNotebookJobs } from '../notebookjob';
import { JobsPanel } from '../sidebar';
import { fail, OpenJob, submittedNotice } from './jobpages';

const isJobFile = (path: string): boolean => /\.(ya?ml|json)$/i.test(path);

/** A document's problems, one an item ("path: message"), as text. */
function problemList(problems: Problem[]): HTMLElement {
  const list = el('ul', 'pai-Problems');
  list.append(...problems.map(p => el('li', '', p.path ? `${p.path}: ${p.message}` : p.message)));
  return list;
}

export function registerFileCommands(
  app: JupyterFrontEnd,
  browsers: IFileBrowserFactory | null,
  panel: JobsPanel,
  openJob: OpenJob
): void {
  const { commands } = app;
  const selectedJobFile = (): string | null => {
    const model = selectedFile(browsers);
    return model && model.type !== 'directory' && isJobFile(model.path) ? model.path : null;
  };
  commands.addCommand(CommandIDs.submitFile, {
    label: 'Submit as PAI job',
    isVisible: args => !!(args.path || selectedJobFile()),
    execute: async args => {
      const path = String(args.path || selectedJobFile() || '');
      if (!path) {
        return;
      }
      try {
        const model = await app.serviceManager.contents.get(path, {
          content: true,
          format: 'text'
        });
        const answer = await validate(String(model.content), true);
        if (answer.problems.length) {
          await showDialog({
            title: answer.refused ? `${path} was not submitted` : `${path} is not a valid job`,
            body: new Widget({ node: problemList(answer.problems) }),
            buttons: [Dialog.okButton()]
          });
          return;
        }
        submittedNotice(String(answer.id), id => void openJob(id));
        void panel.refresh();
      } catch (err) {
        fail(`Submit ${path}`, err);
      }
    }
  });
  // a toolbar button on an open job file (saved first if it was changed, then submitted as it is on disk)
  const submitButton: DocumentRegistry.IWidgetExtension<IDocumentWidget, DocumentRegistry.IModel> =
    {
      createNew: (widget, context) => {
        if (!isJobFile(context.path)) {
          return;
        }
        const button = new ToolbarButton({
          label: 'Submit as PAI job',
          tooltip: 'Save this file and submit it as a PAI job',
          onClick: async () => {
            if (context.model.dirty) {
              await context.save(); // an unchanged file is not rewritten (a JSON viewer's save reformats it)
            }
            await commands.execute(CommandIDs.submitFile, { path: context.path });
          }
        });
        button.addClass('pai-SubmitFileButton');
        widget.toolbar.insertItem(10, 'paiSubmit', button);
        return button;
      }
    };
  for (const factory of ['Editor', 'JSON']) {
    app.docRegistry.addWidgetExtension(factory, submitButton);
  }
  registerNotebookJobs(app, browsers, openJob); // "Run as PAI job" on notebooks, their executed copy
  app.contextMenu.addItem({
    command: CommandIDs.submitFile,
    selector: '.jp-DirListing-item[data-isdir="false"]',
    rank: 10
  });
}
