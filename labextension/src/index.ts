import { JupyterFrontEnd, JupyterFrontEndPlugin } from '@jupyterlab/application';

const plugin: JupyterFrontEndPlugin<void> = {
  id: 'pai-jupyter:plugin',
  description: 'PAI jobs in JupyterLab',
  autoStart: true,
  activate: (app: JupyterFrontEnd) => {
    console.log('pai-jupyter is activated', app.name);
  }
};

export default plugin;
