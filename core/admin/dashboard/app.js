// The dashboard page: every POLL_MS it reads the control plane's per-second
// history (/api/lb/history: the last 15 minutes, so a page opened late shows
// what led to now), the per-server detail (/api/lb/servers), the generation
// service's model servers and budgets (/api/lb/generation) and the Traefik
// API (entry points, routers, middlewares), and draws them. Plain browser
// JavaScript, no build step and no external assets (the page must work with
// no network beyond this listener).
'use strict'

const POLL_MS = 2000
const HISTORY_POINTS = 900 // the control plane keeps 900 one-second points
const MIN_WINDOW = 60 // seconds: a short history is drawn over a minute, not squeezed into 15
let windowPts = MIN_WINDOW

function esc (s) {
  return String(s).replace(/[&<>"']/g, (c) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' }[c]))
}

function fmt (v) {
  return v >= 100 ? v.toFixed(0) : v >= 10 ? v.toFixed(1) : v.toFixed(2)
}

function css (name) {
  return getComputedStyle(document.documentElement).getPropertyValue(name).trim()
}

/** A line chart of one or more series over the window (windowPts seconds), right-aligned (the last point is now), scaled to the largest value. */
function chart (id, series, colors) {
  const c = document.getElementById(id)
  const g = c.getContext('2d')
  const w = c.width
  const h = c.height
  g.clearRect(0, 0, w, h)
  const max = Math.max(1e-9, ...series.flat())
  g.strokeStyle = '#e4e6ea'
  g.fillStyle = '#69707d'
  g.font = '11px sans-serif'
  for (let i = 0; i <= 2; i++) {
    const y = 4 + (h - 12) * i / 2
    g.beginPath(); g.moveTo(34, y); g.lineTo(w, y); g.stroke()
    g.fillText(fmt(max * (1 - i / 2)), 0, y + 4)
  }
  series.forEach((pts, k) => {
    g.strokeStyle = css(colors[k])
    g.lineWidth = 1.5
    g.beginPath()
    const offset = windowPts - pts.length
    pts.forEach((v, i) => {
      const x = 34 + (w - 36) * (offset + i) / (windowPts - 1)
      const y = 4 + (h - 12) * (1 - v / max)
      if (i === 0) g.moveTo(x, y); else g.lineTo(x, y)
    })
    g.stroke()
  })
  c.dataset.points = String(series[0].length)
  c.dataset.last = series.map((s) => (s.length ? fmt(s[s.length - 1]) : '')).join(',')
  c.dataset.max = series.map((s) => fmt(Math.max(0, ...s))).join(',')
}

/** The mean of the last n points (the headline numbers smooth over a few seconds). */
function recent (pts, n = 5) {
  const xs = pts.slice(-n)
  return xs.length === 0 ? 0 : xs.reduce((a, b) => a + b, 0) / xs.length
}

function renderHistory (hist) {
  const s = hist.series
  windowPts = Math.min(HISTORY_POINTS, Math.max(MIN_WINDOW, s.requests.length))
  const span = windowPts >= 120 ? `−${Math.round(windowPts / 60)} min` : `−${windowPts} s`
  for (const el of document.querySelectorAll('.axis span:first-child')) el.textContent = span
  chart('rate-chart', [s.requests], ['--line'])
  chart('error-chart', [s.errors4xx, s.errors5xx], ['--p95', '--down'])
  chart('latency-chart', [s.meanMs, s.p95Ms], ['--line', '--p95'])
  chart('conn-chart', [s.connections, s.inflight], ['--line', '--nolb'])
  document.getElementById('rate').textContent = fmt(recent(s.requests))
  document.getElementById('errors').textContent = `${fmt(recent(s.errors4xx))} / ${fmt(recent(s.errors5xx))}`
  document.getElementById('latency').textContent = `${fmt(recent(s.meanMs))} / ${fmt(recent(s.p95Ms))}`
  document.getElementById('conns').textContent = `${s.connections.at(-1) ?? 0} / ${s.inflight.at(-1) ?? 0}`
}

function renderServers (servers) {
  let last = ''
  document.querySelector('#servers tbody').innerHTML = servers.map((s) => {
    const head = s.service === last ? '' : `<tr><td class="svc" colspan="10">${esc(s.service)}</td></tr>`
    last = s.service
    const state = s.state === 'no check' ? 'no-check' : s.state
    const check = s.check === null ? 'not checked' : `${s.check.status}${s.check.code > 0 ? ` ${s.check.code}` : ''} in ${s.check.ms} ms`
    const weight = s.weight === s.initialWeight ? String(s.weight) : `${s.weight} (of ${s.initialWeight})`
    return `${head}<tr class="server" data-service="${esc(s.service)}" data-server="${esc(s.server)}" data-state="${esc(s.state)}" data-rate="${s.rate}"
      data-share="${s.share}" data-requests="${s.requests}" data-errors="${s.errors}" data-inflight="${s.inflight}" data-weight="${s.weight}" data-check="${esc(check)}" data-reason="${esc(s.reason)}">
      <td>${esc(s.server)}<br><code>${esc(s.url)}</code></td><td><span class="badge ${esc(state)}">${esc(s.state)}</span></td>
      <td class="num">${esc(weight)}</td><td class="num">${s.rate}</td><td class="num">${s.share}%</td><td class="num">${s.requests}</td>
      <td class="num">${s.errors}${s.errorRate > 0 ? ` (${s.errorRate}/s)` : ''}</td><td class="num">${s.inflight}</td>
      <td>${esc(check)}</td><td class="reason">${esc(s.reason)}</td></tr>`
  }).join('')
}

/** `used` of `limit` (0 = no limit) */
function of (used, limit) {
  return limit > 0 ? `${used} / ${limit}` : String(used)
}

function renderGeneration (g) {
  document.getElementById('generation').hidden = !g.enabled
  if (!g.enabled) return
  const inFlight = g.servers.reduce((n, s) => n + s.inFlight, 0)
  document.getElementById('gen-queue').textContent = `${inFlight} in flight, ${g.queueDepth} queued locally`
  document.querySelector('#gen-models tbody').innerHTML = g.servers.map((s) => {
    const head = `<tr class="gen-server" data-server="${esc(s.name)}" data-up="${s.up}" data-inflight="${s.inFlight}"><td class="svc" colspan="6">${esc(s.name)}
      <span class="badge ${s.up ? 'UP' : 'DOWN'}">${s.up ? 'UP' : 'DOWN'}</span> <code>${esc(s.kind)} ${esc(s.url)}</code> ${s.inFlight} in flight
      <span class="reason">${esc(s.reason)}</span></td></tr>`
    return head + s.models.map((m) => `<tr class="gen-model" data-server="${esc(s.name)}" data-model="${esc(m.model)}" data-loaded="${m.loaded}"
      data-inflight="${m.inFlight}" data-requests="${m.requests}"><td>${esc(m.model)}</td><td>${m.loaded ? 'yes' : 'no'}</td>
      <td class="num">${m.inFlight}</td><td class="num">${m.requests}</td><td class="num">${m.inputTokens}</td><td class="num">${m.outputTokens}</td></tr>`).join('')
  }).join('')
  document.querySelector('#gen-budgets tbody').innerHTML = g.budgets.length === 0
    ? '<tr><td colspan="5">no keys configured</td></tr>'
    : g.budgets.map((b) => `<tr class="gen-budget" data-consumer="${esc(b.consumer)}" data-requests="${b.requests}"><td>${esc(b.consumer)}</td>
      <td class="num">${of(b.requests, b.limits.rpm)}</td><td class="num">${of(b.minuteTokens, b.limits.tpm)}</td>
      <td class="num">${of(b.dayTokens, b.limits.tpd)}</td><td class="num">${of(b.inFlight, b.limits.maxInFlight)}</td></tr>`).join('')
}

function renderEntryPoints (eps) {
  document.querySelector('#entrypoints tbody').innerHTML = eps.map((e) =>
    `<tr data-name="${esc(e.name)}"><td>${esc(e.name)}</td><td><code>${esc(e.address)}</code></td></tr>`).join('')
}

function renderRouters (routers) {
  document.querySelector('#routers tbody').innerHTML = routers.map((r) => `<tr data-name="${esc(r.name)}">
    <td>${esc(r.name)}</td><td><code>${esc(r.rule)}</code></td><td>${esc((r.entryPoints || []).join(', '))}</td>
    <td>${esc((r.middlewares || []).join(', ') || '—')}</td><td>${esc(r.service)}</td><td>${esc(r.status)}</td></tr>`).join('')
}

function renderMiddlewares (mws) {
  document.querySelector('#middlewares tbody').innerHTML = mws.length === 0
    ? '<tr><td colspan="4">none</td></tr>'
    : mws.map((m) => {
      const opts = m[Object.keys(m).find((k) => !['status', 'usedBy', 'name', 'provider', 'type'].includes(k))] || {}
      const text = Object.entries(opts).map(([k, v]) => `${k}=${typeof v === 'object' ? JSON.stringify(v) : v}`).join(', ')
      return `<tr data-name="${esc(m.name)}"><td>${esc(m.name)}</td><td>${esc(m.type)}</td><td><code>${esc(text)}</code></td><td>${esc((m.usedBy || []).join(', '))}</td></tr>`
    }).join('')
}

async function getJson (path) {
  const r = await fetch(path, { credentials: 'same-origin' })
  if (!r.ok) throw new Error(`${path}: ${r.status}`)
  return r.json()
}

async function poll () {
  try {
    const [hist, servers, eps, routers, mws, version, gen] = await Promise.all([
      getJson('../api/lb/history'), getJson('../api/lb/servers'), getJson('../api/entrypoints?per_page=1000'),
      getJson('../api/http/routers?per_page=1000'), getJson('../api/http/middlewares?per_page=1000'), getJson('../api/version'),
      getJson('../api/lb/generation'),
    ])
    renderHistory(hist)
    renderServers(servers)
    renderGeneration(gen)
    renderEntryPoints(eps)
    renderRouters(routers)
    renderMiddlewares(mws)
    document.getElementById('version').textContent = `version ${version.Version}, started ${version.startDate}`
    document.getElementById('updated').textContent = `updated ${new Date().toLocaleTimeString()}`
    document.getElementById('error').textContent = ''
  } catch (err) {
    document.getElementById('error').textContent = String(err.message || err)
  }
}

poll()
setInterval(poll, POLL_MS)
