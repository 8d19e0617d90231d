/**
 * A Map that holds at most `capacity` entries: setting one more forgets the oldest set. For
 * what a door remembers to route or report a job faster (a reservation, a lease, where a job
 * went), which a client that never comes back must not grow without end.
 */
export class BoundedMap<K, V> extends Map<K, V> {
  constructor(private readonly capacity: number) {
    super();
  }

  override set(key: K, value: V): this {
    super.set(key, value);
    if (this.size > this.capacity) this.delete(this.keys().next().value!);
    return this;
  }
}
