// The configurations of the tracing tests: a [tracing] section exporting to a
// test collector every 50 ms, and one worker (its spans leave in order).

export function tracingSection (endpoint: string, extra = ''): string {
  return `
[tracing]
service_name = "edge"
flush_interval = "50ms"
${extra}
[tracing.resource_attributes]
"deployment.environment" = "test"
[tracing.otlp.http]
endpoint = "${endpoint}"
[tracing.otlp.http.headers]
Authorization = "Bearer T0KEN-SECRET"
`
}

export function config (backend: string, deadPort: number, tracing: string): string {
  return `[global]
workers = 1
access_log = "off"

[entrypoints.web]
address = "127.0.0.1:{{PORT}}"

[routers.web]
rule = "PathPrefix(\`/\`)"
service = "web"
[routers.down]
rule = "PathPrefix(\`/down\`)"
service = "down"

[services.web]
[[services.web.servers]]
name = "b1"
address = "${backend}"
check = false
[services.down]
[[services.down.servers]]
name = "gone"
address = "127.0.0.1:${deadPort}"
check = false
max_fails = 0
${tracing}`
}
