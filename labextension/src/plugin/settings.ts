// The plugin's settings (schema/plugin.json): the sidebar's refresh interval and the default profile.
import { ISettingRegistry } from '@jupyterlab/settingregistry';
import { JobsPanel } from '../sidebar';

/** Apply the settings now and whenever they change (defaults without a setting registry). */
export function registerSettings(
  pluginId: string,
  panel: JobsPanel,
  settings: ISettingRegistry | null
): void {
  const apply = (s: ISettingRegistry.ISettings | null): void => {
    const seconds = s ? Number(s.get('refreshSeconds').composite) : 5;
    panel.setInterval(seconds || 5);
    const profile = s ? String(s.get('defaultProfile').composite || '') : '';
    if (profile) {
      void panel.profiles.useDefault(profile);
    }
  };
  if (settings) {
    void settings
      .load(pluginId)
      .then(s => {
        apply(s);
        s.changed.connect(() => apply(s));
      })
      .catch(() => apply(null));
  } else {
    apply(null);
  }
}
