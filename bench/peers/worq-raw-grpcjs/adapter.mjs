import { createGrpcJsTransport } from "@worq/client/grpc-js";
import { rawStubPeer } from "../worq-raw/adapter.mjs";

/** The raw generated stubs (as worq-raw) over createGrpcJsTransport, the transport @worq/client recommends for them. */
export const { openProducer, openWorker } = rawStubPeer((address) => createGrpcJsTransport({ address }));
