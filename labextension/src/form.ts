// The Lab-native submit form: the platform user guide's basic mode (one task role) and pro mode (several roles, environment,
// storage, Edit JSON), runtime plugin switches, Import and Export. Its fields, labels, order and modes come from
// the one form definition the notebook's JobForm draws too (pai/api/form). The form holds ONE document: the
// fields write it, Edit JSON shows and edits the same document (each edit fills the fields back), and Submit
// sends exactly it. The server validates (the protocol package: one source of rules) and says which field each
// problem is about; problems about no field are shown next to the status line, which says where to look.
import { Widget } from '@lumino/widgets';
import { ISignal, Signal } from '@lumino/signaling';
import { Problem, validate } from './api';
import {
  defaultRole,
  defaultValues,
  FieldSpec,
  FormSpec,
  FormValues,
  fromV1,
  needsPro,
  paramOf,
  RoleValues,
  toV1,
  Value
} from './formdoc';
import { getFormSpec, importDocument } from './formapi';
import { serviceIcon } from './icons';
import { el } from './dom';
import { selectBox } from './selectbox';

type Doc = Record<string, unknown>;
type Placed = Problem & { field?: string };
type Input = HTMLInputElement | HTMLTextAreaElement | HTMLSelectElement;

let counter = 0;

export class SubmitForm extends Widget {
  /** `open` opens a job's page: the way on from "Submitted" to the job. */
  constructor(
    initial?: Doc,
    private readonly open?: (id: string) => void
  ) {
    super();
    this.addClass('pai-Form');
    this.id = `pai-form-${++counter}`;
    this.title.label = 'New PAI job';
    this.title.closable = true;
    this.node.textContent = 'Loading the form…';
    this.ready = getFormSpec().then(
      spec => this.start(spec, initial),
      err => {
        this.node.textContent = `The form could not load: ${(err as Error).message}`;
      }
    );
  }

  /** Resolves once the form is drawn (the definition comes from the server). */
  readonly ready: Promise<void>;

  get submitted(): ISignal<this, string> {
    return this._submitted;
  }

  /** The one document: what Edit JSON shows, Export saves and Submit sends. */
  document(): Doc {
    return this.doc;
  }

  setDocument(doc: Doc): void {
    this.values = fromV1(this.spec, doc);
    this.doc = doc;
    this.pro = this.pro || needsPro(this.spec, this.values);
    this.jsonProblem = '';
    this.drawFields();
    this.showJson();
  }

  private start(spec: FormSpec, initial?: Doc): void {
    this.spec = spec;
    this.values = defaultValues(spec);
    this.doc = toV1(spec, this.values);
    this.drawFrame();
    if (initial) {
      this.setDocument(initial);
    } else {
      this.drawFields();
    }
  }

  /** The parts that stay while fields are redrawn: mode switch, buttons, the JSON editor, the status. */
  private drawFrame(): void {
    const form = el('form', 'pai-Form-body');
    form.setAttribute('aria-label', 'New PAI job');
    form.onsubmit = event => {
      event.preventDefault();
      void this.check(true);
    };
    const modes = el('div', 'pai-Row');
    const modeLabel = el('label', 'pai-Form-switch');
    this.proBox = el('input');
    this.proBox.type = 'checkbox';
    this.proBox.onchange = () => {
      this.pro = this.proBox.checked;
      if (!this.pro && this.values.roles.length > 1) {
        this.values.roles = this.values.roles.slice(0, 1);
        this.fieldsChanged();
      }
      this.drawFields();
      this.showJson();
    };
    modeLabel.append(
      this.proBox,
      document.createTextNode(' Pro mode (several task roles, environment, storage, Edit JSON)')
    );
    modes.append(modeLabel);
    this.fieldsBox = el('div', 'pai-Form-fields');
    const actions = el('div', 'pai-Row pai-Form-actions');
    this.addRoleButton = this.button('Add task role', () => {
      this.values.roles.push(defaultRole(this.spec, `role${this.values.roles.length + 1}`));
      this.fieldsChanged();
      this.drawFields();
    });
    this.jsonButton = this.button('Edit JSON', () => {
      this.jsonOpen = !this.jsonOpen;
      this.showJson();
      if (this.jsonOpen) {
        this.jsonArea.focus();
      }
    });
    const importInput = el('input');
    importInput.type = 'file';
    importInput.accept = '.json,.yaml,.yml';
    importInput.hidden = true;
    importInput.onchange = () => void this.importFile(importInput.files?.[0]);
    const check = this.button('Validate', () => void this.check(false));
    const submit = el('button', 'jp-Button jp-mod-styled jp-mod-accept pai-Form-button', 'Submit');
    submit.type = 'submit';
    actions.append(
      this.addRoleButton,
      this.jsonButton,
      this.button('Import', () => importInput.click()),
      importInput,
      this.button('Export', () => this.exportFile()),
      check,
      submit
    );
    this.jsonArea = el('textarea', 'jp-mod-styled pai-Form-json');
    this.jsonArea.setAttribute('aria-label', 'Job JSON');
    this.jsonArea.spellcheck = false;
    this.jsonArea.hidden = true;
    this.jsonArea.oninput = () => this.jsonEdited();
    this.result = el('div', 'pai-Form-result');
    this.result.setAttribute('role', 'status');
    this.result.setAttribute('aria-live', 'polite');
    this.general = el('div', 'pai-Form-general');
    this.general.setAttribute('role', 'alert');
    form.append(modes, this.fieldsBox, actions, this.jsonArea, this.result, this.general);
    this.node.replaceChildren(form);
  }

