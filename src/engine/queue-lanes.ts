import { PRIORITY_LEVELS, type PriorityLevel } from "../model/job.js";
import { ReadyQueue, type ReadyEntry } from "./ready-queue.js";

type IsCurrent = (jid: string, readySeq: number) => boolean;

/**
 * A FIFO of group keys, each at most once: whose turn it is at one priority level. A group
 * served goes to the back, so groups with ready jobs take turns (round-robin).
 */
class Turns {
  private groups: string[] = [];
  private head = 0;
  private readonly members = new Set<string>();
  get size(): number {
    return this.groups.length - this.head;
  }
  add(group: string): void {
    if (this.members.has(group)) return;
    this.members.add(group);
    this.groups.push(group);
  }
  /** The group at the front, taken off (put it back with `requeue`, or `drop` it). */
  next(): string {
    const group = this.groups[this.head++]!;
    if (this.head > 1024 && this.head * 2 > this.groups.length) {
      this.groups = this.groups.slice(this.head);
      this.head = 0;
    }
    return group;
  }
  requeue(group: string): void {
    this.groups.push(group);
  }
  drop(group: string): void {
    this.members.delete(group);
  }
}

/** What QueueLanes.take found: the job, and the lane it came from. */
export interface TakenJob {
  jid: string;
  lane: ReadyQueue;
}

/**
 * The ready jobs of one queue, as one lane (ReadyQueue) per group (JobSpec.group_key; "" the
 * default group). Strict priority across the whole queue; within a level, groups with ready
 * jobs take turns, one job each, so a group with a million jobs waiting does not hold back a
 * group with ten; FIFO within a group. A queue whose jobs carry no group has one lane and runs
 * exactly as a plain FIFO per level.
 */
export class QueueLanes {
  private readonly lanes = new Map<string, ReadyQueue>();
  private readonly turns: Turns[] = Array.from({ length: PRIORITY_LEVELS }, () => new Turns());

  /** The lane of `group`, created on first use. */
  lane(group: string): ReadyQueue {
    let lane = this.lanes.get(group);
    if (!lane) {
      lane = new ReadyQueue(group, (priority) => this.turns[priority]!.add(group));
      this.lanes.set(group, lane);
    }
    return lane;
  }

  /** The lane of `group`, if it has one. */
  find(group: string): ReadyQueue | undefined {
    return this.lanes.get(group);
  }

  /** Every lane. A lane is forgotten once it has nothing left (groups may be many and short-lived). */
  all(): IterableIterator<ReadyQueue> {
    return this.lanes.values();
  }

  /** Groups that have had a lane. */
  get laneCount(): number {
    return this.lanes.size;
  }

  /** Whether no level of any lane holds an entry or a cold job. */
  get isEmpty(): boolean {
    return this.turns.every((turns) => turns.size === 0);
  }

  /** Cold jobs of one group's lane. */
  coldOf(group: string): number {
    return this.lanes.get(group)?.cold ?? 0;
  }

  /** Cold jobs of every lane. */
  get cold(): number {
    let cold = 0;
    for (const lane of this.lanes.values()) cold += lane.cold;
    return cold;
  }

  /**
   * Removes and returns the next job: the highest priority level that has one in a group that
   * `admits`, that group being the next in turn at that level. A lane whose level has cold jobs
   * and nothing in memory is passed `paging` (page them in) and runs no lower level of its own
   * meanwhile (they must not run before its cold ones); other groups go on.
   */
  take(isCurrent: IsCurrent, admits: (group: string) => boolean, paging: (lane: ReadyQueue) => void): TakenJob | undefined {
    let waitingForPage: Set<string> | undefined;
    for (let priority = 0 as PriorityLevel; priority < PRIORITY_LEVELS; priority++) {
      const turns = this.turns[priority]!;
      for (let left = turns.size; left > 0; left--) {
        const group = turns.next();
        const lane = this.lanes.get(group);
        if (!lane) {
          turns.drop(group);
          continue;
        }
        if (waitingForPage?.has(group) || !admits(group)) {
          turns.requeue(group);
          continue;
        }
        const jid = lane.takeAt(priority, isCurrent);
        if (lane.hasAt(priority)) turns.requeue(group);
        else {
          turns.drop(group);
          if (lane.sizeBound === 0 && lane.cold === 0) this.lanes.delete(group);
        }
        if (lane.cold > 0) paging(lane);
        if (jid !== undefined) return { jid, lane };
        if (lane.coldAt(priority) > 0) (waitingForPage ??= new Set()).add(group);
      }
    }
    return undefined;
  }

  /**
   * Up to `limit` ready jobs after the position (priority, readySeq) when given, by priority
   * and then readySeq across groups: for listings (the order jobs of different groups start in
   * depends on the turns).
   */
  entriesAfter(after: { priority: number; readySeq: number } | undefined, limit: number, isCurrent: IsCurrent): ReadyEntry[] {
    if (this.lanes.size === 1) return this.lanes.values().next().value!.entriesAfter(after, limit, isCurrent);
    const all: ReadyEntry[] = [];
    for (const lane of this.lanes.values()) all.push(...lane.entriesAfter(after, limit, isCurrent));
    return all.sort((a, b) => a.priority - b.priority || a.readySeq - b.readySeq).slice(0, limit);
  }

  /** The jids of every ready job in memory, lane by lane. */
  *jids(isCurrent: IsCurrent): IterableIterator<string> {
    for (const lane of this.lanes.values()) yield* lane.jids(isCurrent);
  }

  /** The first job of each level of each lane. */
  fronts(isCurrent: IsCurrent): string[] {
    return [...this.lanes.values()].flatMap((lane) => lane.fronts(isCurrent));
  }
}
