/**
 * FAN_OUT collection: the jobs a parent spawned (submitted with its jid as `parent_jid`),
 * waited for until every one is finished, then listed with their results, oldest first.
 */
import { invalid, WorqError } from "../model/errors.js";
import { isTerminal, type JobView } from "../model/job.js";
import type { EngineCore } from "./engine-core.js";
import type { ChildCursor } from "./store.js";
import { checkJid, getJob, notFound, waitFinished, MAX_WAIT_MS } from "./read-views.js";

/** Children read from the store per round trip while looking for one not finished. */
const SCAN_PAGE = 1000;
const DEFAULT_PAGE_SIZE = 1000;
const MAX_PAGE_SIZE = 10_000;

export interface ChildrenPage {
  children: JobView[];
  /** Every child spawned so far is finished. */
  finished: boolean;
  /** Where the next page starts; undefined after the last. */
  next?: ChildCursor;
}

/**
 * Waits up to `waitMs` until every child of `parentJid` spawned so far is finished, then
 * answers one page of them (results included) after `after`. When the wait runs out the page
 * is answered as the children are, with `finished` false. Children spawned while it waits are
 * waited for too. NOT_FOUND for an unknown parent.
 */
export async function collectChildren(
  core: EngineCore,
  parentJid: string,
  waitMs: number,
  signal: AbortSignal | undefined,
  pageSize = DEFAULT_PAGE_SIZE,
  after?: ChildCursor,
): Promise<ChildrenPage> {
  checkJid(parentJid, "parent_jid");
  if (!(waitMs >= 0 && waitMs <= MAX_WAIT_MS)) invalid("wait_timeout", `must be between 0 and ${MAX_WAIT_MS / 1000} s`);
  const size = pageSize || DEFAULT_PAGE_SIZE;
  if (!Number.isInteger(size) || size < 1 || size > MAX_PAGE_SIZE) invalid("page_size", `must be at most ${MAX_PAGE_SIZE}`);
  if (!core.live.has(parentJid) && !core.finishing.has(parentJid) && !(await core.store.getMeta(parentJid))) throw notFound(parentJid);
  const finished = await waitForChildren(core, parentJid, core.clock.nowMs() + waitMs, signal);
  const metas = await core.store.childrenOf(parentJid, after, size + 1);
  const page = metas.slice(0, size);
  const children = (
    await Promise.all(
      page.map((meta) => getJob(core, meta.jid).catch((error: unknown) => (isNotFound(error) ? undefined : Promise.reject(error)))),
    )
  ).filter((view): view is JobView => view !== undefined);
  const last = page.at(-1);
  return { children, finished, ...(metas.length > size && last ? { next: { createdAtMs: last.createdAtMs, jid: last.jid } } : {}) };
}

/** Whether every child was finished before `deadlineMs` (waiting for them one at a time). */
async function waitForChildren(core: EngineCore, parentJid: string, deadlineMs: number, signal: AbortSignal | undefined): Promise<boolean> {
  // Children before `from` were finished when looked at: the next look starts there.
  let from: ChildCursor | undefined;
  for (;;) {
    let next = await firstUnfinished(core, parentJid, from);
    // One more look from the start before saying "finished": an operator may have retried a
    // child that was finished when it was passed.
    if (!next && from !== undefined) next = await firstUnfinished(core, parentJid, undefined);
    if (!next) return true;
    from = next.from;
    const leftMs = deadlineMs - core.clock.nowMs();
    if (leftMs <= 0) return false;
    try {
      await waitFinished(core, next.jid, leftMs, signal);
    } catch (error) {
      if (isNotFound(error)) continue; // deleted meanwhile: it no longer counts
      if (error instanceof WorqError && error.code === "WORQ_DEADLINE_EXCEEDED") return false;
      throw error;
    }
  }
}

/** The first child of `parentJid` at or after `from` that is not finished, and the cursor just before it. */
async function firstUnfinished(
  core: EngineCore,
  parentJid: string,
  from: ChildCursor | undefined,
): Promise<{ jid: string; from: ChildCursor | undefined } | undefined> {
  // Every child submitted so far is in a commit issued before this one resolves.
  await core.lastCommit.catch(() => {}); // a failed commit made the engine fatal; the reads below tell
  let after = from;
  for (;;) {
    const page = await core.store.childrenOf(parentJid, after, SCAN_PAGE);
    for (const stored of page) {
      // Memory is ahead of the store for a job whose change is still being written.
      const state = core.live.stateOf(stored.jid) ?? core.finishing.get(stored.jid)?.meta.state ?? stored.state;
      if (!isTerminal(state)) return { jid: stored.jid, from: after };
      after = { createdAtMs: stored.createdAtMs, jid: stored.jid };
    }
    if (page.length < SCAN_PAGE) return undefined;
  }
}

function isNotFound(error: unknown): boolean {
  return error instanceof WorqError && error.code === "WORQ_NOT_FOUND";
}