  private button(text: string, onclick: () => void): HTMLButtonElement {
    const b = el('button', 'jp-Button jp-mod-styled jp-mod-reject pai-Form-button', text);
    b.type = 'button';
    b.onclick = onclick;
    return b;
  }

  /** The fields, in the definition's order: basic settings, plugins, task roles, then pro settings. */
  private drawFields(): void {
    this.fields.clear();
    this.proBox.checked = this.pro;
    this.addRoleButton.hidden = !this.pro;
    this.jsonButton.hidden = !this.pro;
    const shown = (f: FieldSpec): boolean => this.pro || !f.pro;
    const basic = this.group('Basic settings');
    for (const f of this.spec.job.filter(f => !f.pro)) {
      basic.append(this.field(f, f.key, this.values.values));
    }
    const plugins = this.group('Runtime plugins');
    const switches = el('div', 'pai-Row pai-Form-switches');
    for (const f of this.spec.plugins.filter(f => f.kind === 'switch')) {
      switches.append(this.switch(f));
    }
    plugins.append(switches);
    for (const f of this.spec.plugins.filter(f => f.kind !== 'switch')) {
      if (this.values.values[paramOf(f)[0]] === true) {
        plugins.append(this.field(f, f.key, this.values.values)); // a parameter while its switch is on
      }
    }
    const roles = this.group('Task settings');
    this.values.roles.forEach((role, i) => roles.append(this.roleFields(role, i, shown)));
    this.fieldsBox.replaceChildren(basic, plugins, roles);
    if (this.pro) {
      const pro = this.group('Pro settings');
      for (const f of this.spec.job.filter(f => f.pro)) {
        pro.append(this.field(f, f.key, this.values.values));
      }
      this.fieldsBox.append(pro);
    }
    this.markFields(); // the last check's problems stay beside the fields drawn again
  }

  private group(title: string): HTMLElement {
    const box = el('fieldset', 'pai-Form-group');
    box.append(el('legend', 'pai-Form-legend', title));
    return box;
  }

  private roleFields(role: RoleValues, i: number, shown: (f: FieldSpec) => boolean): HTMLElement {
    const box = el('fieldset', 'pai-Form-role');
    box.append(el('legend', '', `Task role ${i + 1}`));
    for (const f of this.spec.role.filter(shown)) {
      box.append(this.field(f, `roles.${i}.${f.key}`, role.values));
    }
    if (this.pro && this.values.roles.length > 1) {
      const remove = this.button('Remove role', () => {
        this.values.roles.splice(i, 1);
        this.fieldsChanged();
        this.drawFields();
      });
      remove.setAttribute('aria-label', `Remove task role ${i + 1}`);
      box.append(remove);
    }
    return box;
  }

