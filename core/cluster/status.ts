// What the management surfaces show of the cluster (`show cluster`, the
// `cluster` block of /api/overview, the lb_cluster_* metrics).
export interface ClusterStatus {
  /** this node's name */
  readonly node: string
  /** the Redis URL, password redacted */
  readonly redis: string
  readonly redisUp: boolean
  /** live node names at the last heartbeat */
  readonly nodes: readonly string[]
  /** ms since the epoch of the last successful rate sync and heartbeat (0 = none yet) */
  readonly lastSync: number
  readonly lastHeartbeat: number
  /** seconds the last rate sync took */
  readonly syncSeconds: number
  /** sources exchanged at the last rate sync */
  readonly syncSources: number
  /** 429 of cluster-scope limits decided with the cluster's counts / on the local share (Redis down) */
  readonly refusedCluster: number
  readonly refusedLocal: number
  /** times Redis went from reachable to unreachable */
  readonly redisDowns: number
}

/** The cluster as seen by management: null without [cluster]. */
export type ClusterView = () => ClusterStatus | null
