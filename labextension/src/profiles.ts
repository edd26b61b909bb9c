// The jobs sidebar's profile switch: a select of the user's cluster profiles (clusters.yaml, listed by the
// server without tokens); choosing one makes the server show and proxy that profile's jobs.
import { listProfiles, ProfileInfo, selectProfile } from './api';
import { selectBox } from './selectbox';

export class ProfileSwitch {
  private readonly select = document.createElement('select');
  /** The select in Lab's drop-down look: what the sidebar places. */
  readonly node = selectBox(this.select);

  constructor(private readonly switched: () => void) {
    this.select.className = 'jp-mod-styled pai-ProfileSelect';
    this.select.setAttribute('aria-label', 'Cluster profile to show');
    this.select.title = 'Cluster profile';
    this.select.onchange = () => void this.choose(this.select.value);
  }

  get current(): string {
    return this._current;
  }

  /** Fill the select from the server (where the server answers no list, the select stays hidden). */
  async load(): Promise<void> {
    try {
      const { current, profiles } = await listProfiles();
      this.fill(current, profiles);
    } catch {
      this.node.hidden = true;
    }
  }

  /** The settings' default profile, where it names one of the user's profiles that is not shown yet. */
  async useDefault(name: string): Promise<void> {
    if (!this.profiles.length) {
      await this.load();
    }
    if (name && name !== this._current && this.profiles.some(p => p.name === name)) {
      await this.choose(name);
    }
  }

  async choose(name: string): Promise<void> {
    try {
      const { current } = await selectProfile(name);
      this._current = current;
      this.select.value = current;
      this.switched();
    } catch (err) {
      this.select.value = this._current;
      this.select.title = `Could not switch to ${name}: ${(err as Error).message}`;
    }
  }

  private fill(current: string, profiles: ProfileInfo[]): void {
    this.profiles = profiles;
    this._current = current;
    this.select.replaceChildren(
      ...profiles.map(p => {
        const o = document.createElement('option');
        o.value = p.name;
        o.textContent = p.url ? `${p.name} (${p.url})` : p.name;
        return o;
      })
    );
    this.select.value = current;
    this.node.hidden = profiles.length < 2;
  }

  private profiles: ProfileInfo[] = [];
  private _current = '';
}
