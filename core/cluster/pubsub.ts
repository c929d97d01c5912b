// The node's subscriber connection (a subscribed Redis connection can issue
// nothing else): one for every channel of the cluster, with the same bounds
// as the command connection. ioredis subscribes again after each reconnect;
// `ready` covers a first connect that failed. A message missed while the
// connection was down is not replayed: every user of a channel heals by
// other means (the config state is polled; a cleared source's counts age out).
import { type Redis, endOnAuthRefusal } from './redis.js'

export interface Subscriber {
  /** `f` runs with each message published on `channel` */
  on (channel: string, f: (message: string) => void): void
  close (): void
}

export function subscriber (redis: Redis): Subscriber {
  const sub = redis.duplicate()
  sub.on('error', () => {})
  endOnAuthRefusal(sub)
  const handlers = new Map<string, Array<(message: string) => void>>()
  sub.on('message', (channel: string, message: string) => {
    for (const f of handlers.get(channel) ?? []) f(message)
  })
  sub.on('ready', () => { if (handlers.size > 0) sub.subscribe(...handlers.keys()).catch(() => {}) })
  sub.connect().catch(() => {})
  return {
    on (channel, f) {
      const list = handlers.get(channel)
      if (list !== undefined) list.push(f)
      else {
        handlers.set(channel, [f])
        if (sub.status === 'ready') sub.subscribe(channel).catch(() => {})
      }
    },
    close: () => { sub.disconnect() },
  }
}
