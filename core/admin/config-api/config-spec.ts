// The config API's self-description: /v2/info (the Data Plane API's info
// model) and /v2/specification, an OpenAPI 3.0 document of exactly the routes
// and models lb implements (a subset of the Data Plane API v2, whose own
// document is Swagger 2.0). test/admin/config-api-spec.test.ts checks the
// document with an OpenAPI validator and every real answer against it.
import { cpus, freemem, hostname, totalmem, type, release, arch } from 'node:os'
import type { AdminContext } from '../context.js'
import { RELEASE_DATE, VERSION } from '../context.js'

/** The Data Plane API's GET /v2/info body: the API's version and build date, and the host. */
export function apiInfo (ctx: AdminContext): Record<string, unknown> {
  return {
    api: { version: VERSION, build_date: `${RELEASE_DATE.replace(/\//g, '-')}T00:00:00.000Z` },
    system: {
      hostname: hostname(),
      os_string: `${type()} ${release()} ${arch()}`,
      cpu_info: { model: cpus()[0]?.model ?? '', num_cpus: cpus().length },
      mem_info: { total_memory: totalmem(), free_memory: freemem(), dataplaneapi_memory: process.memoryUsage().rss },
      time: Math.floor(Date.now() / 1000),
      uptime: Math.floor((Date.now() - ctx.startedAt) / 1000),
    },
  }
}

type Obj = Record<string, unknown>

const ref = (name: string): Obj => ({ $ref: `#/components/schemas/${name}` })
const json = (schema: Obj, description: string, headers = true): Obj => ({
  description,
  ...(headers ? { headers: { 'Configuration-Version': { schema: { type: 'integer' }, description: 'the configuration version after the call' } } } : {}),
  content: { 'application/json': { schema } },
})
const err = (description: string): Obj => json(ref('error'), description)
const q = (name: string, schema: Obj, description: string, required = false): Obj => ({ name, in: 'query', required, schema, description })
const VERSION_Q = q('version', { type: 'integer' }, 'configuration version the change is based on (409 when it is not the current one)')
const TX_Q = q('transaction_id', { type: 'string' }, 'a transaction in progress: a write is staged in it (202), a read sees the configuration it would make; an unknown one is 400 "transaction does not exist", one opened before the last write is 406 (outdated)')
const FORCE_Q = q('force_reload', { type: 'boolean' }, 'accepted; lb applies every change at once')
const BACKEND_Q = q('backend', { type: 'string' }, 'the parent backend (parent_name is accepted too)', true)
const NAME_P = { name: 'name', in: 'path', required: true, schema: { type: 'string' } }
const TABLE_Q = q('stick_table', { type: 'string' }, 'the rate limit (its middleware name); parent_name is accepted too', true)
const WRITE_ERRORS = { 400: err('bad request: unparsable body, unknown query parameter, unknown transaction, validation error'), 406: err('outdated transaction (?transaction_id): a write since it opened'), 409: err('exists, or version mismatch'), 415: err('not JSON'), 422: err('schema violation (go-openapi codes 6xx)') }
/** a read with ?transaction_id */
const TX_READ_ERRORS = { 400: err('unknown transaction'), 406: err('outdated transaction: a write since it opened') }
const STAGED = { 202: { description: 'staged in the transaction (?transaction_id); applied at its commit' } }
const staged = (schema: Obj): Obj => ({ 202: json(schema, 'staged in the transaction (?transaction_id); applied at its commit') })
const TX_ID_P = { name: 'id', in: 'path', required: true, schema: { type: 'string' } }

const wrapped = (schema: Obj): Obj => ({ type: 'object', required: ['_version', 'data'], additionalProperties: false, properties: { _version: { type: 'integer' }, data: schema } })