  private field(f: FieldSpec, key: string, values: Record<string, Value>): HTMLElement {
    const wrap = el('div', 'pai-Field');
    const id = `${this.id}-${key.replace(/\W/g, '_')}`;
    const label = el('label', 'pai-Field-label', f.label);
    label.htmlFor = id;
    const zh = el('span', 'pai-Field-zh', f.label_zh);
    zh.lang = 'zh';
    zh.setAttribute('aria-hidden', 'true');
    const input = this.input(f, String(values[f.key] ?? ''));
    input.id = id;
    input.name = key;
    if (f.help) {
      input.title = f.help;
    }
    input.oninput = () => {
      values[f.key] = input.value;
      this.fieldsChanged();
    };
    const error = el('div', 'pai-Field-error');
    error.id = `${id}-error`;
    input.setAttribute('aria-describedby', error.id);
    wrap.append(
      el('div', 'pai-Field-labels'),
      input instanceof HTMLSelectElement ? selectBox(input) : input
    );
    if (f.note) {
      const note = el('div', 'pai-Field-note', f.note);
      note.id = `${id}-note`;
      input.setAttribute('aria-describedby', `${note.id} ${error.id}`);
      wrap.append(note);
    }
    wrap.append(error);
    wrap.firstElementChild!.append(label, zh);
    this.fields.set(key, { input, error });
    return wrap;
  }

  /** The input a field's kind asks for, holding `value`: a select of a choice's options (a value they lack,
   * from a loaded document, is kept as one more: the server says if it is wrong), a text area, or an input. */
  private input(f: FieldSpec, value: string): Input {
    if (f.kind === 'choice' && f.options.length) {
      const select = el('select', 'jp-mod-styled');
      const options = f.options.includes(value) || !value ? f.options : [...f.options, value];
      select.append(...options.map(o => new Option(o, o)));
      select.value = value;
      return select;
    }
    const area = f.kind === 'area' || f.kind === 'pairs' || f.kind === 'storages';
    const input: HTMLInputElement | HTMLTextAreaElement = area
      ? el('textarea', 'jp-mod-styled')
      : el('input', 'jp-mod-styled');
    if (input instanceof HTMLInputElement) {
      input.type = f.kind === 'number' || f.kind === 'minutes' ? 'number' : 'text';
    }
    input.value = value;
    input.placeholder = f.placeholder;
    return input;
  }

  private switch(f: FieldSpec): HTMLElement {
    const wrap = el('span', 'pai-Form-switch');
    const label = el('label');
    const box = el('input');
    box.type = 'checkbox';
    box.name = f.key;
    box.checked = this.values.values[f.key] === true;
    box.onchange = () => {
      this.values.values[f.key] = box.checked;
      this.fieldsChanged();
      this.drawFields();
    };
    if (f.help) {
      label.title = f.help;
    }
    if (f.icon) {
      label.append(
        serviceIcon(f.key, f.icon).element({ tag: 'span', className: 'pai-Form-switchIcon' })
      );
    }
    label.append(box, document.createTextNode(` ${f.label}`));
    wrap.append(label);
    if (f.label_zh !== f.label) {
      const zh = el('span', 'pai-Field-zh', f.label_zh);
      zh.lang = 'zh';
      zh.setAttribute('aria-hidden', 'true');
      wrap.append(zh);
    }
    return wrap;
  }

  /** A field was edited: the document is the fields' again (and Edit JSON shows it). */
  private fieldsChanged(): void {
    this.doc = toV1(this.spec, this.values);
    this.jsonProblem = '';
    this.showJson();
  }

  private showJson(): void {
    const open = this.jsonOpen && this.pro;
    this.jsonArea.hidden = !open;
    this.jsonButton.setAttribute('aria-pressed', String(open));
    if (open && !this.jsonProblem) {
      this.jsonArea.value = JSON.stringify(this.doc, null, 2);
    }
  }

  /** The JSON was edited: it is the document now, and the fields show it. */
  private jsonEdited(): void {
    let parsed: unknown;
    try {
      parsed = JSON.parse(this.jsonArea.value);
    } catch (err) {
      this.jsonProblem = `The JSON does not parse: ${(err as Error).message}`;
      this.result.textContent = this.jsonProblem;
      return;
    }
    if (!parsed || typeof parsed !== 'object' || Array.isArray(parsed)) {
      this.jsonProblem = 'The JSON must be one object: a v1 job document.';
      this.result.textContent = this.jsonProblem;
      return;
    }
    this.jsonProblem = '';
    this.result.textContent = '';
    this.values = fromV1(this.spec, parsed as Doc);
    this.doc = parsed as Doc;
    this.pro = this.pro || needsPro(this.spec, this.values);
    this.drawFields();
  }

