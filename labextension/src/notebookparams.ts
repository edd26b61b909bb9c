// The parameters of a notebook job as typed in the Lab (kept apart from the DOM so vitest loads it plainly).
/** The parameters typed as a JSON object, or an error message. */
export function parseParameters(text: string): Record<string, unknown> | string {
  if (!text.trim()) {
    return {};
  }
  try {
    const value: unknown = JSON.parse(text);
    if (value && typeof value === 'object' && !Array.isArray(value)) {
      return value as Record<string, unknown>;
    }
  } catch {
    // said below
  }
  return 'Give the parameters as a JSON object, e.g. {"lr": 0.1, "epochs": 2}.';
}
