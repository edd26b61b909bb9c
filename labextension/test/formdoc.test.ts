import { describe, expect, it } from 'vitest';
import { execFileSync } from 'child_process';
import { defaultValues, FormSpec, fromV1, needsPro, toV1 } from '../src/formdoc';
import {
  closeReason,
  isDisconnect,
  outputOf,
  setSize,
  socketUrl,
  stdin
} from '../terminal/protocol';

// the Python that serves the form definition (pai/api/form) and runs the notebook's JobForm
function python(code: string): string {
  return execFileSync(process.env.PAI_PYTHON || '../.venv/bin/python', ['-c', code], {
    cwd: '..',
    encoding: 'utf-8',
    env: { ...process.env, PYTHONPATH: '..' }
  });
}
const SPEC: FormSpec = JSON.parse(
  python(
    'import json; from pai_jupyter.protocol.formspec import definition; print(json.dumps(definition()))'
  )
);

describe('the Lab form and the notebook form', () => {
  it('write the same document for the same fields', () => {
    const notebook = JSON.parse(
      python(
        [
          'from pai_jupyter.notebook.form import JobForm',
          'f = JobForm()',
          'f.name.value, f.gpu_type.value, f.max_run.value = "p", "v100", 30',
          'f.env.value, f.storages.value = "A=1", "s:/mnt/s"',
          'f.switches["tensorboard"].value, f.params["tb_logdir"].value, f.switches["desktop"].value = True, "/tb", True',
          'f.roles[0].ports.value, f.roles[0].min_failed.value = "http:2", 2',
          'print(f.to_json())'
        ].join('\n')
      )
    );
    const values = defaultValues(SPEC);
    Object.assign(values.values, {
      name: 'p',
      gpu_type: 'v100',
      max_run: '30',
      env: 'A=1',
      storages: 's:/mnt/s',
      tensorboard: true,
      tb_logdir: '/tb',
      desktop: true
    });
    Object.assign(values.roles[0].values, { ports: 'http:2', min_failed: '2' });
    expect(toV1(SPEC, values)).toEqual(notebook);
    expect(toV1(SPEC, defaultValues(SPEC))).toEqual(
      JSON.parse(
        python('from pai_jupyter.notebook.form import JobForm; print(JobForm().to_json())')
      )
    );
  });
});

describe('the form document', () => {
  it('round-trips v1 JSON through the fields', () => {
    const doc = {
      jobName: 'j',
      image: 'img',
      virtualCluster: 'default',
      retryCount: 1,
      jobEnvs: { A: '1', B: 'x=y' },
      taskRoles: [
        {
          name: 'main',
          taskNumber: 2,
          cpuNumber: 1,
          memoryMB: 512,
          gpuNumber: 0,
          command: 'echo hi',
          shmMB: 64,
          portList: [{ label: 'http', beginAt: 0, portNumber: 1 }]
        }
      ]
    };
    expect(toV1(SPEC, fromV1(SPEC, doc))).toEqual(doc);
  });
  it('keeps what it has no field for and maps the max run time to extras', () => {
    const doc = {
      jobName: 'j',
      image: 'img',
      virtualCluster: 'default',
      retryCount: 0,
      dataDir: '/data',
      extras: {
        'com.microsoft.pai.runtimeplugin': [
          { plugin: 'git', parameters: { x: 1 } },
          { plugin: 'tensorboard' }
        ],
        maxRunTimeMinutes: 30
      },
      taskRoles: [
        {
          name: 'main',
          taskNumber: 1,
          cpuNumber: 1,
          memoryMB: 512,
          gpuNumber: 0,
          command: 'x',
          shmMB: 128
        }
      ]
    };
    const values = fromV1(SPEC, doc);
    expect(values.values.max_run).toBe('30');
    expect(values.values.tensorboard).toBe(true);
    expect(toV1(SPEC, values)).toEqual(doc);
    values.values.max_run = '0';
    expect(toV1(SPEC, values).extras).toEqual({
      'com.microsoft.pai.runtimeplugin': [
        { plugin: 'git', parameters: { x: 1 } },
        { plugin: 'tensorboard' }
      ]
    });
  });
  it('turns plugins on and off with the switches, in basic mode too', () => {
    const values = defaultValues(SPEC);
    expect(needsPro(SPEC, values)).toBe(false);
    values.values.ssh = true;
    values.values.desktop = true;
    values.values.tensorboard = true;
    values.values.tb_logdir = '/out/tb';
    expect(
      (toV1(SPEC, values).extras as Record<string, unknown>)['com.microsoft.pai.runtimeplugin']
    ).toEqual([
      { plugin: 'tensorboard', parameters: { logdir: '/out/tb' } },
      { plugin: 'ssh' },
      { plugin: 'desktop' }
    ]);
    values.values.ssh = false;
    values.values.desktop = false;
    values.values.tensorboard = false;
    expect(toV1(SPEC, values).extras).toBeUndefined();
    expect(needsPro(SPEC, values)).toBe(false);
  });
  it('a document with a pro field set needs pro mode to be shown whole', () => {
    const doc = toV1(SPEC, defaultValues(SPEC));
    (doc.taskRoles as Record<string, unknown>[])[0].taskNumber = 2;
    expect(needsPro(SPEC, fromV1(SPEC, doc))).toBe(true);
  });
  it('memory is a basic field: a document that sets it shows whole in basic mode', () => {
    const doc = toV1(SPEC, defaultValues(SPEC));
    (doc.taskRoles as Record<string, unknown>[])[0].memoryMB = 2048;
    expect(needsPro(SPEC, fromV1(SPEC, doc))).toBe(false);
  });
});

describe("terminado's protocol", () => {
  it('reads output and disconnects, ignores the rest', () => {
    expect(outputOf('["stdout", "42\\r\\n"]')).toBe('42\r\n');
    expect(outputOf('["setup", {}]')).toBeNull();
    expect(outputOf('not json')).toBeNull();
    expect(isDisconnect('["disconnect", 1]')).toBe(true);
  });
  it('writes stdin and sizes', () => {
    expect(JSON.parse(stdin('ls\r'))).toEqual(['stdin', 'ls\r']);
    expect(JSON.parse(setSize(24, 80))).toEqual(['set_size', 24, 80]);
  });
  it('builds the socket URL on the page own server', () => {
    expect(socketUrl({ protocol: 'https:', host: 'hub:8000' }, '/user/a/pai/x')).toBe(
      'wss://hub:8000/user/a/pai/x'
    );
    expect(socketUrl({ protocol: 'http:', host: '127.0.0.1:1' }, '/p')).toBe('ws://127.0.0.1:1/p');
  });
  it('says why a terminal closed', () => {
    expect(closeReason(1006, '', 'SUCCEEDED')).toContain('needs a running task');
    expect(closeReason(1011, 'no terminal', 'RUNNING')).toContain('no terminal');
  });
});
