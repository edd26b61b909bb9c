// A service added to the catalogue with a form switch and an icon (pai_jupyter/common/services.py, and nothing
// else) is in the Lab's submit form: the definition the server sends has its switch with its icon and its
// parameter, the form draws the icon's SVG, and the switch and parameter reach the v1 document and back.
// tests/unit/test_service_switch.py sees the same service in the notebook's form.
import { execFileSync } from 'child_process';
import { describe, expect, it } from 'vitest';
import { defaultValues, FormSpec, fromV1, toV1 } from '../src/formdoc';
import { iconSvg } from '../src/iconsvg';

const ADDED =
  'from pai_jupyter.common import services as s; ' +
  "s.CATALOGUE = (*s.CATALOGUE, s.Service('board', 'Board', web='http', starts='tools', " +
  "switch=s.Switch('看板', params=(s.Param('board_dir', 'dir', 'Board dir', '看板目录'),)), " +
  'icon=\'<circle cx="12" cy="12" r="9"/>\'))';

function definition(added: boolean): FormSpec {
  const code = `${added ? ADDED + '; ' : ''}import json; from pai_jupyter.protocol.formspec import definition; print(json.dumps(definition()))`;
  return JSON.parse(
    execFileSync(process.env.PAI_PYTHON || '../.venv/bin/python', ['-c', code], {
      cwd: '..',
      encoding: 'utf-8',
      env: { ...process.env, PYTHONPATH: '..' }
    })
  );
}

describe('a service with a form switch and an icon', () => {
  const spec = definition(true);

  it('is a switch of the Lab form, with its icon drawn in the theme’s colour', () => {
    const board = spec.plugins.find(f => f.key === 'board');
    expect(board?.kind).toBe('switch');
    expect(board?.label_zh).toBe('看板');
    expect(iconSvg(board?.icon ?? '')).toContain(
      '<g class="jp-icon3" fill="#616161"><circle cx="12" cy="12" r="9"/></g>'
    );
    expect(spec.plugins.find(f => f.key === 'board_dir')?.path).toBe('board.parameters.dir');
  });

  it('writes its plugin with the parameter, and reads it back', () => {
    const values = defaultValues(spec);
    expect(values.values.board).toBe(false);
    values.values.board = true;
    values.values.board_dir = '/data/board';
    const doc = toV1(spec, values);
    const plugins = (doc.extras as Record<string, unknown>)[spec.pluginKey] as Record<
      string,
      unknown
    >[];
    expect(plugins).toContainEqual({ plugin: 'board', parameters: { dir: '/data/board' } });
    const back = fromV1(spec, doc);
    expect(back.values.board).toBe(true);
    expect(back.values.board_dir).toBe('/data/board');
  });

  it('is not in the form of the shipped catalogue (the check can fail)', () => {
    expect(definition(false).plugins.map(f => f.key)).not.toContain('board');
  });
});
