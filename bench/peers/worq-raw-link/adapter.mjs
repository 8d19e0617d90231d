import { createWorqLinkTransport } from "@worq/client";
import { rawStubPeer } from "../worq-raw/adapter.mjs";

/** The raw generated stubs (as worq-raw) over createWorqLinkTransport: the TS library's own HTTP/2 link. */
export const { openProducer, openWorker } = rawStubPeer((address) => createWorqLinkTransport({ address }));
