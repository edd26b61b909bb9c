// The browser page of a task's terminal: {base_url}pai/jobs/{user}~{job}/{role}/{index}/terminal/.
// xterm.js over the server extension's terminado websocket (never the daemon directly). Works wherever the
// Jupyter server runs: plain Jupyter Server, Notebook 7, JupyterLab, JupyterHub's /user/<name>/ prefix.
import { Terminal } from '@xterm/xterm';
import { FitAddon } from '@xterm/addon-fit';
import '@xterm/xterm/css/xterm.css';
import { closeReason, isDisconnect, outputOf, setSize, socketUrl, stdin } from './protocol';

interface PageConfig {
  websocketPath: string;
  title: string;
  taskState: string;
}

function readConfig(): PageConfig {
  const node = document.getElementById('pai-terminal-config');
  return JSON.parse(node?.textContent || '{}') as PageConfig;
}

function main(): void {
  const config = readConfig();
  const status = document.getElementById('pai-terminal-status') as HTMLElement;
  const host = document.getElementById('pai-terminal') as HTMLElement;
  const dark = window.matchMedia?.('(prefers-color-scheme: dark)').matches;
  const term = new Terminal({
    cursorBlink: true,
    screenReaderMode: false,
    fontFamily: 'Menlo, Consolas, "DejaVu Sans Mono", monospace',
    theme: dark
      ? { background: '#111111' }
      : { background: '#ffffff', foreground: '#111111', cursor: '#111111' }
  });
  const fit = new FitAddon();
  term.loadAddon(fit);
  term.open(host);
  fit.fit();
  const say = (text: string): void => {
    status.textContent = text;
  };
  say('Connecting…');
  const ws = new WebSocket(socketUrl(window.location, config.websocketPath));
  const resize = (): void => {
    fit.fit();
    if (ws.readyState === WebSocket.OPEN) {
      ws.send(setSize(term.rows, term.cols));
    }
  };
  ws.onopen = () => {
    say('Connected'); // the header's title names the task already
    resize();
    term.focus();
  };
  ws.onmessage = event => {
    const data = String(event.data);
    const text = outputOf(data);
    if (text !== null) {
      term.write(text);
    } else if (isDisconnect(data)) {
      say(closeReason(1000, '', ''));
    }
  };
  ws.onclose = event => {
    say(closeReason(event.code, event.reason, config.taskState));
    term.options.cursorBlink = false;
  };
  term.onData(data => {
    if (ws.readyState === WebSocket.OPEN) {
      ws.send(stdin(data));
    }
  });
  window.addEventListener('resize', resize);
}

main();
