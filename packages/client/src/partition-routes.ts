import { createClient, type Client } from "@connectrpc/connect";
import { AdminService, type GetServerInfoResponse } from "./gen/worq/v1/admin_service_pb.js";
import { ProducerService } from "./gen/worq/v1/producer_service_pb.js";
import { GrpcLink } from "./grpc-link.js";
import { keyedPartition, partitionOfId, placementKey, queuePartitions, SpreadTurns, type PlacementKeys } from "./partition.js";
import { createWorqTransport, type ConnectionOptions } from "./transport.js";

/** The generated clients of one partition's server: the calls that name a job or batch go there. */
export interface PartitionServices {
  producer: Client<typeof ProducerService>;
  admin: Client<typeof AdminService>;
}

/** One partition server's connections: the hot-path link and the generated clients, each made on first use. */
interface PartitionServer {
  options: ConnectionOptions;
  link?: GrpcLink;
  services?: PartitionServices;
  closeServices?: () => void;
}

/** The queue a job without one goes to (the server's default). */
const DEFAULT_QUEUE = "default";

/**
 * Which server takes each partition's calls on a partitioned cluster: the partition map the
 * cluster publishes in server info (GetServerInfo.partitions), read once before the first
 * routed call and again whenever a call finds a partition gone (refresh). A partition with
 * no owner known, and everything on a server that is not partitioned, goes to the address
 * the client was given, whose node routes it.
 */
export class PartitionRoutes {
  private count = 0;
  private addresses: (string | undefined)[] = [];
  /** The spread queues, by name: over how many partitions each. */
  private spread = new Map<string, number>();
  /** Where the next job of a spread queue without a placement key goes, in turn. */
  private readonly turns = new SpreadTurns();
  /** By address: a partition's server, as long as this client runs. */
  private readonly servers = new Map<string, PartitionServer>();
  private read = false;
  private loading: Promise<void> | undefined;
  private closed = false;

  constructor(
    private readonly options: ConnectionOptions,
    private readonly readMap: () => Promise<GetServerInfoResponse>,
  ) {}

  /** Settles once the map has been read (at once after the first read). */
  ready(): Promise<void> {
    return this.read ? DONE : this.refresh();
  }

  /** Reads the map again (one read at a time; callers at once share it). */
  refresh(): Promise<void> {
    return (this.loading ??= this.load().finally(() => (this.loading = undefined)));
  }

  /** Whether the map has been read once (routing is synchronous from then on). */
  get loaded(): boolean {
    return this.read;
  }

  /** The partition count, 0 when the server is not partitioned (or the map could not be read). */
  get partitionCount(): number {
    return this.count;
  }

  /** The partitions `queue` lives in: its home, or a spread queue's (empty when the server is not partitioned). */
  partitionsOfQueue(queue: string | undefined): number[] {
    if (this.count <= 1) return [];
    const name = queue || DEFAULT_QUEUE;
    return queuePartitions(name, this.count, this.spread.get(name));
  }

  /**
   * The partition a new job of `queue` goes to, as the server places it (`undefined` when the
   * server is not partitioned): a spread queue's job by its placement key (unique, debounce,
   * group or idempotency key), or else to each of the queue's partitions in turn.
   */
  partitionOfJob(queue: string | undefined, keys: PlacementKeys = {}): number | undefined {
    const partitions = this.partitionsOfQueue(queue);
    if (partitions.length <= 1) return partitions[0];
    const key = placementKey(keys);
    return key ? keyedPartition(partitions, key) : partitions[this.turns.next(queue || DEFAULT_QUEUE) % partitions.length];
  }

  partitionOfJid(jid: string): number | undefined {
    return this.count > 1 ? partitionOfId(jid, this.count) : undefined;
  }

  /** The link to `partition`'s own server; undefined when none is known (the node routes it). */
  linkOf(partition: number | undefined): GrpcLink | undefined {
    const server = this.serverOf(partition);
    return server && (server.link ??= new GrpcLink(server.options));
  }

  /** The generated clients of `partition`'s own server; undefined when none is known (the node routes it). */
  servicesOf(partition: number | undefined): PartitionServices | undefined {
    const server = this.serverOf(partition);
    if (!server) return undefined;
    if (!server.services) {
      const { transport, close } = createWorqTransport(server.options);
      server.services = { producer: createClient(ProducerService, transport), admin: createClient(AdminService, transport) };
      server.closeServices = close;
    }
    return server.services;
  }

  /** Closes what is open to the partitions' servers; from then on every call goes to the node's address (closed too). */
  close(): void {
    this.closed = true;
    for (const server of this.servers.values()) {
      server.link?.shutdown();
      server.closeServices?.();
    }
    this.servers.clear();
  }

  /** What is open to `partition`'s own server (made on first use), with the scheme and TLS the client was given. */
  private serverOf(partition: number | undefined): PartitionServer | undefined {
    const address = partition === undefined || this.closed ? undefined : this.addresses[partition];
    if (address === undefined) return undefined;
    let server = this.servers.get(address);
    if (!server) {
      const scheme = /^https:\/\//i.test(this.options.address) ? "https://" : "";
      server = { options: { ...this.options, address: `${scheme}${address}` } };
      this.servers.set(address, server);
    }
    return server;
  }

  private async load(): Promise<void> {
    try {
      const info = await this.readMap();
      const addresses: (string | undefined)[] = [];
      for (const owner of info.partitions) if (owner.grpcAddress) addresses[owner.index] = owner.grpcAddress;
      [this.count, this.addresses] = [info.partitionCount, addresses];
      this.spread = new Map(info.spreadQueues.map((spread) => [spread.queue, spread.partitions]));
    } catch {
      // A server too old to publish a map, or a token without the right to read it: the
      // address given routes everything, as it does on a server that is not partitioned.
    }
    this.read = true;
  }
}

const DONE = Promise.resolve();
