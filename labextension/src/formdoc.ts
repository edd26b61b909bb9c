// The Lab submit form's document: the platform user guide's v1 JSON (the "Edit JSON" format, as the notebook's JobForm), built
// from the fields and read back into them. Which fields there are, their labels, order and modes come from the
// one form definition (pai_jupyter/protocol/formspec.py, served as pai/api/form), shared with the notebook.

export type Kind =
  'text' | 'number' | 'minutes' | 'area' | 'pairs' | 'storages' | 'ports' | 'switch' | 'choice';

export interface FieldSpec {
  key: string;
  path: string;
  label: string;
  label_zh: string;
  kind: Kind;
  default: string | number | boolean;
  pro: boolean;
  optional: boolean;
  help: string;
  placeholder: string;
  options: string[]; // a 'choice': what may be picked (the virtual clusters the user may submit to)
  note: string; // shown under the input: why a choice is a text box this time
  icon: string; // a switch's service's icon (SVG shapes, the services catalogue's); "": none
}

/** A plugin parameter field's plugin and parameter name (its path: `<plugin>.parameters.<name>`). */
export function paramOf(f: FieldSpec): [string, string] {
  const [plugin, name] = f.path.split('.parameters.');
  return [plugin, name ?? ''];
}

export interface FormSpec {
  pluginKey: string;
  job: FieldSpec[];
  plugins: FieldSpec[];
  role: FieldSpec[];
}

export type Value = string | boolean; // what an input holds (numbers as typed: the server says what is wrong)

export interface RoleValues {
  base: Record<string, unknown>; // keys of a loaded role the form has no field for, kept as they are
  values: Record<string, Value>;
}

export interface FormValues {
  base: Record<string, unknown>; // keys of a loaded document the form has no field for, kept as they are
  values: Record<string, Value>; // the job's fields and the plugin switches
  roles: RoleValues[];
}

type Doc = Record<string, unknown>;

function initial(f: FieldSpec): Value {
  return f.kind === 'switch' ? Boolean(f.default) : String(f.default ?? '');
}

export function defaultRole(spec: FormSpec, name = 'main'): RoleValues {
  const values = Object.fromEntries(spec.role.map(f => [f.key, initial(f)]));
  values.name = name;
  return { base: {}, values };
}

export function defaultValues(spec: FormSpec): FormValues {
  return {
    base: {},
    values: Object.fromEntries([...spec.job, ...spec.plugins].map(f => [f.key, initial(f)])),
    roles: [defaultRole(spec)]
  };
}

/** `KEY=value` / `name:/path` / `label:count` items, one a line or comma-separated (as the notebook form). */
export function pairs(text: string, sep: string): [string, string][] {
  const out: [string, string][] = [];
  for (const item of text.split(/[\n,]/)) {
    const t = item.trim();
    if (!t) {
      continue;
    }
    const i = t.indexOf(sep);
    out.push(i < 0 ? [t, ''] : [t.slice(0, i).trim(), t.slice(i + 1).trim()]);
  }
  return out;
}

function num(text: string): number | string {
  const n = Number(text);
  return text.trim() === '' || Number.isNaN(n) ? text : n; // not a number: sent as typed, the server says why
}

/** The document value a field's text stands for, or undefined (the key is left out). */
function toDoc(f: FieldSpec, v: Value): unknown {
  const text = String(v);
  switch (f.kind) {
    case 'number':
    case 'minutes': {
      const n = num(text);
      const unset = text.trim() === '' || (f.optional && n === Number(f.default));
      return unset ? undefined : n;
    }
    case 'pairs': {
      const items = pairs(text, '=');
      return items.length ? Object.fromEntries(items) : undefined;
    }
    case 'storages': {
      const items = pairs(text, ':').map(([name, mountPath]) => ({ name, mountPath }));
      return items.length ? items : undefined;
    }
    case 'ports': {
      const items = pairs(text, ':').map(([label, count]) => ({
        label,
        beginAt: 0,
        portNumber: num(count)
      }));
      return items.length ? items : undefined;
    }
    default:
      return text === '' && f.optional ? undefined : text;
  }
}

/** A field's text from its document value (the reverse of toDoc). */
function fromDoc(f: FieldSpec, value: unknown): Value {
  if (value === undefined || value === null) {
    return f.optional || f.kind === 'text' ? initialBlank(f) : initial(f);
  }
  switch (f.kind) {
    case 'pairs':
      return typeof value === 'object'
        ? Object.entries(value as Doc)
            .map(([k, v]) => `${k}=${v}`)
            .join('\n')
        : '';
    case 'storages':
      return Array.isArray(value)
        ? value.map(m => `${(m as Doc).name}:${(m as Doc).mountPath ?? ''}`).join('\n')
        : '';
    case 'ports':
      return Array.isArray(value)
        ? value.map(p => `${(p as Doc).label}:${(p as Doc).portNumber ?? 1}`).join(', ')
        : '';
    default:
      return typeof value === 'object' ? JSON.stringify(value) : String(value);
  }
}

