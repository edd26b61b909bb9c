// The Lab-native submit form: seed 001's basic mode (one task role) and pro mode (several roles, env, Edit
// JSON), Import and Export. The server validates (the protocol package: one source of rules) and each
// problem is shown beside its field.
import { Widget } from '@lumino/widgets';
import { ISignal, Signal } from '@lumino/signaling';
import { Problem, validate } from './api';
import { defaultRole, fieldOf, FormValues, fromV1, RoleValues, toV1 } from './formdoc';
import { el } from './dom';

let counter = 0;

export class SubmitForm extends Widget {
  constructor(initial?: Record<string, unknown>) {
    super();
    this.addClass('pai-Form');
    this.id = `pai-form-${++counter}`;
    this.title.label = 'New PAI job';
    this.title.closable = true;
    this.values = initial
      ? fromV1(initial)
      : {
          maxRunTimeMinutes: '',
          jobName: 'my-job',
          image: 'python:3.11',
          virtualCluster: 'default',
          retryCount: 0,
          jobEnvs: '',
          roles: [defaultRole()]
        };
    this.draw();
  }

  get submitted(): ISignal<this, string> {
    return this._submitted;
  }

  /** The document the fields say (what Export saves and Submit sends). */
  document(): Record<string, unknown> {
    return toV1(this.values);
  }

  setDocument(doc: Record<string, unknown>): void {
    this.values = fromV1(doc);
    this.pro = this.pro || this.values.roles.length > 1;
    this.draw();
  }

  private draw(): void {
    this.fields.clear();
    const form = el('form', 'pai-Form-body');
    form.setAttribute('aria-label', 'New PAI job');
    form.onsubmit = event => {
      event.preventDefault();
      void this.check(true);
    };
    const modes = el('div', 'pai-Row');
    const modeLabel = el('label', 'pai-Check');
    const pro = el('input');
    pro.type = 'checkbox';
    pro.checked = this.pro;
    pro.onchange = () => {
      this.pro = pro.checked;
      if (!this.pro) {
        this.values.roles = this.values.roles.slice(0, 1);
      }
      this.draw();
    };
    modeLabel.append(
      pro,
      document.createTextNode(' Pro mode (several task roles, environment, Edit JSON)')
    );
    modes.append(modeLabel);
    this.general = el('div', 'pai-Form-general');
    this.general.setAttribute('role', 'alert');
    form.append(modes, this.general);
    form.append(
      this.input('jobName', 'Job name', this.values.jobName, v => (this.values.jobName = v)),
      this.input('image', 'Image', this.values.image, v => (this.values.image = v)),
      this.input(
        'virtualCluster',
        'Virtual cluster',
        this.values.virtualCluster,
        v => (this.values.virtualCluster = v)
      ),
      this.input(
        'retryCount',
        'Retry count',
        String(this.values.retryCount),
        v => (this.values.retryCount = Number(v)),
        'number'
      ),
      this.input(
        'maxRunTimeMinutes',
        'Max run time (minutes, empty: none)',
        this.values.maxRunTimeMinutes,
        v => (this.values.maxRunTimeMinutes = v),
        'number'
      )
    );
    if (this.pro) {
      form.append(
        this.input(
          'jobEnvs',
          'Environment (KEY=value lines)',
          this.values.jobEnvs,
          v => (this.values.jobEnvs = v),
          'area'
        )
      );
    }
    this.values.roles.forEach((role, i) => form.append(this.roleFields(role, i)));
    const actions = el('div', 'pai-Row pai-Form-actions');
    if (this.pro) {
      const add = el('button', 'jp-Button pai-Button', 'Add task role');
      add.type = 'button';
      add.onclick = () => {
        this.values.roles.push(defaultRole(`role${this.values.roles.length + 1}`));
        this.draw();
      };
      const json = el('button', 'jp-Button pai-Button', 'Edit JSON');
      json.type = 'button';
      json.onclick = () => this.editJson();
      actions.append(add, json);
    }
    const importInput = el('input');
    importInput.type = 'file';
    importInput.accept = '.json,.yaml,.yml';
    importInput.hidden = true;
    importInput.onchange = () => void this.importFile(importInput.files?.[0]);
    const importButton = el('button', 'jp-Button pai-Button', 'Import');
    importButton.type = 'button';
    importButton.onclick = () => importInput.click();
    const exportButton = el('button', 'jp-Button pai-Button', 'Export');
    exportButton.type = 'button';
    exportButton.onclick = () => this.exportFile();
    const check = el('button', 'jp-Button pai-Button', 'Validate');
    check.type = 'button';
    check.onclick = () => void this.check(false);
    const submit = el('button', 'jp-Button pai-Button jp-mod-accept', 'Submit');
    submit.type = 'submit';
    actions.append(importButton, importInput, exportButton, check, submit);
    this.result = el('div', 'pai-Form-result');
    this.result.setAttribute('role', 'status');
    this.result.setAttribute('aria-live', 'polite');
    this.jsonArea = el('textarea', 'pai-Form-json');
    this.jsonArea.hidden = true;
    this.jsonArea.setAttribute('aria-label', 'Job JSON');
    form.append(actions, this.jsonArea, this.result);
    this.node.replaceChildren(form);
  }

