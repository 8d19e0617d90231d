import * as grpc from "@grpc/grpc-js";
import { Code, ConnectError, createClient } from "@connectrpc/connect";
import { createGrpcTransport } from "@connectrpc/connect-node";
import { afterEach, describe, expect, it } from "vitest";
import { AdminService } from "@worq/client/gen/worq/v1/admin_service_pb.js";
import { addConnectService } from "../../src/transport/grpc-adapter.js";

/** A real grpc-js server on 127.0.0.1 serving AdminService with `impl`, logging into `lines`. */
async function setup(impl: Parameters<typeof addConnectService<typeof AdminService>>[2]) {
  const lines: { message: string; fields: Record<string, unknown> }[] = [];
  const server = new grpc.Server();
  addConnectService(server, AdminService, impl, undefined, undefined, {}, { error: (message, fields) => lines.push({ message, fields }) });
  const port = await new Promise<number>((ok, fail) =>
    server.bindAsync("127.0.0.1:0", grpc.ServerCredentials.createInsecure(), (error, bound) => (error ? fail(error) : ok(bound))),
  );
  servers.push(server);
  return { client: createClient(AdminService, createGrpcTransport({ baseUrl: `http://127.0.0.1:${port}` })), lines };
}

const servers: grpc.Server[] = [];
afterEach(() => servers.splice(0).forEach((server) => server.forceShutdown()));

describe("the gRPC adapter's guard", () => {
  it.each([
    ["a handler that throws something no service translated", { listQueues: () => Promise.reject(new Error("secret cause")) }],
    [
      "an answer whose conversion to the message throws",
      {
        listQueues: async () =>
          ({
            get queues(): never {
              throw new Error("secret cause");
            },
          }) as never,
      },
    ],
  ])("%s: INTERNAL naming a request id, the cause logged under it, never sent", async (_, impl) => {
    const { client, lines } = await setup(impl);
    const error = await client.listQueues({}).then(
      () => undefined,
      (cause: unknown) => ConnectError.from(cause),
    );
    expect(error?.code).toBe(Code.Internal);
    const requestId = /^internal server error \(request id ([0-9a-f]{16})\)$/.exec(error!.rawMessage)?.[1];
    expect(requestId).toBeDefined();
    expect(lines).toHaveLength(1);
    expect(lines[0]).toMatchObject({ message: "internal error", fields: { rpc: "ListQueues", requestId } });
    // The server goes on serving.
    await expect(client.listQueues({})).rejects.toThrow(/internal server error/);
  });
});
