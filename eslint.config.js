// ESLint with typescript-eslint's type-checked rules (README, "Lint and format"). For a gateway,
// a promise nobody observes is an unhandled rejection (the process dies), and a promise read where
// a boolean is expected is always truthy (a check that passes open): seeing those takes the types,
// which is why this is typescript-eslint with the project's tsconfig.json and not a syntax-only
// linter. Formatting is Prettier's (.prettierrc.json): no stylistic rule is enabled here, so the
// two never disagree.
//
// `npx eslint` lints all of it; `npx eslint src/lib test/lib` only the folders named.
import js from '@eslint/js'
import { defineConfig } from 'eslint/config'
import tseslint from 'typescript-eslint'

export default defineConfig(
  {
    // The TypeScript of the gateway, its tests and its benchmark; nothing built or generated.
    ignores: ['build/**', 'build-bench/**', 'coverage/**', '.tap/**', '.ci/**', 'node_modules/**', '**/*.js', '**/*.mjs', '**/*.cjs'],
  },
  {
    files: ['src/**/*.ts', 'test/**/*.ts', 'bench/**/*.ts'],
    extends: [js.configs.recommended, tseslint.configs.recommendedTypeChecked],
    languageOptions: {
      parserOptions: {
        projectService: true,
        tsconfigRootDir: import.meta.dirname,
      },
    },
    linterOptions: { reportUnusedDisableDirectives: 'error' },
    rules: {
      // A `let` assigned once but read (by a closure) before that assignment cannot be a const.
      'prefer-const': ['error', { ignoreReadBeforeAssign: true }],
      // Promises: a rejection nobody observes crashes the process; a promise where a boolean or a
      // void callback is read passes a check open or loses its error.
      '@typescript-eslint/no-floating-promises': [
        'error',
        {
          // tap queues a subtest and reports its failure itself: `t.test(...)` needs no await.
          allowForKnownSafePromises: [{ from: 'package', name: 'PromiseWithSubtest', package: '@tapjs/core' }],
        },
      ],
      '@typescript-eslint/no-misused-promises': 'error',
      '@typescript-eslint/await-thenable': 'error',
      '@typescript-eslint/prefer-promise-reject-errors': 'error',
      '@typescript-eslint/only-throw-error': 'error',
      // `return promise` inside try/catch skips the catch when the promise rejects.
      '@typescript-eslint/return-await': ['error', 'error-handling-correctness-only'],
      // The per-code tables (errors, endpoints, verdicts) rely on every case being handled.
      '@typescript-eslint/switch-exhaustiveness-check': ['error', { considerDefaultExhaustiveForUnions: true }],
      // verbatimModuleSyntax keeps imports as written: a type is imported with `import type`.
      '@typescript-eslint/consistent-type-imports': ['error', { fixStyle: 'inline-type-imports' }],
      '@typescript-eslint/no-import-type-side-effects': 'error',
      // Off, with the reason:
      // - tsc's noUnusedLocals and noUnusedParameters report the same, once.
      '@typescript-eslint/no-unused-vars': 'off',
      // - an `async` function without `await` is deliberate: it turns a synchronous throw into a
      //   rejection the caller's `.catch` sees, and implements interfaces that return promises.
      '@typescript-eslint/require-await': 'off',
      // - the gateway's input checks match control characters on purpose (headers, paths, redirects).
      'no-control-regex': 'off',
    },
  },
  {
    // The gateway itself: no `any` and no `!` at a module's boundary or inside it.
    files: ['src/**/*.ts'],
    rules: {
      '@typescript-eslint/no-explicit-any': 'error',
      '@typescript-eslint/no-non-null-assertion': 'error',
      '@typescript-eslint/use-unknown-in-catch-callback-variable': 'error',
    },
  },
  {
    // Tests and the benchmark read untyped JSON (`res.json().code`) and say with `as` the shape they
    // expect of it, state with `!` what a test has just established, destructure helpers' methods,
    // put parsed values into messages, and type tap's mocks as `typeof import('...')`.
    files: ['test/**/*.ts', 'bench/**/*.ts'],
    rules: {
      '@typescript-eslint/consistent-type-imports': ['error', { fixStyle: 'inline-type-imports', disallowTypeAnnotations: false }],
      '@typescript-eslint/no-unnecessary-type-assertion': 'off',
      '@typescript-eslint/no-explicit-any': 'off',
      '@typescript-eslint/no-non-null-assertion': 'off',
      '@typescript-eslint/no-unsafe-argument': 'off',
      '@typescript-eslint/no-unsafe-assignment': 'off',
      '@typescript-eslint/no-unsafe-call': 'off',
      '@typescript-eslint/no-unsafe-member-access': 'off',
      '@typescript-eslint/no-unsafe-return': 'off',
      '@typescript-eslint/unbound-method': 'off',
      '@typescript-eslint/restrict-template-expressions': 'off',
      '@typescript-eslint/no-base-to-string': 'off',
    },
  },
)
