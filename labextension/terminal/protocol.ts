// terminado's websocket protocol, shared by the terminal page and its tests: ["stdin", text], ["set_size",
// rows, cols] out; ["stdout", text], ["disconnect", code] in.

export type TerminadoMessage = [string, ...unknown[]];

/** The text to write for a message from the server, or null for anything that is not output. */
export function outputOf(raw: string): string | null {
  let msg: unknown;
  try {
    msg = JSON.parse(raw);
  } catch {
    return null;
  }
  if (Array.isArray(msg) && msg[0] === 'stdout' && typeof msg[1] === 'string') {
    return msg[1];
  }
  return null;
}

/** True when the server says the shell is gone. */
export function isDisconnect(raw: string): boolean {
  try {
    const msg = JSON.parse(raw);
    return Array.isArray(msg) && msg[0] === 'disconnect';
  } catch {
    return false;
  }
}

export function stdin(text: string): string {
  return JSON.stringify(['stdin', text]);
}

export function setSize(rows: number, cols: number): string {
  return JSON.stringify(['set_size', rows, cols]);
}

/** ws(s)://host + path for a path on the page's own server. */
export function socketUrl(location: { protocol: string; host: string }, path: string): string {
  const scheme = location.protocol === 'https:' ? 'wss:' : 'ws:';
  return `${scheme}//${location.host}${path}`;
}

/** Words for a websocket close, for the status line. */
export function closeReason(code: number, reason: string, taskState: string): string {
  if (taskState && taskState !== 'RUNNING') {
    return `The task is ${taskState}: a terminal needs a running task.`;
  }
  if (reason) {
    return `Disconnected: ${reason} (code ${code}).`;
  }
  if (code === 1000 || code === 1001) {
    return 'The shell ended.';
  }
  return `Disconnected (code ${code}): the task may have ended, or the server refused the terminal.`;
}
