// The jobs sidebar's profile switch: a select of the user's cluster profiles (clusters.yaml, listed by the
// server without tokens); choosing one makes the server show and proxy that profile's jobs.
import { listProfiles, ProfileInfo, selectProfile } from './api';

export class ProfileSwitch {
  readonly node = document.createElement('select');

  constructor(private readonly switched: () => void) {
    this.node.className = 'jp-mod-styled pai-ProfileSelect';
    this.node.setAttribute('aria-label', 'Cluster profile to show');
    this.node.title = 'Cluster profile';
    this.node.onchange = () => void this.choose(this.node.value);
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
      this.node.value = current;
      this.switched();
    } catch (err) {
      this.node.value = this._current;
      this.node.title = `Could not switch to ${name}: ${(err as Error).message}`;
    }
  }

  private fill(current: string, profiles: ProfileInfo[]): void {
    this.profiles = profiles;
    this._current = current;
    this.node.replaceChildren(
      ...profiles.map(p => {
        const o = document.createElement('option');
        o.value = p.name;
        o.textContent = p.url ? `${p.name} (${p.url})` : p.name;
        return o;
      })
    );
    this.node.value = current;
    this.node.hidden = profiles.length < 2;
  }

  private profiles: ProfileInfo[] = [];
  private _current = '';
}