const SCHEMAS: Obj = {
  transaction: {
    type: 'object',
    required: ['id', '_version', 'status'],
    additionalProperties: false,
    properties: {
      id: { type: 'string' },
      _version: { type: 'integer', description: 'the version it was opened on; after a commit, the new version' },
      status: { type: 'string', enum: ['in_progress', 'success', 'failed', 'outdated'] },
    },
  },
  error: { type: 'object', required: ['code', 'message'], properties: { code: { type: 'integer' }, message: { type: 'string' } }, additionalProperties: { type: 'string' } },
  backend: {
    type: 'object',
    required: ['name'],
    additionalProperties: false,
    properties: {
      name: { type: 'string', pattern: '^[A-Za-z0-9-_.:]+$' },
      mode: { type: 'string', enum: ['http'] },
      balance: { type: 'object', required: ['algorithm'], additionalProperties: false, properties: { algorithm: { type: 'string', enum: ['roundrobin', 'leastconn', 'source'] } } },
      retries: { type: 'integer', minimum: 0, maximum: 10 },
      adv_check: { type: 'string', enum: ['httpchk'] },
      httpchk_params: { type: 'object', additionalProperties: false, properties: { method: { type: 'string', enum: ['GET'] }, uri: { type: 'string', pattern: '^/' }, version: { type: 'string' } } },
      check_timeout: { type: 'integer', minimum: 1 },
      default_server: { type: 'object', additionalProperties: false, properties: { inter: { type: 'integer' }, rise: { type: 'integer' }, fall: { type: 'integer' } } },
    },
  },
  server: {
    type: 'object',
    required: ['name', 'address'],
    additionalProperties: false,
    properties: {
      name: { type: 'string', pattern: '^[A-Za-z0-9-_.:]+$' },
      address: { type: 'string', description: 'IP address, host name, or unix:/absolute/path' },
      port: { type: 'integer', minimum: 1, maximum: 65535 },
      weight: { type: 'integer', minimum: 0, maximum: 256 },
      check: { type: 'string', enum: ['enabled', 'disabled'] },
      maintenance: { type: 'string', enum: ['enabled', 'disabled'] },
    },
  },
  runtime_server: {
    type: 'object',
    required: ['id', 'name', 'address', 'admin_state', 'operational_state'],
    additionalProperties: false,
    properties: {
      id: { type: 'string' },
      name: { type: 'string' },
      address: { type: 'string' },
      port: { type: 'integer' },
      admin_state: { type: 'string', enum: ['ready', 'maint', 'drain'] },
      operational_state: { type: 'string', enum: ['up', 'down', 'stopping'] },
    },
  },
  stick_table: {
    type: 'object',
    required: ['name', 'type', 'size', 'used', 'fields'],
    additionalProperties: false,
    description: 'a rateLimit middleware as a stick table, keyed by source address',
    properties: {
      name: { type: 'string' },
      type: { type: 'string', enum: ['ip'] },
      size: { type: 'integer', description: 'entries the table holds, shared by the limits of one scope' },
      used: { type: 'integer' },
      fields: {
        type: 'array',
        items: {
          type: 'object',
          required: ['field', 'type'],
          additionalProperties: false,
          properties: { field: { type: 'string', enum: ['http_req_rate', 'cluster_req_rate', 'bucket_level', 'cluster_bucket_level'] }, type: { type: 'string', enum: ['rate', 'counter'] }, period: { type: 'integer' } },
        },
      },
    },
  },
  stick_table_entry: {
    type: 'object',
    required: ['id', 'key', 'use', 'exp'],
    additionalProperties: false,
    properties: {
      id: { type: 'string' },
      key: { type: 'string', description: 'the source address (an IPv6 one as the network the limit counts by)' },
      use: { type: 'boolean' },
      exp: { type: 'integer', description: 'ms until the entry expires' },
      http_req_rate: { type: 'integer', description: 'slidingWindow: this node\'s requests in the sliding period' },
      cluster_req_rate: { type: 'integer', description: 'slidingWindow, scope = "cluster": every node\'s, the others\' as of the last sync' },
      bucket_level: { type: 'integer', description: 'tokenBucket, leakyBucket: requests in this node\'s bucket' },
      cluster_bucket_level: { type: 'integer', description: 'buckets, scope = "cluster": every node\'s, the others\' as of the last sync' },
    },
  },
  info: {
    type: 'object',
    required: ['api', 'system'],
    properties: {
      api: { type: 'object', required: ['version', 'build_date'], properties: { version: { type: 'string' }, build_date: { type: 'string', format: 'date-time' } } },
      system: {
        type: 'object',
        properties: {
          hostname: { type: 'string' },
          os_string: { type: 'string' },
          cpu_info: { type: 'object', properties: { model: { type: 'string' }, num_cpus: { type: 'integer' } } },
          mem_info: { type: 'object', properties: { total_memory: { type: 'integer' }, free_memory: { type: 'integer' }, dataplaneapi_memory: { type: 'integer' } } },
          time: { type: 'integer' },
          uptime: { type: 'integer' },
        },
      },
    },
  },
}

