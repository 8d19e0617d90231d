import type { Engine } from "./engine/engine.js";

export interface SwappableEngine {
  /** Stands for whichever engine is current: every method call goes to it. */
  readonly engine: Engine;
  current(): Engine;
  swap(next: Engine): void;
}

/**
 * An Engine reference whose target can be replaced. The services, the HTTP side and the
 * metrics hold `engine`, so after a storage failure (src/store-recovery.ts) an engine freshly
 * loaded from the store takes over without rebuilding them. Methods are bound to the engine
 * current at the time of the call.
 */
export function swappableEngine(initial: Engine): SwappableEngine {
  let target = initial;
  const engine = new Proxy({} as Engine, {
    get(_, property) {
      const value: unknown = Reflect.get(target, property, target);
      return typeof value === "function" ? (value as (...args: unknown[]) => unknown).bind(target) : value;
    },
  });
  return {
    engine,
    current: () => target,
    swap: (next) => {
      target = next;
    },
  };
}
