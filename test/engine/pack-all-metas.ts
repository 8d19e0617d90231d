// Imported first by packed-metas.test.ts: every engine built by the suites it imports holds
// each waiting job's meta packed (unpackedMetaLimit 0), see helpers.ts.
(globalThis as { worqUnpackedMetaLimit?: number }).worqUnpackedMetaLimit = 0;
