import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { chromium, type BrowserContext } from "playwright-core";
import { fileExists, toolAvailable } from "../../support/require-tool.js";
import { until } from "../../support/until.js";

const CHROMIUM = "/usr/bin/chromium";

/** Whether the browser tests can run (skipped with a reason, or failing under WORQ_REQUIRE_ALL=1). */
export function chromiumAvailable(): boolean {
  return toolAvailable(
    "dashboard browser",
    () => fileExists(CHROMIUM),
    `${CHROMIUM} is missing (bash scripts/install-browser.sh installs Debian's chromium)`,
  );
}

/**
 * Debian's Chromium, headless, with a fresh profile. Background networking, component
 * updates and sync are off: on a closed network Chromium otherwise stalls on them.
 */
export async function launchBrowser(): Promise<{ context: BrowserContext; close(): Promise<void> }> {
  const profile = mkdtempSync(join(tmpdir(), "worq-chromium-"));
  const context = await chromium.launchPersistentContext(profile, {
    executablePath: CHROMIUM,
    headless: true,
    viewport: { width: 1280, height: 900 },
    args: [
      "--headless",
      "--no-sandbox",
      "--disable-gpu",
      "--disable-quic",
      "--no-first-run",
      "--disable-background-networking",
      "--disable-component-update",
      "--disable-sync",
    ],
  });
  return {
    context,
    close: async () => {
      await context.close();
      rmSync(profile, { recursive: true, force: true });
    },
  };
}

/** Polls `check` until it returns a value other than undefined/false, or fails after `timeoutMs` (until(), in the dashboard tests' argument order). */
export function eventually<T>(check: () => Promise<T | undefined | false>, what: string, timeoutMs = 10_000): Promise<T> {
  return until(what, check, timeoutMs);
}
