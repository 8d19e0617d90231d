/**
 * Runs async tasks one at a time per key, in call order; tasks of different keys run freely.
 * The engine takes one per (queue, priority) level for the work that reads cold jobs from
 * the store and then acts on what it read (Engine.pageIn, cancel and delete of a cold job):
 * without it a job cancelled while cold could be paged in from an older read and run.
 */
export class KeyedLock {
  private readonly tails = new Map<string, Promise<unknown>>();

  run<T>(key: string, task: () => Promise<T>): Promise<T> {
    const previous = this.tails.get(key) ?? Promise.resolve();
    const result = previous.then(task, task);
    const tail = result.then(
      () => {},
      () => {},
    );
    this.tails.set(key, tail);
    void tail.then(() => {
      if (this.tails.get(key) === tail) this.tails.delete(key);
    });
    return result;
  }
}
