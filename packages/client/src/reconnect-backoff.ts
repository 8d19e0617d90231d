/**
 * Delays between reconnect attempts: exponential from `initialMs`, capped at `maxMs`, with
 * "equal jitter" (half fixed, half random) so that many workers do not reconnect in lockstep.
 */
export class ReconnectBackoff {
  private attempt = 0;

  constructor(
    private readonly initialMs = 100,
    private readonly maxMs = 5_000,
    private readonly random: () => number = Math.random,
  ) {}

  next(): number {
    const base = Math.min(this.maxMs, this.initialMs * 2 ** this.attempt);
    this.attempt++;
    return Math.round(base / 2 + (base / 2) * this.random());
  }

  reset(): void {
    this.attempt = 0;
  }
}