  private roleFields(role: RoleValues, i: number): HTMLElement {
    const box = el('fieldset', 'pai-Form-role');
    const legend = el('legend', '', this.pro ? `Task role ${i + 1}` : 'Task');
    box.append(legend);
    const key = (f: string): string => `roles.${i}.${f}`;
    if (this.pro) {
      box.append(this.input(key('name'), 'Role name', role.name, v => (role.name = v)));
    }
    box.append(
      this.input(
        key('taskNumber'),
        'Instances',
        String(role.taskNumber),
        v => (role.taskNumber = Number(v)),
        'number'
      ),
      this.input(
        key('cpuNumber'),
        'CPUs',
        String(role.cpuNumber),
        v => (role.cpuNumber = Number(v)),
        'number'
      ),
      this.input(
        key('memoryMB'),
        'Memory (MB)',
        String(role.memoryMB),
        v => (role.memoryMB = Number(v)),
        'number'
      ),
      this.input(
        key('gpuNumber'),
        'GPUs',
        String(role.gpuNumber),
        v => (role.gpuNumber = Number(v)),
        'number'
      ),
      this.input(key('command'), 'Command', role.command, v => (role.command = v), 'area')
    );
    if (this.pro && this.values.roles.length > 1) {
      const remove = el('button', 'jp-Button pai-Button', 'Remove role');
      remove.type = 'button';
      remove.setAttribute('aria-label', `Remove task role ${i + 1}`);
      remove.onclick = () => {
        this.values.roles.splice(i, 1);
        this.draw();
      };
      box.append(remove);
    }
    return box;
  }

  private input(
    key: string,
    label: string,
    value: string,
    set: (v: string) => void,
    kind = 'text'
  ): HTMLElement {
    const wrap = el('div', 'pai-Field');
    const id = `${this.id}-${key.replace(/\W/g, '_')}`;
    const lab = el('label', 'pai-Field-label', label);
    lab.htmlFor = id;
    const input = kind === 'area' ? el('textarea', 'jp-mod-styled') : el('input', 'jp-mod-styled');
    if (input instanceof HTMLInputElement) {
      input.type = kind === 'number' ? 'number' : 'text';
    }
    input.id = id;
    input.name = key;
    input.value = value;
    input.oninput = () => set(input.value);
    const error = el('div', 'pai-Field-error');
    error.id = `${id}-error`;
    input.setAttribute('aria-describedby', error.id);
    wrap.append(lab, input, error);
    this.fields.set(key, { input, error });
    return wrap;
  }

  private editJson(): void {
    if (this.jsonArea.hidden) {
      this.jsonArea.value = JSON.stringify(this.document(), null, 2);
      this.jsonArea.hidden = false;
      this.jsonArea.focus();
      return;
    }
    try {
      this.setDocument(JSON.parse(this.jsonArea.value));
    } catch (err) {
      this.general.textContent = `The JSON does not parse: ${(err as Error).message}`;
    }
  }

  private async importFile(file: File | undefined): Promise<void> {
    if (!file) {
      return;
    }
    const text = await file.text();
    try {
      this.setDocument(JSON.parse(text));
    } catch {
      this.general.textContent =
        'Import reads the form\'s JSON (v1, as Export writes it); submit YAML files with "Submit as PAI job" in the file browser.';
    }
  }

  private exportFile(): void {
    const blob = new Blob([JSON.stringify(this.document(), null, 2)], { type: 'application/json' });
    const a = el('a');
    a.href = URL.createObjectURL(blob);
    a.download = `${this.values.jobName || 'job'}.json`;
    a.click();
    URL.revokeObjectURL(a.href);
  }

  /** Ask the server; show each problem beside its field. With `submit` and no problem, submit. */
  async check(submit: boolean): Promise<Problem[]> {
    this.result.textContent = submit ? 'Submitting…' : 'Validating…';
    let answer;
    try {
      answer = await validate(JSON.stringify(this.document()), submit);
    } catch (err) {
      this.result.textContent = `The server did not accept it: ${(err as Error).message}`;
      return [];
    }
    this.showProblems(answer.problems);
    if (answer.problems.length) {
      this.result.textContent = `${answer.problems.length} problem(s): see the fields marked below.`;
    } else if (answer.id) {
      this.result.textContent = `Submitted ${answer.id}.`;
      this._submitted.emit(answer.id);
    } else {
      this.result.textContent = 'Valid.';
    }
    return answer.problems;
  }

  private showProblems(problems: Problem[]): void {
    for (const { input, error } of this.fields.values()) {
      error.textContent = '';
      input.removeAttribute('aria-invalid');
    }
    const general: string[] = [];
    for (const p of problems) {
      const field = this.fields.get(fieldOf(p.path));
      if (field) {
        field.error.textContent = field.error.textContent
          ? `${field.error.textContent}; ${p.message}`
          : p.message;
        field.input.setAttribute('aria-invalid', 'true');
      } else {
        general.push(p.path ? `${p.path}: ${p.message}` : p.message);
      }
    }
    this.general.textContent = general.join('\n');
  }

  private values: FormValues;
  private pro = false;
  private general!: HTMLElement;
  private result!: HTMLElement;
  private jsonArea!: HTMLTextAreaElement;
  private readonly fields = new Map<
    string,
    { input: HTMLInputElement | HTMLTextAreaElement; error: HTMLElement }
  >();
  private readonly _submitted = new Signal<this, string>(this);
}
