// Prints the server answers the modules of src/ given declare, as JSON: {"declared": {file: [its interfaces]},
// "fields": {Interface: [[path, optional, kinds], ...]}} for the interfaces named, each flattened (an inline object,
// an array's items (`name[]`), a Record's values (`name{}`), an interface it extends and another interface of the
// modules are followed, so `tasks[].services[].url` is one path). `kinds` is what JSON the path holds, sorted:
// "string", "number", "boolean", "null", "object", "array", "unknown" (so `string | null` is ["null", "string"]).
// tests/unit/test_lab_api_contract.py compares them with the Python types that shape those answers
// (pai_jupyter/server/answers.py).
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
  const source = ts.createSourceFile(
    file,
    readFileSync(file, 'utf8'),
    ts.ScriptTarget.Latest,
    true
  );
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

/** The JSON a type holds, as the sorted names above; a name no module declares is itself (so it never matches). */
function kinds(type) {
  const found = new Set();
  const add = t => {
    if (!t) {
      found.add('unknown');
    } else if (ts.isParenthesizedTypeNode(t)) {
      add(t.type);
    } else if (ts.isUnionTypeNode(t)) {
      t.types.forEach(add);
    } else if (ts.isTypeLiteralNode(t)) {
      found.add('object');
    } else if (ts.isArrayTypeNode(t)) {
      found.add('array');
    } else if (ts.isLiteralTypeNode(t)) {
      const l = t.literal;
      found.add(
        l.kind === ts.SyntaxKind.NullKeyword
          ? 'null'
          : ts.isStringLiteral(l)
            ? 'string'
            : ts.isNumericLiteral(l)
              ? 'number'
              : 'boolean'
      );
    } else if (t.kind === ts.SyntaxKind.StringKeyword) {
      found.add('string');
    } else if (t.kind === ts.SyntaxKind.NumberKeyword) {
      found.add('number');
    } else if (t.kind === ts.SyntaxKind.BooleanKeyword) {
      found.add('boolean');
    } else if (t.kind === ts.SyntaxKind.UnknownKeyword || t.kind === ts.SyntaxKind.AnyKeyword) {
      found.add('unknown');
    } else if (ts.isTypeReferenceNode(t) && text(t.typeName) === 'Record') {
      found.add('object');
    } else if (ts.isTypeReferenceNode(t) && interfaces.has(text(t.typeName))) {
      found.add('object');
    } else {
      found.add(text(t));
    }
  };
  add(type);
  return [...found].sort();
}

function fields(list, prefix, out, seen) {
  for (const m of list) {
    if (!ts.isPropertySignature(m)) {
      continue;
    }
    const path = prefix + text(m.name);
    out.push([path, Boolean(m.questionToken), kinds(m.type)]);
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
    out.push([path + '[]', false, kinds(type.elementType)]);
    follow(type.elementType, path + '[]', out, seen);
  } else if (ts.isUnionTypeNode(type) || ts.isParenthesizedTypeNode(type)) {
    (type.types || [type.type]).forEach(t => follow(t, path, out, seen));
  } else if (ts.isTypeReferenceNode(type) && text(type.typeName) === 'Record') {
    out.push([path + '{}', false, kinds(type.typeArguments?.[1])]);
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
