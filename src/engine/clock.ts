/** Source of the current time in epoch milliseconds. Injected so tests can move time by hand. */
export interface Clock {
  nowMs(): number;
}

export const systemClock: Clock = { nowMs: () => Date.now() };

/** A clock that only moves when told to; for tests and simulations. */
export class ManualClock implements Clock {
  constructor(private currentMs = Date.UTC(2026, 0, 1)) {}
  nowMs(): number {
    return this.currentMs;
  }
  advance(ms: number): number {
    this.currentMs += ms;
    return this.currentMs;
  }
  set(ms: number): void {
    this.currentMs = ms;
  }
}
