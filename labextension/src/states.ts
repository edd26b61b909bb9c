// A job's states as the daemon sends them (pai_jupyter/common/states.py; test/states.test.ts holds the two
// alike): the one list of them the Lab reads.

/** The states the sidebar filters by, in a job's order (STOPPING shows as its own badge, never filtered). */
export const STATES = ['WAITING', 'RUNNING', 'SUCCEEDED', 'FAILED', 'STOPPED'] as const;

/** The states a job never leaves. */
export const FINAL: ReadonlySet<string> = new Set(['SUCCEEDED', 'FAILED', 'STOPPED']);