  /** Import: the form's v1 JSON is read here (keys without a field kept); v2 YAML or JSON is converted to v1
   * by the server, as the notebook's JobForm imports it. */
  private async importFile(file: File | undefined): Promise<void> {
    if (!file) {
      return;
    }
    const text = await file.text();
    let parsed: unknown = null;
    try {
      parsed = JSON.parse(text);
    } catch {
      parsed = null; // YAML: the server reads it
    }
    if (
      parsed &&
      typeof parsed === 'object' &&
      !Array.isArray(parsed) &&
      !('protocolVersion' in parsed)
    ) {
      this.setDocument(parsed as Doc);
      this.result.textContent = `Imported ${file.name}.`;
      return;
    }
    try {
      const answer = await importDocument(text);
      if (answer.doc) {
        this.setDocument(answer.doc);
        this.result.textContent = `Imported ${file.name}.`;
      } else {
        const why = (answer.problems || []).map(p =>
          p.path ? `${p.path}: ${p.message}` : p.message
        );
        this.result.textContent = `${file.name} was not imported: see below.`;
        this.general.textContent = why.join('\n');
      }
    } catch (err) {
      this.result.textContent = `${file.name} was not imported: ${(err as Error).message}`;
    }
  }

  private exportFile(): void {
    const blob = new Blob([JSON.stringify(this.doc, null, 2)], { type: 'application/json' });
    const a = el('a');
    a.href = URL.createObjectURL(blob);
    a.download = `${String(this.values.values.name || 'job')}.json`;
    a.click();
    URL.revokeObjectURL(a.href);
  }

  /** Ask the server; show each problem beside its field. With `submit` and no problem, submit. */
  async check(submit: boolean): Promise<Problem[]> {
    await this.ready;
    if (this.jsonProblem) {
      this.result.textContent = `Not ${submit ? 'submitted' : 'valid'}: ${this.jsonProblem}`;
      return [{ path: '', message: this.jsonProblem }];
    }
    this.result.textContent = submit ? 'Submitting…' : 'Validating…';
    let answer;
    try {
      answer = await validate(JSON.stringify(this.doc), submit);
    } catch (err) {
      this.result.textContent = `The server did not accept it: ${(err as Error).message}`;
      return [];
    }
    const refused = answer.refused === true;
    const { marked, general } = this.showProblems(answer.problems);
    if (answer.problems.length) {
      const where = [
        marked ? 'see the marked fields above' : '',
        general ? 'see below' : ''
      ].filter(Boolean);
      const what = refused
        ? 'Not submitted: the cluster refused the job'
        : `${answer.problems.length} problem(s)`;
      this.result.textContent = `${what}: ${where.join(' and ')}.`;
    } else if (answer.id) {
      const id = answer.id;
      this.result.textContent = `Submitted ${id}. `;
      if (this.open) {
        const link = el('button', 'pai-LinkButton', 'Open its job page');
        link.type = 'button';
        link.setAttribute('aria-label', `Open the job page of ${id}`);
        link.onclick = () => this.open?.(id);
        this.result.append(link);
      }
      this._submitted.emit(id);
    } else {
      this.result.textContent = 'Valid.';
    }
    return answer.problems;
  }

  /** Each problem beside its field; the rest under the status line. Returns how many went where. */
  private showProblems(problems: Placed[]): { marked: number; general: number } {
    this.problems = problems;
    return this.markFields();
  }

  private markFields(): { marked: number; general: number } {
    for (const { input, error } of this.fields.values()) {
      error.textContent = '';
      input.removeAttribute('aria-invalid');
    }
    const general: string[] = [];
    let marked = 0;
    for (const p of this.problems) {
      const field = p.field ? this.fields.get(p.field) : undefined;
      if (field) {
        field.error.textContent = field.error.textContent
          ? `${field.error.textContent}; ${p.message}`
          : p.message;
        field.input.setAttribute('aria-invalid', 'true');
        marked++;
      } else {
        general.push(p.path ? `${p.path}: ${p.message}` : p.message);
      }
    }
    this.general.textContent = general.join('\n');
    return { marked, general: general.length };
  }

  private spec!: FormSpec;
  private values!: FormValues;
  private doc: Doc = {};
  private pro = false;
  private jsonOpen = false;
  private jsonProblem = '';
  private problems: Placed[] = [];
  private proBox!: HTMLInputElement;
  private fieldsBox!: HTMLElement;
  private addRoleButton!: HTMLButtonElement;
  private jsonButton!: HTMLButtonElement;
  private general!: HTMLElement;
  private result!: HTMLElement;
  private jsonArea!: HTMLTextAreaElement;
  private readonly fields = new Map<string, { input: Input; error: HTMLElement }>();
  private readonly _submitted = new Signal<this, string>(this);
}
