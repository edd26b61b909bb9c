// Prints the fields of the server answers src/api.ts declares, as JSON: {Interface: [[path, optional], ...]},
// each interface flattened (an inline object, an array's items and another interface of api.ts are followed, so
// `tasks[].services[].url` is one path). tests/unit/test_lab_api_contract.py compares them with the Python types
// that shape those answers (pai_jupyter/server/answers.py). Usage: node scripts/apifields.mjs src/api.ts Name...
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const here = dirname(fileURLToPath(import.meta.url));
const ts = createRequire(join(here, '..', 'package.json'))('typescript');
const [file, ...names] = process.argv.slice(2);
const source = ts.createSourceFile(file, readFileSync(file, 'utf8'), ts.ScriptTarget.Latest, true);
const interfaces = new Map();
source.forEachChild(node => {
  if (ts.isInterfaceDeclaration(node)) {
    interfaces.set(node.name.text, node.members);
  }
});

function fields(members, prefix, out, seen) {
  for (const m of members) {
    if (!ts.isPropertySignature(m)) {
      continue;
    }
    const path = prefix + m.name.getText(source);
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
  } else if (ts.isTypeReferenceNode(type) && interfaces.has(type.typeName.getText(source))) {
    const name = type.typeName.getText(source);
    if (!seen.includes(name)) {
      fields(interfaces.get(name), path + '.', out, [...seen, name]);
    }
  }
}

const answer = {};
for (const name of names) {
  if (!interfaces.has(name)) {
    throw new Error(`${file} declares no interface ${name}`);
  }
  const out = [];
  fields(interfaces.get(name), '', out, [name]);
  answer[name] = out;
}
process.stdout.write(JSON.stringify(answer));
