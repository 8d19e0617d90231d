/** A Lease stream as far as slots go: its worker id and the unreported leases it carries. */
export interface SlotHolder {
  readonly workerId: string;
  readonly held: Set<string>;
}

interface Slot {
  jid: string;
  workerId: string;
  /** The open stream the slot counts against; undefined while orphaned (stream gone). */
  holder: SlotHolder | undefined;
  /** Taken over by a later stream of the same worker id, which may be a new process. */
  adopted: boolean;
}

/**
 * Which worker slot each unreported lease occupies (docs/protocol.md, "a slot stays taken
 * until the worker reports"). A slot outlives its stream: when a stream ends, its slots
 * become orphans of its worker id, and the next stream that worker opens adopts them, so a
 * reconnecting worker with jobs still running is not pushed more than its credits.
 */
export class LeaseSlots {
  private readonly slots = new Map<string, Slot>();
  private readonly orphansByWorker = new Map<string, Set<string>>();

  /** Slots taken, orphans included. */
  get size(): number {
    return this.slots.size;
  }

  /** Records a lease delivered on `holder`'s stream. */
  take(leaseId: string, jid: string, holder: SlotHolder): void {
    this.slots.set(leaseId, { jid, workerId: holder.workerId, holder, adopted: false });
    holder.held.add(leaseId);
  }

  /** The job a lease's slot is for. */
  jidOf(leaseId: string): string | undefined {
    return this.slots.get(leaseId)?.jid;
  }

  /** The open stream that carries the lease's slot, if any. */
  holderOf(leaseId: string): SlotHolder | undefined {
    return this.slots.get(leaseId)?.holder;
  }

  /** Records a lease that has no stream (recovered after a restart). */
  addOrphan(leaseId: string, jid: string, workerId: string): void {
    this.slots.set(leaseId, { jid, workerId, holder: undefined, adopted: false });
    this.orphanSet(workerId).add(leaseId);
  }

  /** Frees the slot of a reported lease; true if it counted against an open stream. */
  release(leaseId: string): boolean {
    const slot = this.slots.get(leaseId);
    if (!slot) return false;
    this.slots.delete(leaseId);
    if (slot.holder) {
      slot.holder.held.delete(leaseId);
      return true;
    }
    this.removeOrphan(slot.workerId, leaseId);
    return false;
  }

  /**
   * At a lease's lapse: frees its slot unless the stream that received the job still holds
   * it (that worker may still run the job and will report it). An orphaned slot has no one
   * running it; an adopted one may belong to a restarted process that never knew the job.
   * Returns true when an open stream got a slot back.
   */
  releaseAtLapse(leaseId: string): boolean {
    const slot = this.slots.get(leaseId);
    if (!slot || (slot.holder && !slot.adopted)) return false;
    return this.release(leaseId);
  }

  /** The stream ended: its slots become orphans of its worker. Returns their leases. */
  detach(holder: SlotHolder): { leaseId: string; jid: string }[] {
    const detached: { leaseId: string; jid: string }[] = [];
    for (const leaseId of holder.held) {
      const slot = this.slots.get(leaseId);
      if (!slot) continue;
      slot.holder = undefined;
      this.orphanSet(holder.workerId).add(leaseId);
      detached.push({ leaseId, jid: slot.jid });
    }
    holder.held.clear();
    return detached;
  }

  /** A stream opened: it takes over the orphaned slots of its worker id. */
  adopt(holder: SlotHolder): void {
    const orphans = this.orphansByWorker.get(holder.workerId);
    if (!orphans) return;
    for (const leaseId of orphans) {
      const slot = this.slots.get(leaseId)!;
      slot.holder = holder;
      slot.adopted = true;
      holder.held.add(leaseId);
    }
    this.orphansByWorker.delete(holder.workerId);
  }

  private orphanSet(workerId: string): Set<string> {
    let set = this.orphansByWorker.get(workerId);
    if (!set) {
      set = new Set();
      this.orphansByWorker.set(workerId, set);
    }
    return set;
  }

  private removeOrphan(workerId: string, leaseId: string): void {
    const set = this.orphansByWorker.get(workerId);
    set?.delete(leaseId);
    if (set?.size === 0) this.orphansByWorker.delete(workerId);
  }
}