function initialBlank(f: FieldSpec): Value {
  return f.kind === 'number' || f.kind === 'minutes' ? initial(f) : '';
}

function get(doc: Doc, path: string): unknown {
  const [head, rest] = splitPath(path);
  if (rest === undefined) {
    return doc[head];
  }
  const extras = doc[head];
  return extras && typeof extras === 'object' ? (extras as Doc)[rest] : undefined;
}

function splitPath(path: string): [string, string | undefined] {
  return path.startsWith('extras.') ? ['extras', path.slice('extras.'.length)] : [path, undefined];
}

function pluginsOf(doc: Doc, key: string): Doc[] {
  const extras = doc.extras as Doc | undefined;
  const list = extras && Array.isArray(extras[key]) ? (extras[key] as unknown[]) : [];
  return list.filter((p): p is Doc => !!p && typeof p === 'object');
}

/** The v1 document the fields say (what Edit JSON shows, Export saves and Submit sends). */
export function toV1(spec: FormSpec, v: FormValues): Doc {
  const doc: Doc = { ...v.base };
  const extras: Doc = { ...((v.base.extras as Doc) || {}) };
  for (const f of spec.job) {
    const [head, rest] = splitPath(f.path);
    const value = toDoc(f, v.values[f.key]);
    const target = rest === undefined ? doc : extras;
    const key = rest === undefined ? head : rest;
    if (value === undefined) {
      delete target[key];
    } else {
      target[key] = value;
    }
  }
  const switches = spec.plugins.filter(f => f.kind === 'switch').map(f => f.key);
  const old = pluginsOf(v.base, spec.pluginKey);
  const plugins = old.filter(p => !switches.includes(String(p.plugin)));
  for (const name of switches.filter(n => v.values[n] === true)) {
    const entry: Doc = { ...(old.find(p => p.plugin === name) || {}), plugin: name };
    const edited = spec.plugins.filter(f => f.kind !== 'switch' && paramOf(f)[0] === name);
    if (edited.length) {
      // the parameters the form edits; the others kept as loaded
      const params = { ...((entry.parameters as Doc) || {}) };
      for (const f of edited) {
        const key = paramOf(f)[1];
        delete params[key];
        const value = String(v.values[f.key] ?? '').trim();
        if (value) {
          params[key] = value;
        }
      }
      if (Object.keys(params).length) {
        entry.parameters = params;
      } else {
        delete entry.parameters;
      }
    }
    plugins.push(entry);
  }
  if (plugins.length) {
    extras[spec.pluginKey] = plugins;
  } else {
    delete extras[spec.pluginKey];
  }
  if (Object.keys(extras).length) {
    doc.extras = extras;
  } else {
    delete doc.extras;
  }
  doc.taskRoles = v.roles.map(role => {
    const out: Doc = { ...role.base };
    for (const f of spec.role) {
      const value = toDoc(f, role.values[f.key]);
      if (value === undefined) {
        delete out[f.path];
      } else {
        out[f.path] = value;
      }
    }
    return out;
  });
  return doc;
}

/** Form values from a v1 document (Edit JSON, Import, Clone to form); keys without a field are kept in `base`. */
export function fromV1(spec: FormSpec, doc: Doc): FormValues {
  const base: Doc = { ...doc };
  delete base.taskRoles;
  const values: Record<string, Value> = {};
  for (const f of spec.job) {
    values[f.key] = fromDoc(f, get(doc, f.path));
    const [head, rest] = splitPath(f.path);
    if (rest === undefined) {
      delete base[head];
    }
  }
  const plugins = pluginsOf(doc, spec.pluginKey);
  for (const f of spec.plugins) {
    if (f.kind === 'switch') {
      values[f.key] = plugins.some(p => p.plugin === f.key);
    } else {
      const [plugin, key] = paramOf(f);
      const value = ((plugins.find(p => p.plugin === plugin)?.parameters as Doc) || {})[key];
      values[f.key] = typeof value === 'string' ? value : '';
    }
  }
  const roles = Array.isArray(doc.taskRoles) ? (doc.taskRoles as Doc[]) : [];
  return {
    base,
    values,
    roles: roles.length
      ? roles.map(r => {
          const role = r && typeof r === 'object' ? r : {};
          const roleBase = { ...role };
          const roleValues: Record<string, Value> = {};
          for (const f of spec.role) {
            roleValues[f.key] = fromDoc(f, role[f.path]);
            delete roleBase[f.path];
          }
          return { base: roleBase, values: roleValues };
        })
      : [defaultRole(spec)]
  };
}

/** Whether a document needs pro mode to be shown whole (several roles, or a pro field not at its default). */
export function needsPro(spec: FormSpec, v: FormValues): boolean {
  const changed = (f: FieldSpec, value: Value | undefined): boolean =>
    f.pro && value !== undefined && String(value) !== String(initialBlank(f));
  return (
    v.roles.length > 1 ||
    spec.job.some(f => changed(f, v.values[f.key])) ||
    v.roles.some(r => spec.role.some(f => changed(f, r.values[f.key])))
  );
}
