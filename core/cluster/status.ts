// What the management surfaces show of the cluster (`show cluster`, the
// `cluster` block of /api/overview, the lb_cluster_* metrics).
export interface ClusterStatus {
  /** this node's name */
  readonly node: string
  /** the Redis URL, password redacted; with Sentinel, the master's name and the sentinels */
  readonly redis: string
  /** host:port of the Redis this node is connected to now ('' = none): with Sentinel, the master of the moment */
  readonly redisAddress: string
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
  /** times Redis was judged down after being reachable, and up again after being down */
  readonly redisDowns: number
  readonly redisUps: number
  /** Redis commands not answered within max_wait, and failed otherwise (refused, closed, error reply): each one, judged down or not */
  readonly redisSlowReplies: number
  readonly redisErrors: number
  /** 503 answered by failure_mode = "closed" limits while Redis was down */
  readonly refusedUnavailable: number
}

/** The cluster as seen by management: null without [cluster]. */
export type ClusterView = () => ClusterStatus | null
