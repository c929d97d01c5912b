// `npm run lint`: standard style (the style this code base is written in: no
// semicolons, single quotes, a space before a function's parentheses) for
// TypeScript, through neostandard. `npm run lint:fix` formats.
import neostandard from 'neostandard'

export default [
  ...neostandard({
    ts: true,
    ignores: [
      'dist/**', 'native/**', 'node_modules/**', 'core/admin/dashboard/**',
      // a plugin that must fail to load (test/plugins/plugin-host.test.ts)
      'test/fixtures/plugins/syntax-error.js',
    ],
  }),
  {
    rules: {
      // `void promise` marks a promise whose errors are handled where it is made
      'no-void': ['error', { allowAsStatement: true }],
      // uWebSockets.js's own type names
      camelcase: ['error', { allow: ['^us_'], properties: 'never' }],
      // short executor names are the house style in tests and helpers
      'promise/param-names': ['error', { resolvePattern: '^_?(resolve|res|r)$', rejectPattern: '^_?(reject|rej)$' }],
      // loops here wait on flags that callbacks set; the rule cannot see those writes
      'no-unmodified-loop-condition': 'off',
      // rows of related fields (a stats line, a GGUF record) read best grouped on a few lines
      '@stylistic/object-property-newline': 'off',
    },
  },
]
