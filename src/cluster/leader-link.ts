import * as grpc from "@grpc/grpc-js";

/** Where a follower reaches the leader. */
export interface LeaderAddress {
  nodeId: string;
  grpcAddress: string;
  httpAddress: string;
  /** Its Faktory and Workq ports (host:port), when it serves them. */
  faktoryAddress?: string;
  workqAddress?: string;
}

/** TLS of the links to the leader: whom to trust, and the certificate to present (mutual TLS). */
export interface LinkTls {
  /** CA bundle the leader's certificate must chain to (--cluster-ca). */
  ca: Buffer;
  cert: Buffer;
  key: Buffer;
}

/**
 * A leader allows LIMITS.maxStreamsPerConnection streams per connection, and a follower sends
 * every call of all its clients to the leader: several connections, each call on the one with
 * the fewest calls open, keep it under that cap.
 */
const CONNECTIONS = 4;

/** A follower's gRPC connections to the current leader. */
export class LeaderLink {
  private readonly clients: { client: grpc.Client; open: number }[];

  constructor(
    readonly leader: LeaderAddress,
    tls: LinkTls | undefined,
    maxMessageBytes: number,
  ) {
    const credentials = tls ? grpc.credentials.createSsl(tls.ca, tls.key, tls.cert) : grpc.credentials.createInsecure();
    this.clients = Array.from({ length: CONNECTIONS }, () => ({
      client: new grpc.Client(leader.grpcAddress, credentials, {
        "grpc.max_send_message_length": maxMessageBytes,
        "grpc.max_receive_message_length": maxMessageBytes,
        "grpc.keepalive_time_ms": 10_000,
        "grpc.keepalive_timeout_ms": 10_000,
        "grpc.keepalive_permit_without_calls": 1,
        // Without it grpc-js shares one connection between clients of equal options.
        "grpc.use_local_subchannel_pool": 1,
      }),
      open: 0,
    }));
  }

  /** Runs `start` on the least busy connection; `start` returns a call that ends with a 'status' event. */
  call<C extends grpc.Call>(start: (client: grpc.Client) => C): C {
    let entry = this.clients[0]!;
    for (const candidate of this.clients) if (candidate.open < entry.open) entry = candidate;
    entry.open++;
    const call = start(entry.client);
    call.once("status", () => entry.open--);
    return call;
  }

  close(): void {
    this.clients.forEach(({ client }) => client.close());
  }
}
