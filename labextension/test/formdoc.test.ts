import { describe, expect, it } from 'vitest';
import { fieldOf, fromV1, toV1 } from '../src/formdoc';
import {
  closeReason,
  isDisconnect,
  outputOf,
  setSize,
  socketUrl,
  stdin
} from '../terminal/protocol';

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
          command: 'echo hi'
        }
      ]
    };
    expect(toV1(fromV1(doc))).toEqual(doc);
  });
  it('keeps what it has no field for and maps the max run time to extras', () => {
    const doc = {
      jobName: 'j',
      image: 'img',
      virtualCluster: 'default',
      retryCount: 0,
      dataDir: '/data',
      extras: {
        'com.microsoft.pai.runtimeplugin': [{ plugin: 'tensorboard' }],
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
    const values = fromV1(doc);
    expect(values.maxRunTimeMinutes).toBe('30');
    expect(toV1(values)).toEqual(doc);
    values.maxRunTimeMinutes = '';
    expect(toV1(values).extras).toEqual({
      'com.microsoft.pai.runtimeplugin': [{ plugin: 'tensorboard' }]
    });
    expect(fieldOf('extras.maxRunTimeMinutes')).toBe('maxRunTimeMinutes');
  });
  it('maps problem paths to the field they are about', () => {
    expect(fieldOf('taskRoles[0].memoryMB')).toBe('roles.0.memoryMB');
    expect(fieldOf('taskRoles[1]')).toBe('roles.1.name');
    expect(fieldOf('jobName')).toBe('jobName');
    expect(fieldOf('name')).toBe('jobName');
    expect(fieldOf('taskRoles[0].shmMB')).toBe('');
    expect(fieldOf('')).toBe('');
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
