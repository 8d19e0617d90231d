/**
 * A node's /metrics with its partitions' own (docs/scale-out.md): each partition's server
 * keeps its registry (queues, RPCs, store writes, its process), and the node shows them all
 * in one Prometheus text exposition, every sample labelled with its `partition`, each
 * metric's HELP and TYPE once. Prometheus scraping every node then sees the whole cluster,
 * per node and per partition.
 */

/** What one partition's server shows on /metrics (Prometheus text). */
export interface PartitionMetrics {
  partition: number;
  text: string;
}

/** A node's read of its partitions' figures: those that answered, and the sources (an engine, a partition's server) that did not. */
export interface MetricsRead {
  parts: PartitionMetrics[];
  /** Each source that did not answer, named, with why ("engine 1: did not answer within 2000 ms"). */
  unread: string[];
}

/** Where a node reads some of its partitions' figures from. */
export interface MetricsSource {
  /** Named in `unread` and the log when it does not answer ("engine 1", "partition 3"). */
  name: string;
  read(): Promise<MetricsRead>;
}

/**
 * Reads every source at once; one that fails or is late is named in `unread` and the
 * others' figures kept, so one stuck engine costs a scrape its figures, not the whole scrape.
 */
export async function readMetrics(sources: readonly MetricsSource[]): Promise<MetricsRead> {
  const answers = await Promise.allSettled(sources.map((source) => source.read()));
  const read: MetricsRead = { parts: [], unread: [] };
  answers.forEach((answer, i) => {
    if (answer.status === "rejected")
      read.unread.push(`${sources[i]!.name}: ${(answer.reason as Error)?.message ?? String(answer.reason)}`);
    else {
      read.parts.push(...answer.value.parts);
      read.unread.push(...answer.value.unread);
    }
  });
  return read;
}

/** One metric family of an exposition: its HELP and TYPE lines, then its samples. */
interface Family {
  help?: string;
  type?: string;
  samples: string[];
}

/** The partitions' expositions (Prometheus text format 0.0.4) as one, each sample labelled. */
export function mergePartitionMetrics(parts: readonly PartitionMetrics[]): string {
  const families = new Map<string, Family>();
  const familyOf = (name: string) => {
    let family = families.get(name);
    if (!family) families.set(name, (family = { samples: [] }));
    return family;
  };
  for (const { partition, text } of parts) {
    // A histogram's or summary's samples (_bucket, _sum, _count) follow their family's TYPE line.
    let current: string | undefined;
    for (const line of text.split("\n")) {
      if (line === "") continue;
      const meta = /^# (HELP|TYPE) (\S+) /.exec(line);
      if (meta) {
        const family = familyOf((current = meta[2]!));
        if (meta[1] === "HELP") family.help ??= line;
        else family.type ??= line;
        continue;
      }
      if (line.startsWith("#")) continue;
      const name = /^[a-zA-Z_:][a-zA-Z0-9_:]*/.exec(line)?.[0];
      if (!name) continue;
      const owner = current !== undefined && name.startsWith(current) ? current : name;
      familyOf(owner).samples.push(withPartition(line, name, partition));
    }
  }
  const lines: string[] = [];
  for (const family of families.values()) {
    if (family.help) lines.push(family.help);
    if (family.type) lines.push(family.type);
    lines.push(...family.samples);
  }
  return lines.length === 0 ? "" : `${lines.join("\n")}\n`;
}

/** A sample line with `partition="<i>"` as its first label. */
function withPartition(line: string, name: string, partition: number): string {
  const rest = line.slice(name.length);
  const label = `partition="${partition}"`;
  if (rest.startsWith("{}")) return `${name}{${label}}${rest.slice(2)}`;
  return rest.startsWith("{") ? `${name}{${label},${rest.slice(1)}` : `${name}{${label}}${rest}`;
}
