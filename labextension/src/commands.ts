// Every command id of the extension, in one place: the plugin registers each of these and the pages, menus and
// toolbars execute them by name (test/commands.test.ts checks that no other `pai:` command id is used).
export const CommandIDs = {
  showJobs: 'pai:show-jobs',
  refreshJobs: 'pai:refresh-jobs',
  openJob: 'pai:open-job',
  openLogs: 'pai:open-logs',
  stopJob: 'pai:stop-job',
  cloneJob: 'pai:clone-job',
  deleteJob: 'pai:delete-job',
  openService: 'pai:open-service',
  newJob: 'pai:new-job',
  submitFile: 'pai:submit-file',
  runNotebook: 'pai:run-notebook',
  openExecutedNotebook: 'pai:open-executed-notebook',
  showQueue: 'pai:show-queue',
  showSweeps: 'pai:show-sweeps',
  openMlflow: 'pai:open-mlflow',
  compareInMlflow: 'pai:compare-in-mlflow'
} as const;

export type CommandID = (typeof CommandIDs)[keyof typeof CommandIDs];
