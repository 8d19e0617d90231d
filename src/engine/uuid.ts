import { randomFillSync } from "node:crypto";
import { checkPartitionCount, withPartition } from "../model/partition.js";

/**
 * Random UUID v4 strings, like crypto.randomUUID() but written into a scratch buffer and read
 * out as one string: randomUUID builds each from some twenty string pieces, about 450 bytes
 * of garbage per id, and the server makes two ids per job (jid and lease id). Random bytes
 * come from the CSPRNG, 256 ids' worth at a time, as randomUUID's own cache does.
 */
const IDS_PER_FILL = 256;
const random = Buffer.alloc(16 * IDS_PER_FILL);
let offset = random.length;
const text = Buffer.alloc(36);
const HEX = Buffer.from("0123456789abcdef", "latin1");
/** Where each of the 16 bytes' two hex digits go in the 36 characters. */
const AT = [0, 2, 4, 6, 9, 11, 14, 16, 19, 21, 24, 26, 28, 30, 32, 34];
text[8] = text[13] = text[18] = text[23] = 0x2d; // "-"

export function randomUuidV4(): string {
  if (offset === random.length) {
    randomFillSync(random);
    offset = 0;
  }
  for (let i = 0; i < 16; i++) {
    let byte = random[offset + i]!;
    if (i === 6)
      byte = (byte & 0x0f) | 0x40; // version 4
    else if (i === 8) byte = (byte & 0x3f) | 0x80; // variant 10
    text[AT[i]!] = HEX[byte >> 4]!;
    text[AT[i]! + 1] = HEX[byte & 0x0f]!;
  }
  offset += 16;
  return text.toString("latin1", 0, 36);
}

/** The ids of an engine serving `partition`: plain UUID v4 with one partition, routable with more. */
export function partitionedIds(partition: { index: number; count: number } = { index: 0, count: 1 }): () => string {
  const { index, count } = partition;
  checkPartitionCount(count, "partition count");
  if (!Number.isInteger(index) || index < 0 || index >= count) throw new RangeError(`partition ${index} is not one of ${count}`);
  return count === 1 ? randomUuidV4 : () => withPartition(randomUuidV4(), index);
}
