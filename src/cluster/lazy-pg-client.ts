import pg from "pg";

/**
 * One PostgreSQL connection of a node's own, named (application_name), made on first use and
 * again after it fails: `get()` connects (running `setup` on the new connection), `drop()`
 * forgets a connection that failed, `close()` ends it for good. `onLost` hears of a
 * connection that failed after it was made.
 */
export class LazyPgClient {
  private client: Promise<pg.Client> | undefined;
  private closed = false;

  constructor(
    private readonly options: {
      url: string;
      applicationName: string;
      setup?: (client: pg.Client) => Promise<void>;
      onLost?: (error: Error) => void;
    },
  ) {}

  /** Whether a connection is made or being made. */
  get open(): boolean {
    return this.client !== undefined;
  }

  get(): Promise<pg.Client> {
    if (this.closed) return Promise.reject(new Error("the node is stopping"));
    this.client ??= (async () => {
      const client = new pg.Client({ connectionString: this.options.url, application_name: this.options.applicationName });
      client.on("error", (error) => {
        this.drop(client);
        this.options.onLost?.(error);
      });
      try {
        await client.connect();
        await this.options.setup?.(client);
      } catch (error) {
        void client.end().catch(() => {});
        throw error;
      }
      return client;
    })().catch((error: unknown) => {
      this.client = undefined;
      throw error;
    });
    return this.client;
  }

  /** Forgets `client` (a connection that failed): the next get() makes a new one. */
  drop(client: pg.Client): void {
    void this.client
      ?.then((current) => {
        if (current !== client) return;
        this.client = undefined;
        void current.end().catch(() => {});
      })
      .catch(() => {});
  }

  /** Ends the connection, if one is made; a later get() makes another unless closed for good. */
  async end(forGood = false): Promise<void> {
    if (forGood) this.closed = true;
    const client = this.client;
    this.client = undefined;
    await client?.then((c) => c.end()).catch(() => {});
  }
}
