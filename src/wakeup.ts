import type { Engine } from "./engine/engine.js";
import { LONGEST_TIMER_MS } from "./longest-timer.js";

/**
 * Drives the engine's timers with one setTimeout on the earliest due time (never a polling
 * loop), re-armed whenever the engine reports an earlier one. Returns a stop function.
 */
export function driveEngineTimers(engine: Engine, nowMs: () => number = Date.now): () => void {
  let timer: NodeJS.Timeout | undefined;
  let armedAtMs: number | undefined;
  let stopped = false;

  const arm = () => {
    const next = engine.nextWakeMs();
    if (stopped || next === undefined) return;
    if (armedAtMs !== undefined && armedAtMs <= next) return;
    if (timer) clearTimeout(timer);
    armedAtMs = next;
    timer = setTimeout(fire, Math.min(LONGEST_TIMER_MS, Math.max(0, next - nowMs())));
  };
  const fire = () => {
    timer = undefined;
    armedAtMs = undefined;
    engine.tick();
    arm();
  };
  engine.onWakeChange(arm);
  arm();
  return () => {
    stopped = true;
    if (timer) clearTimeout(timer);
  };
}
