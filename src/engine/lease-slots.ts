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

  /** Records a lease delivered on `holder`'s stream. */
  take(leaseId: string, jid: string, holder: SlotHolder): void {
    this.slots.set(leaseId, { jid, workerId: holder.workerId, holder });
    holder.held.add(leaseId);
  }

  /** Records a lease that has no stream (recovered after a restart). */
  addOrphan(leaseId: string, jid: string, workerId: string): void {
    this.slots.set(leaseId, { jid, workerId, holder: undefined });
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

  /** Drops the slot of a lapsed lease if no open stream carries it (no one runs it any more). */
  dropIfOrphan(leaseId: string): void {
    const slot = this.slots.get(leaseId);
    if (slot && !slot.holder) {
      this.slots.delete(leaseId);
      this.removeOrphan(slot.workerId, leaseId);
    }
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
      this.slots.get(leaseId)!.holder = holder;
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
