import type { Logger } from "../log.js";
import type { Placement } from "./call-routes.js";
import type { LinkTls } from "./leader-link.js";

/**
 * How long opening a connection waits for its partition to be served again (a restart or
 * takeover) before it is refused: as long as a dead server's partitions take to be served
 * again, because Faktory's and Workq's clients take an error as final and do not retry it.
 */
const OWNER_WAIT_MS = 10_000;

/** A connection to a partition's port for a line protocol (Faktory's, Workq's). */
interface LineConnection {
  readonly closed: boolean;
  close(): void;
}

/** Where a node's line-protocol port finds each partition's port for that protocol. */
export interface LinePortRoutes {
  readonly placement: Placement;
  /** The partition a command that any may answer goes to. */
  anyPartition(): number;
  /** The port (host:port) of the server of `partition`; undefined while none serves it. */
  addressOf(partition: number): string | undefined;
  /** Re-reads who serves the partitions (one was not where it was); settles when read. */
  refresh(): Promise<void>;
}

/**
 * One client connection's connections to the partitions' ports, one per partition, opened
 * when a command first needs it and again after it closed (its server went away), waiting a
 * while for the partition to be served again. `refuse` makes the error a client is told.
 */
export class PartitionConnections<C extends LineConnection> {
  private readonly open = new Map<number, Promise<C>>();

  constructor(
    private readonly routes: LinePortRoutes,
    private readonly connect: (address: string) => Promise<C>,
    private readonly refuse: (message: string) => Error,
    private readonly log: Logger,
  ) {}

  get(partition: number): Promise<C> {
    const known = this.open.get(partition);
    if (known) {
      return known.then((connection) => {
        if (!connection.closed) return connection;
        if (this.open.get(partition) === known) this.open.delete(partition);
        return this.get(partition);
      });
    }
    const opening = this.dial(partition);
    this.open.set(partition, opening);
    opening.catch(() => {
      if (this.open.get(partition) === opening) this.open.delete(partition);
    });
    return opening;
  }

  /** Closes the connection to `partition`'s port, if one is open or opening (what is under way on it fails); the next get opens another. */
  close(partition: number): void {
    const known = this.open.get(partition);
    if (!known) return;
    this.open.delete(partition);
    known.then(
      (open) => open.close(),
      () => {},
    );
  }

  closeAll(): void {
    for (const connection of this.open.values()) {
      connection.then(
        (open) => open.close(),
        () => {},
      );
    }
    this.open.clear();
  }

  private async dial(partition: number): Promise<C> {
    const deadline = Date.now() + OWNER_WAIT_MS;
    for (;;) {
      const address = this.routes.addressOf(partition);
      if (address !== undefined) {
        try {
          return await this.connect(address);
        } catch (error) {
          this.log.debug("a connection to a partition's port failed", { partition, error: (error as Error).message });
          if (Date.now() >= deadline)
            throw this.refuse(`partition ${partition} cannot be reached now (${(error as Error).message}); try again`);
        }
      } else if (Date.now() >= deadline) {
        throw this.refuse(`partition ${partition} is not served now (a restart or takeover is under way); try again`);
      }
      await this.routes.refresh();
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
  }
}

/** What a node's line-protocol port (Faktory's, Workq's) routes by, beside its protocol's port options. */
export interface LineRouterOptions {
  routes: LinePortRoutes;
  /** TLS of the connections to the partitions' ports; unset = plaintext. */
  linkTls?: LinkTls;
}

/** What a node's line-protocol port is to its process. */
export interface LinePortRouter {
  port: number;
  close(): Promise<void>;
}

/**
 * One client connection's waits on several partitions at once (a FETCH or lease with nothing
 * to take): `ask` asks a partition's port to say, within `ms`, whether a job of `queues` is
 * ready, taking none. A wait cannot be taken back, so one still under way on a partition for
 * the same queues is waited on again by the next FETCH rather than asked twice (its answer
 * only wakes); one for other queues watches the wrong jobs, and `callOff` ends it (closing its
 * connection) before the new one is asked.
 */
export class ReadyWaits {
  private readonly running = new Map<number, { queues: string; wait: Promise<boolean> }>();

  constructor(
    private readonly ask: (partition: number, queues: readonly string[], ms: number) => Promise<boolean>,
    /** The longest wait one ask may carry (a longer one is asked again). */
    private readonly maxMs: number,
    /** Ends the wait under way on `partition` (its answer, if any, is no longer read). */
    private readonly callOff: (partition: number) => void,
  ) {}

  /** Resolves true once a partition of `groups` says a job of its queues is ready, false at the deadline. */
  anyReady(groups: ReadonlyMap<number, readonly string[]>, deadline: number): Promise<boolean> {
    if (groups.size === 0 || !(deadline > Date.now())) return Promise.resolve(false);
    return new Promise((resolve) => {
      let settled = false;
      const settle = (ready: boolean) => {
        if (settled) return;
        settled = true;
        resolve(ready);
      };
      let open = groups.size;
      const none = () => {
        if (--open === 0) settle(false);
      };
      for (const [partition, queues] of groups) {
        this.waitOn(partition, queues, deadline, () => settled).then((ready) => (ready ? settle(true) : none()), none);
      }
    });
  }

  /** Waits on `partition` until a job of `queues` is ready (true), the deadline passes or `over` says the caller has its answer (false). */
  private async waitOn(partition: number, queues: readonly string[], deadline: number, over: () => boolean): Promise<boolean> {
    const key = queues.join(" ");
    for (;;) {
      const current = this.running.get(partition);
      let wait: Promise<boolean>;
      if (current?.queues === key) wait = current.wait;
      else {
        if (current) {
          this.running.delete(partition);
          this.callOff(partition);
        }
        wait = this.start(partition, queues, key, deadline);
      }
      if (await wait) return true;
      if (over() || Date.now() >= deadline) return false;
    }
  }

  private start(partition: number, queues: readonly string[], key: string, deadline: number): Promise<boolean> {
    const wait = this.ask(partition, queues, Math.max(1, Math.min(this.maxMs, deadline - Date.now())));
    const entry = { queues: key, wait };
    this.running.set(partition, entry);
    void wait
      .finally(() => {
        if (this.running.get(partition) === entry) this.running.delete(partition);
      })
      .catch(() => {});
    return wait;
  }
}
