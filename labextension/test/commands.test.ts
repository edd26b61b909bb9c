// The command ids: one module (src/commands.ts) holds them all, each is registered exactly once, and no command
// is registered, executed or put in a menu by a literal id (a typo there would fail silently in Lab).
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { CommandIDs } from '../src/commands';

const SRC = join(__dirname, '..', 'src');

function sources(dir = SRC): Map<string, string> {
  const out = new Map<string, string>();
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) {
      sources(path).forEach((text, p) => out.set(p, text));
    } else if (entry.name.endsWith('.ts')) {
      out.set(path, readFileSync(path, 'utf8'));
    }
  }
  return out;
}

describe('command ids', () => {
  const files = sources();
  const all = [...files.values()].join('\n');

  it('are unique and namespaced', () => {
    const ids = Object.values(CommandIDs);
    expect(new Set(ids).size).toBe(ids.length);
    for (const id of ids) {
      expect(id).toMatch(/^pai:[a-z-]+$/);
    }
  });

  it('each is registered exactly once, by its CommandIDs name', () => {
    const registered = [...all.matchAll(/addCommand\(\s*([^,]+),/g)].map(m => m[1].trim());
    for (const arg of registered) {
      expect(arg).toMatch(/^CommandIDs\.\w+$/);
    }
    const keys = registered.map(arg => arg.replace('CommandIDs.', '')).sort();
    expect(keys).toEqual(Object.keys(CommandIDs).sort());
  });

  it('are never written as literals outside commands.ts', () => {
    const ids = new Set<string>(Object.values(CommandIDs));
    for (const [path, text] of files) {
      if (path.endsWith('commands.ts')) {
        continue;
      }
      const literals = [...text.matchAll(/['"`](pai:[a-z-]+)['"`]/g)].map(m => m[1]);
      expect(
        literals.filter(id => ids.has(id)),
        path
      ).toEqual([]);
      // a command executed or put in a menu is named through CommandIDs
      expect(text, path).not.toMatch(/(execute|addItem)\(\s*['"`]pai:/);
      expect(text, path).not.toMatch(/command:\s*['"`]pai:/);
    }
  });
});
