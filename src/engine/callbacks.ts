/**
 * Webhook callbacks: handing finished jobs' callbacks to the sender, and forgetting delivered
 * ones.
 */
import type { PendingCallback } from "./store.js";
import type { EngineCore } from "./engine-core.js";

/**
 * Registers the webhook sender: it hears of each finished job's callback once that is
 * durable, and of those left undelivered before a restart when `open()` has run.
 */
export function onCallbackDue(core: EngineCore, listener: (callback: PendingCallback) => void): void {
  core.callbackListener = listener;
  const recovered = core.pendingCallbacks.splice(0);
  recovered.forEach((callback) => listener(callback));
}

/** The webhook of `jid` was delivered (or given up): forget it. */
export async function settleCallback(core: EngineCore, jid: string): Promise<void> {
  if (core.fatal !== undefined) return;
  // Safe to ignore: a failed commit is reported through onFatal, and the callback stays
  // stored, so it is sent again (at least once) by the engine loaded after recovery.
  await core.persist([{ kind: "delete-callback", jid }]).catch(() => {});
}
