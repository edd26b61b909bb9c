"""The embedded cluster's SQLite schema, and the SQL fragments built from it (the list item, sort fields, the
job's core columns, a state group as an SQL list)."""

from __future__ import annotations

# Version 1 of the schema (migrations.py): never edit it; a new table or column is one more migration there.
SCHEMA = """
CREATE TABLE IF NOT EXISTS users (
  name TEXT PRIMARY KEY, admin INTEGER NOT NULL DEFAULT 0, password_hash TEXT, created REAL NOT NULL);
CREATE TABLE IF NOT EXISTS tokens (
  hash TEXT PRIMARY KEY, user TEXT NOT NULL REFERENCES users(name) ON DELETE CASCADE,
  label TEXT, created REAL NOT NULL);
CREATE TABLE IF NOT EXISTS user_accounts (
  user TEXT PRIMARY KEY REFERENCES users(name) ON DELETE CASCADE, account TEXT NOT NULL UNIQUE);
CREATE TABLE IF NOT EXISTS user_emails (
  user TEXT PRIMARY KEY REFERENCES users(name) ON DELETE CASCADE, email TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS jobs (
  id INTEGER PRIMARY KEY, user TEXT NOT NULL, name TEXT NOT NULL, debug_id TEXT NOT NULL,
  state TEXT NOT NULL, sub_state TEXT NOT NULL, execution_type TEXT NOT NULL DEFAULT 'START',
  vc TEXT NOT NULL, attempt INTEGER NOT NULL DEFAULT 0, retries INTEGER NOT NULL DEFAULT 0,
  submission_time INTEGER NOT NULL, created_time INTEGER, launched_time INTEGER, completed_time INTEGER,
  exit_code INTEGER, exit_diagnostics TEXT, exit_type TEXT, trigger_role TEXT, trigger_index INTEGER,
  total_gpu INTEGER NOT NULL, total_tasks INTEGER NOT NULL, total_roles INTEGER NOT NULL,
  config_format TEXT NOT NULL, waiting_reason TEXT, deadline REAL,
  item TEXT GENERATED ALWAYS AS (json_object(
      'debugId', debug_id, 'name', name, 'username', user, 'state', state, 'subState', sub_state,
      'executionType', execution_type, 'tags', json('[]'), 'retries', retries,
      'retryDetails', json_object('user', retries, 'platform', 0, 'resource', 0),
      'submissionTime', submission_time, 'createdTime', created_time, 'launchedTime', launched_time,
      'completedTime', completed_time, 'appExitCode', exit_code, 'virtualCluster', vc, 'totalGpuNumber', total_gpu,
      'totalTaskNumber', total_tasks, 'totalTaskRoleNumber', total_roles, 'jobPriority', 'default')) STORED,
  UNIQUE (user, name));
CREATE TABLE IF NOT EXISTS job_configs (
  job_id INTEGER PRIMARY KEY REFERENCES jobs(id) ON DELETE CASCADE, config_text TEXT NOT NULL, model TEXT NOT NULL);
CREATE INDEX IF NOT EXISTS jobs_by_submission ON jobs (submission_time, id);
CREATE INDEX IF NOT EXISTS jobs_by_state ON jobs (state);
CREATE TABLE IF NOT EXISTS attempts (
  job_id INTEGER NOT NULL REFERENCES jobs(id) ON DELETE CASCADE, attempt INTEGER NOT NULL,
  state TEXT NOT NULL, created_time INTEGER, launched_time INTEGER, completed_time INTEGER,
  exit_code INTEGER, exit_diagnostics TEXT, trigger_role TEXT, trigger_index INTEGER,
  PRIMARY KEY (job_id, attempt));
CREATE TABLE IF NOT EXISTS tasks (
  job_id INTEGER NOT NULL REFERENCES jobs(id) ON DELETE CASCADE, attempt INTEGER NOT NULL,
  role TEXT NOT NULL, idx INTEGER NOT NULL, task_attempt INTEGER NOT NULL DEFAULT 0,
  state TEXT NOT NULL, runtime TEXT, handle TEXT, host_ip TEXT, ports TEXT, gpus TEXT,
  cpu INTEGER NOT NULL, memory_mb INTEGER NOT NULL, gpu INTEGER NOT NULL,
  exit_code INTEGER, exit_diagnostics TEXT, created_time INTEGER, launched_time INTEGER, completed_time INTEGER,
  task_dir TEXT, stopping INTEGER NOT NULL DEFAULT 0, services TEXT,
  PRIMARY KEY (job_id, attempt, role, idx));
CREATE INDEX IF NOT EXISTS tasks_by_state ON tasks (state);
CREATE TABLE IF NOT EXISTS events (
  id INTEGER PRIMARY KEY, job_id INTEGER NOT NULL REFERENCES jobs(id) ON DELETE CASCADE,
  time INTEGER NOT NULL, type TEXT NOT NULL, reason TEXT NOT NULL, message TEXT NOT NULL,
  role TEXT, idx INTEGER);
CREATE INDEX IF NOT EXISTS events_by_job ON events (job_id, id);
CREATE TABLE IF NOT EXISTS job_tags (
  job_id INTEGER NOT NULL REFERENCES jobs(id) ON DELETE CASCADE, tag TEXT NOT NULL, PRIMARY KEY (job_id, tag));
CREATE TABLE IF NOT EXISTS job_priority (
  job_id INTEGER PRIMARY KEY REFERENCES jobs(id) ON DELETE CASCADE, priority TEXT, queue_key REAL);
"""
# A job's priority class (OpenPAI/HiveD's jobPriorityClass: crit, prod, test, oppo; NULL is OpenPAI's "default")
# and its place among the waiting jobs of that class (NULL: its submission time). A row only for a job that has
# either: in a table of its own so that a database made before priorities existed gains it as it opens.
PRIORITY = "(SELECT priority FROM job_priority p WHERE p.job_id = jobs.id)"
# A job's list item with its tags (a tagged job is rare: the subquery runs only for those)
_TAGGED = (
    "CASE WHEN EXISTS (SELECT 1 FROM job_tags g WHERE g.job_id = jobs.id) THEN json_set(item, '$.tags', "
    "(SELECT json_group_array(tag) FROM job_tags g WHERE g.job_id = jobs.id)) ELSE item END"
)
# ... and with its priority class, where it has one
ITEM = f"CASE WHEN {PRIORITY} IS NOT NULL THEN json_set({_TAGGED}, '$.jobPriority', {PRIORITY}) ELSE {_TAGGED} END"

LIST_ORDER_FIELDS = {
    "jobName": "name",
    "submissionTime": "submission_time",
    "username": "user",
    "vc": "vc",
    "retries": "retries",
    "totalTaskNumber": "total_tasks",
    "totalGpuNumber": "total_gpu",
    "state": "state",
    "completionTime": "completed_time",
    "jobPriority": PRIORITY,
}


# OpenPAI's list item is a STORED generated column of jobs (``item``), kept by SQLite itself on every write:
# listing 10,000 jobs is then reading one narrow column, not building 10,000 Python dicts. The other columns of a
# job row, without it (the config and model live in job_configs):
CORE_COLUMNS = (
    "id, user, name, debug_id, state, sub_state, execution_type, vc, attempt, retries, submission_time, "
    "created_time, launched_time, completed_time, exit_code, exit_diagnostics, exit_type, trigger_role, "
    "trigger_index, total_gpu, total_tasks, total_roles, config_format, waiting_reason, deadline"
)


def sql_set(group: frozenset[str]) -> str:
    """A state group of common.states as an SQL list: ``('RUNNING', 'STARTING')`` (constant names, no user text)."""
    return "(" + ", ".join(f"'{s}'" for s in sorted(group)) + ")"
