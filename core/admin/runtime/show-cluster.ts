// `show cluster` on the runtime socket, in `show info`'s "Name: value" form:
// this node, Redis's health, the live nodes, the last sync.
import type { ClusterStatus } from '../../cluster/status.js'
import type { AdminContext } from '../context.js'

function ago (ms: number): string {
  return ms === 0 ? 'never' : `${new Date(ms).toISOString()} (${((Date.now() - ms) / 1000).toFixed(1)}s ago)`
}

export function clusterLines (s: ClusterStatus): string[] {
  return [
    `Node: ${s.node}`,
    `Redis: ${s.redis}`,
    `Redis_address: ${s.redisAddress === '' ? '-' : s.redisAddress}`,
    `Redis_up: ${s.redisUp ? 1 : 0}`,
    `Redis_downs: ${s.redisDowns}`,
    `Redis_ups: ${s.redisUps}`,
    `Redis_slow_replies: ${s.redisSlowReplies}`,
    `Redis_errors: ${s.redisErrors}`,
    `Nodes: ${s.nodes.length}`,
    `Members: ${s.nodes.join(' ')}`,
    `Last_heartbeat: ${ago(s.lastHeartbeat)}`,
    `Last_sync: ${ago(s.lastSync)}`,
    `Sync_seconds: ${s.syncSeconds.toFixed(6)}`,
    `Sync_sources: ${s.syncSources}`,
    `Refused_cluster: ${s.refusedCluster}`,
    `Refused_local: ${s.refusedLocal}`,
    `Refused_unavailable: ${s.refusedUnavailable}`,
  ]
}

export function showCluster (ctx: AdminContext): string[] {
  const s = ctx.cluster()
  return s === null ? ['Cluster mode is off (no [cluster] section in the configuration).'] : clusterLines(s)
}

/** The `cluster` block of /api/overview (null without [cluster]). */
export function clusterOverview (ctx: Pick<AdminContext, 'cluster'>): object | null {
  const s = ctx.cluster()
  if (s === null) return null
  return {
    node: s.node,
    redis: s.redis,
    redisAddress: s.redisAddress,
    redisUp: s.redisUp,
    nodes: s.nodes,
    lastSync: s.lastSync === 0 ? null : new Date(s.lastSync).toISOString(),
    lastHeartbeat: s.lastHeartbeat === 0 ? null : new Date(s.lastHeartbeat).toISOString(),
    syncSeconds: s.syncSeconds,
    refused: { cluster: s.refusedCluster, local: s.refusedLocal, unavailable: s.refusedUnavailable },
  }
}
