// Drives the embedded cluster with OpenPAI's own JS SDK (@microsoft/openpai-js-sdk), as a user of a real
// OpenPAI would: behind a gateway's /rest-server prefix, logging in with a password. Run by
// tests/integration/test_openpai_js_sdk.py with PAI_URL (…/rest-server), PAI_USER and PAI_PASSWORD (and the
// admin's PAI_ADMIN and PAI_ADMIN_TOKEN, for what OpenPAI lets admins only see); prints one JSON object with what each step answered, or exits 1 with the step that failed.
'use strict';

const axios = require('axios');
const { PAIV2 } = require('@microsoft/openpai-js-sdk');

const restServer = process.env.PAI_URL;
const username = process.env.PAI_USER;
const password = process.env.PAI_PASSWORD;
const adminName = process.env.PAI_ADMIN;
const adminToken = process.env.PAI_ADMIN_TOKEN;
const origin = new URL(restServer).origin;

const client = new PAIV2.OpenPAIClient({ rest_server_uri: restServer, username, password, https: false });
const out = {};
let step = 'start';

// [status, code] of a call the cluster must refuse (the SDK throws a PAIBaseError carrying them)
async function refused(call) {
  try {
    await call;
  } catch (err) {
    return [err.status, err.data && err.data.code];
  }
  return 'answered';
}

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

async function waitFor(name, states) {
  const deadline = Date.now() + 60000;
  for (;;) {
    const job = await client.job.getJob(username, name);
    if (states.includes(job.jobStatus.state)) {
      return job;
    }
    if (Date.now() > deadline) {
      throw new Error(`${name} is still ${job.jobStatus.state}`);
    }
    await sleep(100);
  }
}

function v2Job(name, command) {
  return {
    protocolVersion: 2, name, type: 'job',
    prerequisites: [{ name: 'image', type: 'dockerimage', uri: 'pai-test/busybox:latest' }],
    taskRoles: { main: { instances: 1, dockerImage: 'image',
      resourcePerInstance: { cpu: 1, memoryMB: 256, gpu: 0 }, commands: [command] } },
  };
}

async function main() {
  step = 'info';
  out.info = await client.api.getClusterInfo();
  step = 'submit';
  out.submit = await client.job.createJob(v2Job('sdk_hello', 'echo sdk-hello'));
  step = 'list';
  out.list = (await client.job.listJobs({ username })).map((j) => j.name);
  step = 'detail';
  const done = await waitFor('sdk_hello', ['SUCCEEDED', 'FAILED', 'STOPPED']);
  out.state = done.jobStatus.state;
  step = 'detail by attempt';
  out.attemptState = (await client.job.getJob(username, 'sdk_hello', 0)).jobStatus.state;
  step = 'config';
  out.config = await client.job.getJobConfig(username, 'sdk_hello');
  step = 'task';
  out.task = await client.job.getTask(username, 'sdk_hello', 0, 'main', 0);
  step = 'logs (locations)';
  const logs = await client.job.getTaskLogs(username, 'sdk_hello', 0, 'main', 0, 0);
  out.logNames = logs.locations.map((l) => l.name);
  step = 'logs (content, no header)';
  const stdout = logs.locations.find((l) => l.name === 'stdout');
  const res = await axios.get(new URL(stdout.uri, origin).toString(), { responseType: 'text',
    transformResponse: [(d) => d] });
  out.stdout = res.data;
  step = 'logs (containerLog, as OpenPAI\'s web portal reads it: the REST server\'s URI + containerLog)';
  const detail = await client.job.getJob(username, 'sdk_hello');
  const containerLog = detail.taskRoles.main.taskStatuses[0].containerLog;
  const portal = await axios.get(`${restServer}${containerLog}`,
    { headers: { Authorization: `Bearer ${await client.job.getToken()}` } });
  out.portalLogNames = portal.data.locations.map((l) => l.name);
  step = 'logs (tail mode)';
  const tail = await client.job.getTaskLogs(username, 'sdk_hello', 0, 'main', 0, 0, true);
  out.tailUri = tail.locations.find((l) => l.name === 'stdout').uri;
  step = 'events';
  out.events = (await client.job.listEvents(username, 'sdk_hello')).data.map((e) => [e.reason, e.lastTimestamp]);
  step = 'attempts';
  out.attempts = (await client.jobHistory.getJobAttempts(username, 'sdk_hello')).map((a) => [a.attemptIndex, a.state]);
  out.attempt0 = (await client.jobHistory.getJobAttempt(username, 'sdk_hello', 0)).isLatest;
  out.healthz = await client.jobHistory.getJobAttemptsHealthz(username, 'sdk_hello');
  step = 'tags';
  await client.job.addTag(username, 'sdk_hello', 'sdk-tag');
  out.tagged = (await client.job.getJob(username, 'sdk_hello')).jobStatus.tags;
  await client.job.deleteTag(username, 'sdk_hello', 'sdk-tag');
  out.untagged = (await client.job.getJob(username, 'sdk_hello')).jobStatus.tags;
  step = 'stop';
  await client.job.createJob(v2Job('sdk_sleeper', 'sleep 300'));
  await waitFor('sdk_sleeper', ['RUNNING']);
  await client.job.updateJobExecutionType(username, 'sdk_sleeper', 'STOP');
  out.stopped = (await waitFor('sdk_sleeper', ['STOPPED', 'FAILED', 'SUCCEEDED'])).jobStatus.state;
  step = 'virtual clusters';
  out.vcs = Object.keys(await client.virtualCluster.listVirtualClusters());
  out.vcDefault = await client.virtualCluster.getVirtualCluster('default');
  step = 'user';
  out.user = await client.user.getUser(username);
  step = 'tokens';
  out.tokens = (await client.token.getTokens()).tokens.length;
  step = 'storages';
  out.storages = await client.storage.getStorages();
  out.defaultStorages = await client.storage.getStorages(true);
  out.noStorage = await refused(client.storage.getStorage('nfs-storage'));
  step = 'groups';
  out.groups = (await client.group.getAllGroup()).map((g) => g.groupname);
  out.group = await client.group.getGroup('default');
  out.noGroup = await refused(client.group.getGroup('nogroup'));
  out.membersAsUser = await refused(client.group.getGroupMembers('default'));
  step = 'sku types';
  out.skus = await client.virtualCluster.getVirtualClusterSkuTypes('default');
  out.noVcSkus = await refused(client.virtualCluster.getVirtualClusterSkuTypes('novc'));
  step = 'kubernetes nodes';
  out.nodesAsUser = await refused(client.kubernetes.getK8sNodes());
  const admin = new PAIV2.OpenPAIClient({ rest_server_uri: restServer, username: adminName, token: adminToken,
    https: false });
  out.nodes = (await admin.kubernetes.getK8sNodes()).items.map((n) => [n.metadata.name, n.status.capacity,
    n.status.conditions.find((c) => c.type === 'Ready').status]);
  out.members = (await admin.group.getGroupMembers('default')).map((u) => [u.username, u.clusterAdmin]);
  out.admins = (await admin.group.getGroupMembers('admingroup')).map((u) => u.username);
  process.stdout.write(JSON.stringify(out));
}

main().catch((err) => {
  const detail = err && err.response ? { status: err.response.status, data: err.response.data } : String(err);
  process.stderr.write(`step ${step} failed: ${JSON.stringify(detail)} ${err && err.stack}\n`);
  process.exit(1);
});
