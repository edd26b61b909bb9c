"""The embedded cluster's SQLite schema, and the SQL fragments built from it (the list item, sort fields, the
job's core columns, a state group as an SQL list)."""

from __future__ import annotations

from ....protocol.rules import MAX_RUN_TIME_KEY

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
# OpenPAI's list item, field by field: its key and the SQL of it over a jobs row, in the order it is sent. It is the
# STORED generated column ``item`` of jobs (kept by SQLite itself on every write: listing 10,000 jobs is reading one
# narrow column, not building the JSON per row, about twice as fast:
# 10-14 ms against 24-26 ms for 10,000 rows, measured). A field joins the item by one more entry
# here and one migration that adds its column and calls ``rebuild.item`` (migrations.py): SQLite cannot alter a
# STORED column, so the table is rebuilt with the item as this list says.
ITEM_FIELDS: tuple[tuple[str, str], ...] = (
    ("debugId", "debug_id"),
    ("name", "name"),
    ("username", "user"),
    ("state", "state"),
    ("subState", "sub_state"),
    ("executionType", "execution_type"),
    ("tags", "json('[]')"),  # a job's tags are a table of their own: ``ITEM`` adds them
    ("retries", "retries"),
    ("retryDetails", "json_object('user', retries, 'platform', 0, 'resource', 0)"),
    ("submissionTime", "submission_time"),
    ("createdTime", "created_time"),
    ("launchedTime", "launched_time"),
    ("completedTime", "completed_time"),
    ("appExitCode", "exit_code"),
    ("virtualCluster", "vc"),
    ("totalGpuNumber", "total_gpu"),
    ("totalTaskNumber", "total_tasks"),
    ("totalTaskRoleNumber", "total_roles"),
    ("jobPriority", "coalesce(priority, 'default')"),  # OpenPAI/HiveD's class (crit, prod, test, oppo; NULL: default)
)


def item_expression(fields: tuple[tuple[str, str], ...] = ITEM_FIELDS) -> str:
    """The SQL of the list item: a JSON object of ``fields`` (constant keys and expressions, no user text)."""
    return "json_object(" + ", ".join(f"'{key}', {sql}" for key, sql in fields) + ")"


# The fields of a job's stored model (job_configs.model, its parsed Job) the store reads in SQL, one home each, in
# the model's own keys (protocol/rules.py): ``Job`` reads the same keys as properties.
def model_field(*path: str) -> str:
    """``json_extract`` of the model (as ``c``) at ``path``, e.g. ``model_field("extras", MAX_RUN_TIME_KEY)``."""
    return "json_extract(c.model, '$." + ".".join(path) + "')"


MAX_RUN_TIME_MINUTES = model_field("extras", MAX_RUN_TIME_KEY)
GANG_ALLOCATION = "json_type(c.model, '$.extras.gangAllocation')"  # (a JSON false turns it off, not a null)

# A job's priority class, in its row (migration 5); its place among the waiting jobs of that class is job_priority's
# queue_key (NULL or no row: its submission time).
PRIORITY = "jobs.priority"
# A job's list item with its tags (a tagged job is rare: the subquery runs only for those)
ITEM = (
    "CASE WHEN EXISTS (SELECT 1 FROM job_tags g WHERE g.job_id = jobs.id) THEN json_set(item, '$.tags', "
    "(SELECT json_group_array(tag) FROM job_tags g WHERE g.job_id = jobs.id)) ELSE item END"
)

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


# The columns of a job row but its list item (the config and model live in job_configs):
CORE_COLUMNS = (
    "id, user, name, debug_id, state, sub_state, execution_type, vc, attempt, retries, submission_time, "
    "created_time, launched_time, completed_time, exit_code, exit_diagnostics, exit_type, trigger_role, "
    "trigger_index, total_gpu, total_tasks, total_roles, config_format, waiting_reason, deadline, priority"
)


def sql_set(group: frozenset[str]) -> str:
    """A state group of common.states as an SQL list: ``('RUNNING', 'STARTING')`` (constant names, no user text)."""
    return "(" + ", ".join(f"'{s}'" for s in sorted(group)) + ")"