/** The configuration and runtime paths under one prefix (/v2/services/lb, or the Data Plane API's /v2/services/haproxy). */
function servicePaths (base: string, suffix: string): Obj {
  const cfg = `${base}/configuration`
  const id = (s: string): string => s + suffix
  return {
    [`${cfg}/version`]: { get: { operationId: id('getConfigurationVersion'), parameters: [TX_Q], responses: { 200: json({ type: 'integer' }, 'the version (in a transaction: the one it was opened on)'), ...TX_READ_ERRORS } } },
    [`${base}/transactions`]: {
      get: {
        operationId: id('getTransactions'),
        parameters: [q('status', { type: 'string', enum: ['in_progress', 'failed', 'outdated'] }, 'only the transactions of this status')],
        responses: { 200: json({ type: 'array', items: ref('transaction') }, 'transactions in progress, and the ones that failed or are outdated'), 422: err('bad status') },
      },
      post: {
        operationId: id('startTransaction'),
        parameters: [q('version', { type: 'integer' }, 'the current configuration version', true)],
        responses: {
          201: json(ref('transaction'), 'started, status in_progress'),
          400: err('unknown query parameter'),
          409: err('version mismatch'),
          422: err('version missing or not an integer'),
          429: err('too many open transactions ([admin] max_open_transactions)'),
        },
      },
    },
    [`${base}/transactions/{id}`]: {
      parameters: [TX_ID_P],
      get: { operationId: id('getTransaction'), responses: { 200: json(ref('transaction'), 'the transaction'), 404: err('no such transaction') } },
      put: {
        operationId: id('commitTransaction'),
        parameters: [FORCE_Q],
        responses: {
          200: json(ref('transaction'), 'committed: every change applied as one new version (status success, _version the new version)'),
          400: err('the configuration it makes does not validate (the transaction is now failed; nothing was applied), or it failed before'),
          404: err('no such transaction'),
          406: err('outdated: opened on an older version than the current one; nothing was applied'),
          409: err('being committed'),
          422: err('bad force_reload'),
        },
      },
      delete: { operationId: id('deleteTransaction'), parameters: [], responses: { 204: { description: 'deleted, nothing of it applied' }, 400: err('unknown query parameter'), 404: err('no such transaction'), 409: err('being committed') } },
    },
    [`${cfg}/backends`]: {
      get: { operationId: id('getBackends'), parameters: [TX_Q], responses: { 200: json(wrapped({ type: 'array', items: ref('backend') }), 'the backends'), ...TX_READ_ERRORS } },
      post: {
        operationId: id('createBackend'),
        parameters: [VERSION_Q, TX_Q, FORCE_Q],
        requestBody: { required: true, content: { 'application/json': { schema: ref('backend') } } },
        responses: { 201: json(ref('backend'), 'created and applied'), ...staged(ref('backend')), ...WRITE_ERRORS },
      },
    },
    [`${cfg}/backends/{name}`]: {
      parameters: [NAME_P],
      get: { operationId: id('getBackend'), parameters: [TX_Q], responses: { 200: json(wrapped(ref('backend')), 'the backend'), ...TX_READ_ERRORS, 404: err('no such backend') } },
      put: {
        operationId: id('replaceBackend'),
        parameters: [VERSION_Q, TX_Q, FORCE_Q],
        requestBody: { required: true, content: { 'application/json': { schema: ref('backend') } } },
        responses: { 200: json(ref('backend'), 'replaced and applied (its servers are kept)'), ...staged(ref('backend')), 404: err('no such backend'), ...WRITE_ERRORS },
      },
      delete: { operationId: id('deleteBackend'), parameters: [VERSION_Q, TX_Q, FORCE_Q], responses: { 204: { description: 'deleted' }, ...STAGED, 404: err('no such backend'), ...WRITE_ERRORS } },
    },
    [`${cfg}/servers`]: {
      get: { operationId: id('getServers'), parameters: [BACKEND_Q, TX_Q], responses: { 200: json(wrapped({ type: 'array', items: ref('server') }), 'the servers'), ...TX_READ_ERRORS, 404: err('no such backend'), 422: err('backend missing') } },
      post: {
        operationId: id('createServer'),
        parameters: [BACKEND_Q, VERSION_Q, TX_Q, FORCE_Q],
        requestBody: { required: true, content: { 'application/json': { schema: ref('server') } } },
        responses: { 201: json(ref('server'), 'created and applied'), ...staged(ref('server')), 404: err('no such backend'), ...WRITE_ERRORS },
      },
    },
    [`${cfg}/servers/{name}`]: {
      parameters: [NAME_P],
      get: { operationId: id('getServer'), parameters: [BACKEND_Q, TX_Q], responses: { 200: json(wrapped(ref('server')), 'the server'), ...TX_READ_ERRORS, 404: err('no such backend or server') } },
      put: {
        operationId: id('replaceServer'),
        parameters: [BACKEND_Q, VERSION_Q, TX_Q, FORCE_Q],
        requestBody: { required: true, content: { 'application/json': { schema: ref('server') } } },
        responses: { 200: json(ref('server'), 'replaced and applied'), ...staged(ref('server')), 404: err('no such backend or server'), ...WRITE_ERRORS },
      },
      delete: { operationId: id('deleteServer'), parameters: [BACKEND_Q, VERSION_Q, TX_Q, FORCE_Q], responses: { 204: { description: 'deleted' }, ...STAGED, 404: err('no such backend or server'), ...WRITE_ERRORS } },
    },
    [`${base}/runtime/servers`]: {
      get: { operationId: id('getRuntimeServers'), parameters: [BACKEND_Q], responses: { 200: json({ type: 'array', items: ref('runtime_server') }, 'live state of the servers', false), 404: err('no such backend') } },
    },
    [`${base}/runtime/stick_tables`]: {
      get: { operationId: id('getStickTables'), responses: { 200: json({ type: 'array', items: ref('stick_table') }, 'every rate limit as a stick table', false) } },
    },
    [`${base}/runtime/stick_tables/{name}`]: {
      parameters: [NAME_P],
      get: { operationId: id('getStickTable'), responses: { 200: json(ref('stick_table'), 'one rate limit as a stick table', false), 404: err('no such rate limit') } },
    },
    [`${base}/runtime/stick_table_entries`]: {
      get: {
        operationId: id('getStickTableEntries'),
        parameters: [TABLE_Q, q('key', { type: 'string' }, 'one source address'), q('filter', { type: 'string' }, 'data.<type> <operator> <value>, comma-separated'),
          q('count', { type: 'integer' }, 'at most this many entries'), q('offset', { type: 'integer' }, 'entries skipped first')],
        responses: { 200: json({ type: 'array', items: ref('stick_table_entry') }, 'the entries, highest count first', false), 400: err('bad key or filter'), 404: err('no such rate limit'), 422: err('stick_table missing, bad count or offset') },
      },
      delete: {
        operationId: id('deleteStickTableEntry'),
        description: 'lb\'s extension (the runtime socket\'s clear table <t> key <k>): forgets one source; for a scope = "cluster" limit on every node',
        parameters: [TABLE_Q, q('key', { type: 'string' }, 'the source address', true)],
        responses: { 204: { description: 'forgotten' }, 400: err('unknown query parameter, or a key that is not an address'), 404: err('no such rate limit'), 422: err('stick_table or key missing'), 503: err('Redis did not answer: forgotten on this node only') },
      },
    },
    [`${base}/runtime/servers/{name}`]: {
      parameters: [NAME_P],
      get: { operationId: id('getRuntimeServer'), parameters: [BACKEND_Q], responses: { 200: json(ref('runtime_server'), 'live state of one server', false), 404: err('no such backend or server') } },
      put: {
        operationId: id('replaceRuntimeServer'),
        parameters: [BACKEND_Q],
        requestBody: { required: true, content: { 'application/json': { schema: { type: 'object', required: ['admin_state'], properties: { admin_state: { type: 'string', enum: ['ready', 'maint', 'drain'] } } } } } },
        responses: { 200: json(ref('runtime_server'), 'admin state set, no reload', false), 404: err('no such backend or server'), 400: err('unknown query parameter'), 422: err('schema violation') },
      },
    },
  }
}

/** The OpenAPI 3.0 document of the config API. */
export function specification (): Obj {
  return {
    openapi: '3.0.3',
    info: {
      title: 'lb configuration API',
      version: VERSION,
      description: 'The subset of the HAProxy Data Plane API v2 that lb implements. Every path under /v2/services/lb is also ' +
        'answered under /v2/services/haproxy, the prefix existing clients use. HTTP basic authentication when [admin] has users.',
    },
    components: { schemas: SCHEMAS, securitySchemes: { basic_auth: { type: 'http', scheme: 'basic' } } },
    security: [{ basic_auth: [] }],
    paths: {
      ...servicePaths('/v2/services/lb', ''),
      ...servicePaths('/v2/services/haproxy', 'Haproxy'),
      '/v2/info': { get: { operationId: 'getInfo', responses: { 200: json(ref('info'), 'API and system information', false) } } },
      '/v2/specification': { get: { operationId: 'getSpecification', responses: { 200: json({ type: 'object' }, 'this document', false) } } },
    },
  }
}
