// The dashboard page: polls the dashboard API and /metrics on this listener
// every POLL_MS and draws the last HISTORY points of request rate, 5xx error
// rate and latency on canvases. Plain browser JavaScript, no build step and no
// external assets (the page must work with no network beyond this listener).
'use strict'

const POLL_MS = 2000
const HISTORY = 60
const history = { rate: [], errors: [], mean: [], p95: [] }
let previous = null

function esc (s) {
  return String(s).replace(/[&<>"']/g, (c) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' }[c]))
}

/** Parses Prometheus text into [{name, labels, value}] (only what this page needs). */
function parseMetrics (text) {
  const out = []
  for (const line of text.split('\n')) {
    if (line === '' || line[0] === '#') continue
    const m = /^([a-zA-Z_:][\w:]*)(\{(.*)\})? (\S+)$/.exec(line)
    if (m === null) continue
    const labels = {}
    for (const l of (m[3] || '').matchAll(/(\w+)="((?:[^"\\]|\\.)*)"/g)) labels[l[1]] = l[2]
    out.push({ name: m[1], labels, value: Number(m[4]) })
  }
  return out
}

/** Totals the page charts: requests, 5xx, duration sum and cumulative buckets over all entry points. */
function totals (samples) {
  const t = { requests: 0, errors: 0, sum: 0, count: 0, buckets: new Map() }
  for (const s of samples) {
    if (s.name === 'lb_entrypoint_requests_total') {
      t.requests += s.value
      if (/^5/.test(s.labels.code)) t.errors += s.value
    } else if (s.name === 'lb_entrypoint_request_duration_seconds_sum') t.sum += s.value
    else if (s.name === 'lb_entrypoint_request_duration_seconds_count') t.count += s.value
    else if (s.name === 'lb_entrypoint_request_duration_seconds_bucket') {
      const le = s.labels.le === '+Inf' ? Infinity : Number(s.labels.le)
      t.buckets.set(le, (t.buckets.get(le) || 0) + s.value)
    }
  }
  return t
}

/** p95 of the requests between two scrapes, from the bucket deltas (upper bound of the bucket). */
function p95 (prev, cur) {
  const les = [...cur.buckets.keys()].sort((a, b) => a - b)
  const total = cur.count - prev.count
  if (total <= 0) return 0
  for (const le of les) {
    if ((cur.buckets.get(le) - (prev.buckets.get(le) || 0)) >= 0.95 * total) return le === Infinity ? les[les.length - 2] * 1000 : le * 1000
  }
  return 0
}

function push (arr, v) {
  arr.push(v)
  if (arr.length > HISTORY) arr.shift()
}

/** A line chart of one or two series on a canvas, scaled to the largest value shown. */
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
    const y = 4 + (h - 20) * i / 2
    g.beginPath(); g.moveTo(30, y); g.lineTo(w, y); g.stroke()
    g.fillText(fmt(max * (1 - i / 2)), 0, y + 4)
  }
  series.forEach((pts, k) => {
    g.strokeStyle = colors[k]
    g.lineWidth = 2
    g.beginPath()
    pts.forEach((v, i) => {
      const x = 30 + (w - 32) * i / (HISTORY - 1)
      const y = 4 + (h - 20) * (1 - v / max)
      if (i === 0) g.moveTo(x, y); else g.lineTo(x, y)
    })
    g.stroke()
  })
  c.dataset.points = series.map((s) => s.length).join(',')
  c.dataset.last = series.map((s) => (s.length ? fmt(s[s.length - 1]) : '')).join(',')
}

function fmt (v) {
  return v >= 100 ? v.toFixed(0) : v >= 10 ? v.toFixed(1) : v.toFixed(2)
}

function renderRouters (routers) {
  document.querySelector('#routers tbody').innerHTML = routers.map((r) => `<tr data-name="${esc(r.name)}">
    <td>${esc(r.name)}</td><td><code>${esc(r.rule)}</code></td><td>${esc((r.entryPoints || []).join(', '))}</td>
    <td>${esc((r.middlewares || []).join(', '))}</td><td>${esc(r.service)}</td><td>${esc(r.status)}</td></tr>`).join('')
}

function renderServices (services) {
  document.querySelector('#services tbody').innerHTML = services.map((s) => {
    const servers = Object.entries(s.serverStatus || {}).map(([url, st]) =>
      `<div class="server" data-url="${esc(url)}" data-status="${esc(st)}"><span class="badge ${esc(st)}">${esc(st)}</span><code>${esc(url)}</code></div>`).join('')
    return `<tr data-name="${esc(s.name)}"><td>${esc(s.name)}</td><td>${esc(s.type)}</td>
      <td>${esc((s.loadBalancer && s.loadBalancer.strategy) || '')}</td><td>${servers}</td><td>${esc((s.usedBy || []).join(', '))}</td></tr>`
  }).join('')
}

async function getJson (path) {
  const r = await fetch(path, { credentials: 'same-origin' })
  if (!r.ok) throw new Error(`${path}: ${r.status}`)
  return r.json()
}

async function poll () {
  try {
    const [routers, services, version, metrics] = await Promise.all([
      getJson('../api/http/routers?per_page=1000'), getJson('../api/http/services?per_page=1000'), getJson('../api/version'),
      fetch('../metrics', { credentials: 'same-origin' }).then((r) => (r.ok ? r.text() : '')),
    ])
    renderRouters(routers)
    renderServices(services)
    document.getElementById('version').textContent = `version ${version.Version}, started ${version.startDate}`
    const now = performance.now()
    const cur = totals(parseMetrics(metrics))
    if (previous !== null) {
      const secs = (now - previous.at) / 1000
      const reqs = cur.requests - previous.t.requests
      const rate = reqs / secs
      const errors = reqs > 0 ? 100 * (cur.errors - previous.t.errors) / reqs : 0
      const n = cur.count - previous.t.count
      const mean = n > 0 ? 1000 * (cur.sum - previous.t.sum) / n : 0
      push(history.rate, rate)
      push(history.errors, errors)
      push(history.mean, mean)
      push(history.p95, p95(previous.t, cur))
      document.getElementById('rate').textContent = fmt(rate)
      document.getElementById('errors').textContent = fmt(errors)
      document.getElementById('latency').textContent = `${fmt(mean)} / ${fmt(history.p95[history.p95.length - 1])}`
      chart('rate-chart', [history.rate], ['#0969da'])
      chart('error-chart', [history.errors], ['#cf222e'])
      chart('latency-chart', [history.mean, history.p95], ['#0969da', '#9a6700'])
    }
    previous = { at: now, t: cur }
    document.getElementById('updated').textContent = `updated ${new Date().toLocaleTimeString()}`
    document.getElementById('error').textContent = ''
  } catch (err) {
    document.getElementById('error').textContent = String(err.message || err)
  }
}

poll()
setInterval(poll, POLL_MS)
