/** What `Outbox.next` resolves to besides an item. */
export type OutboxWait = { kind: "timeout" } | { kind: "aborted" };

/**
 * A queue between the engine (which pushes synchronously) and one async consumer (a Lease
 * stream's generator), with a wait that ends on a timeout (for keepalives) or an abort.
 * It holds at most the worker's credits worth of job messages plus control messages.
 */
export class Outbox<T> {
  private readonly items: T[] = [];
  private wake: (() => void) | undefined;

  /** Items waiting to be taken. */
  get size(): number {
    return this.items.length;
  }

  push(item: T): void {
    this.items.push(item);
    this.wake?.();
  }

  async next(timeoutMs: number, signal: AbortSignal): Promise<{ kind: "item"; item: T } | OutboxWait> {
    if (this.items.length === 0 && !signal.aborted) {
      await new Promise<void>((resolve) => {
        const done = () => {
          clearTimeout(timer);
          signal.removeEventListener("abort", done);
          this.wake = undefined;
          resolve();
        };
        const timer = setTimeout(done, timeoutMs);
        signal.addEventListener("abort", done);
        this.wake = done;
      });
    }
    if (signal.aborted) return { kind: "aborted" };
    const item = this.items.shift();
    return item === undefined ? { kind: "timeout" } : { kind: "item", item };
  }
}
