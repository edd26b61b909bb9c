// The file browser's first selected item, as the commands on files ("Submit as PAI job", "Run as PAI job") see it.
import { IFileBrowserFactory } from '@jupyterlab/filebrowser';

export interface SelectedFile {
  path: string;
  type: string;
}

/** The current file browser's first selected item (Lab 4 yields models; older builds wrap them in `value`). */
export function selectedFile(browsers: IFileBrowserFactory | null): SelectedFile | null {
  const item = browsers?.tracker.currentWidget?.selectedItems().next();
  const model =
    item && 'value' in item
      ? (item as { value?: SelectedFile }).value
      : (item as SelectedFile | undefined);
  return model ?? null;
}
