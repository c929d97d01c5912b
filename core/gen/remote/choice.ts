// The choice of a model server for a model, the one rule for the control plane
// (RemoteRegistry.pick) and a data-plane worker that admits a request itself
// (core/gen/edge/link.ts pick), each over its own view of the servers: among
// the usable ones, one where the model is loaded, then the one with the fewest
// requests in flight for it; equals take turns (the search starts at `start`).

/** The index (0..n-1) of the server to ask, or -1 when none is usable. */
export function chooseServer (n: number, start: number, usable: (i: number) => boolean, loaded: (i: number) => boolean, inFlight: (i: number) => number): number {
  let best = -1
  let bestLoaded = false
  let bestLoad = Infinity
  for (let k = 0; k < n; k++) {
    const i = (start + k) % n
    if (!usable(i)) continue
    const l = loaded(i)
    const f = inFlight(i)
    if (best < 0 || (l && !bestLoaded) || (l === bestLoaded && f < bestLoad)) {
      best = i
      bestLoaded = l
      bestLoad = f
    }
  }
  return best
}
