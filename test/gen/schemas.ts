// JSON schemas shared by the structured-output tests: together they use every
// keyword schema.ts accepts (formats aside).

export const PERSON = {
  type: 'object',
  properties: {
    name: { type: 'string', maxLength: 40 },
    age: { type: 'integer' },
    pets: { type: 'array', items: { type: 'string', enum: ['cat', 'dog', 'fish'] }, maxItems: 3 },
    alive: { type: 'boolean' },
  },
  required: ['name', 'age', 'pets', 'alive'],
  additionalProperties: false,
}

export const ORDER = {
  type: 'object',
  properties: {
    id: { type: 'string', minLength: 3, maxLength: 8 },
    lines: {
      type: 'array',
      minItems: 2,
      items: {
        type: 'object',
        properties: { sku: { type: 'string', enum: ['a-1', 'b-22', 'c-333'] }, qty: { type: 'integer' }, note: { type: ['string', 'null'] } },
        required: ['sku', 'qty', 'note'],
        additionalProperties: false,
      },
    },
    total: { type: 'number' },
    kind: { const: 'order' },
  },
  required: ['id', 'lines', 'total', 'kind'],
  additionalProperties: false,
}

export const SHAPES = {
  $defs: {
    point: { type: 'object', properties: { x: { type: 'number' }, y: { type: 'number' } }, required: ['x', 'y'], additionalProperties: false },
  },
  type: 'object',
  properties: {
    shape: {
      oneOf: [
        { type: 'object', properties: { circle: { $ref: '#/$defs/point' }, r: { type: 'number' } }, required: ['circle', 'r'], additionalProperties: false },
        { type: 'array', prefixItems: [{ $ref: '#/$defs/point' }, { $ref: '#/$defs/point' }], minItems: 2, maxItems: 2 },
      ],
    },
    tags: { type: 'object', additionalProperties: { type: 'string' }, minProperties: 1 },
    ok: { type: 'boolean' },
  },
  required: ['shape', 'tags', 'ok'],
  additionalProperties: false,
}

export const SCHEMAS = { PERSON, ORDER, SHAPES } as const
