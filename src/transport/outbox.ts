/** What `Outbox.next` resolves to besides an item. */
export type OutboxWait = { kind: "timeout" } | { kind: "aborted" };

/**
 * A queue between the engine (which pushes synchronously) and one async consumer (a Lease
 * stream's generator), with a wait that ends after `idleMs` without an item (for keepalives)
 * or when `signal` aborts. It holds at most the worker's credits worth of job messages plus
 * control messages.
 *
 * One timer and one abort listener serve every wait, for the outbox's life: a timer and a
 * listener made and dropped per wait cost more than the rest of a stream message's way out,
 * and a waiting worker's push is on the pickup path.
 */
export class Outbox<T> {
  private readonly items: T[] = [];
  private wake: (() => void) | undefined;
  private timer: NodeJS.Timeout | undefined;

  constructor(
    private readonly idleMs: number,
    private readonly signal: AbortSignal,
  ) {
    signal.addEventListener(
      "abort",
      () => {
        clearTimeout(this.timer);
        this.wake?.();
      },
      { once: true },
    );
  }

  /** Items waiting to be taken. */
  get size(): number {
    return this.items.length;
  }

  push(item: T): void {
    this.items.push(item);
    this.wake?.();
  }

  async next(): Promise<{ kind: "item"; item: T } | OutboxWait> {
    if (this.items.length === 0 && !this.signal.aborted) {
      // Re-armed from now. A firing while nobody waits (between two waits) wakes no one.
      if (this.timer) this.timer.refresh();
      else this.timer = setTimeout(() => this.wake?.(), this.idleMs);
      await new Promise<void>((resolve) => (this.wake = resolve));
      this.wake = undefined;
    }
    if (this.signal.aborted) return { kind: "aborted" };
    const item = this.items.shift();
    return item === undefined ? { kind: "timeout" } : { kind: "item", item };
  }
}
