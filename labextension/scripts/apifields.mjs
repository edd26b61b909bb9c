// Prints the server answers the modules of src/ given declare, as JSON: {"declared": {file: [its interfaces]},
// "fields": {Interface: [[path, optional], ...]}} for the interfaces named, each flattened (an inline object, an
// array's items, a Record's values (`name{}`), an interface it extends and another interface of the modules are
// followed, so `tasks[].services[].url` is one path). tests/unit/test_lab_api_contract.py compares them with the
// Python types that shape those answers (pai_jupyter/server/answers.py).
// Usage: node scripts/apifields.mjs src/api.ts src/sweepsapi.ts ... [Name...]
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const here = dirname(fileURLToPath(import.meta.url));
const ts = createRequire(join(here, '..', 'package.json'))('typescript');
const args = process.argv.slice(2);
const files = args.filter(a => a.endsWith('.ts'));
const names = args.filter(a => !a.endsWith('.ts'));
const interfaces = new Map(); // name -> its declaration (one name, one interface, in all the modules)
const declared = {};
for (const file of files) {
  const source = ts.createSourceFile(file, readFileSync(file, 'utf8'), ts.ScriptTarget.Latest, true);
  declared[file] = [];
  source.forEachChild(node => {
    if (ts.isInterfaceDeclaration(node)) {
      if (interfaces.has(node.name.text)) {
        throw new Error(`${file}: interface ${node.name.text} is declared twice`);
      }
      interfaces.set(node.name.text, node);
      declared[file].push(node.name.text);
    }
  });
}
const text = node => node.getText(node.getSourceFile());

function members(name, seen) {
  const node = interfaces.get(name);
  const inherited = (node.heritageClauses || []).flatMap(clause =>
    clause.types.flatMap(t => {
      const base = text(t.expression);
      if (!interfaces.has(base)) {
        throw new Error(`${name} extends ${base}, which no module given declares`);
      }
      return seen.includes(base) ? [] : members(base, [...seen, base]);
    })
  );
  return [...inherited, ...node.members];
}

function fields(list, prefix, out, seen) {
  for (const m of list) {
    if (!ts.isPropertySignature(m)) {
      continue;
    }
    const path = prefix + text(m.name);
    out.push([path, Boolean(m.questionToken)]);
    follow(m.type, path, out, seen);
  }
}

function follow(type, path, out, seen) {
  if (!type) {
    return;
  }
  if (ts.isTypeLiteralNode(type)) {
    fields(type.members, path + '.', out, seen);
  } else if (ts.isArrayTypeNode(type)) {
    follow(type.elementType, path + '[]', out, seen);
  } else if (ts.isUnionTypeNode(type) || ts.isParenthesizedTypeNode(type)) {
    (type.types || [type.type]).forEach(t => follow(t, path, out, seen));
  } else if (ts.isTypeReferenceNode(type) && text(type.typeName) === 'Record') {
    follow(type.typeArguments?.[1], path + '{}', out, seen);
  } else if (ts.isTypeReferenceNode(type) && interfaces.has(text(type.typeName))) {
    const name = text(type.typeName);
    if (!seen.includes(name)) {
      fields(members(name, [...seen, name]), path + '.', out, [...seen, name]);
    }
  }
}

const answer = { declared, fields: {} };
for (const name of names) {
  if (!interfaces.has(name)) {
    throw new Error(`no module given declares an interface ${name}`);
  }
  const out = [];
  fields(members(name, [name]), '', out, [name]);
  answer.fields[name] = out;
}
process.stdout.write(JSON.stringify(answer));
