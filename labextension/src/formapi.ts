// The form's definition from the server extension (pai/api/form): the one list of fields, labels, order and
// modes the notebook's JobForm draws too (pai_jupyter/protocol/formspec.py), with the virtual clusters the user
// may submit to, asked afresh for each new form (a virtual cluster added since, or a cluster back up, shows).
import { URLExt } from '@jupyterlab/coreutils';
import { ServerConnection } from '@jupyterlab/services';
import { PlacedProblem } from './api';
import { FormSpec } from './formdoc';

/** A job file as the form's v1 JSON, or the problems saying why not. */
export interface FormImport {
  doc?: Record<string, unknown>;
  problems?: PlacedProblem[];
}

export async function getFormSpec(): Promise<FormSpec> {
  const settings = ServerConnection.makeSettings();
  const url = URLExt.join(settings.baseUrl, 'pai', 'api', 'form');
  const response = await ServerConnection.makeRequest(url, {}, settings);
  if (!response.ok) {
    throw new Error(`the form definition did not load (${response.status})`);
  }
  return (await response.json()) as FormSpec;
}

/** A job file (v1 JSON or v2 YAML/JSON) as the form's v1 JSON, converted by the server as JobForm does. */
export async function importDocument(text: string): Promise<FormImport> {
  const settings = ServerConnection.makeSettings();
  const url = URLExt.join(settings.baseUrl, 'pai', 'api', 'form', 'import');
  const response = await ServerConnection.makeRequest(
    url,
    { method: 'POST', body: JSON.stringify({ text }) },
    settings
  );
  const body = await response.json().catch(() => ({}));
  if (!response.ok) {
    throw new Error(body.message || response.statusText);
  }
  return body;
}
