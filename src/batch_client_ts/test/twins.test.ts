// This client against the Rust client, from what the Rust crate writes of itself
// (src/batch_client/testdata/client_twins.json, by its tests/twins.rs): the same settings with
// the same defaults (and this README's table saying so), the same typed refusals decoded to
// the same values and treated alike (final, too old, retried), the same rule for reject codes,
// every outcome record decoded alike with only NotExecuted sent again, and the same retry table
// (ic-rusqlite-batch-types' testdata/retry_rules.json). A change on either side fails here or there.
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { test } from 'node:test';

import {
  DeclaredWrites,
  RETRY_RULES,
  RejectCode,
  defaultConfig,
  isNotExecuted,
  rejectIsRetried,
  rejectMayHaveRun,
} from '../src/index.js';
import { hex, unhex, vectorDeclaration } from './declared_vectors.js';

interface Twins {
  settings: { name: string; value: number | null; default: string }[];
  refusals: { reply: string; refusal: unknown; kind: string }[];
  rejects: { code: number; retried: boolean; may_have_run: boolean }[];
  outcomes: { reply: string; outcomes: { outcome: Record<string, unknown>; not_executed: boolean }[] };
}

const twins = JSON.parse(
  readFileSync(new URL('../../../batch_client/testdata/client_twins.json', import.meta.url), 'utf8'),
) as Twins;

/** This client's name of a Rust setting: camel case, nanoseconds (`_ns`) as milliseconds (`Ms`). */
const tsName = (rust: string): string =>
  rust.replace(/_ns$/, '_ms').replace(/_([a-z])/g, (_, c: string) => c.toUpperCase());

/** What a Rust setting's value is here. */
const tsValue = (rust: string, value: number): number => (rust.endsWith('_ns') ? value / 1_000_000 : value);

test('every setting of the Rust client is one of this client, with the same default', () => {
  const defaults = defaultConfig() as unknown as Record<string, unknown>;
  assert.deepEqual(Object.keys(defaults).sort(), twins.settings.map((s) => tsName(s.name)).sort());
  for (const s of twins.settings) {
    const name = tsName(s.name);
    if (name === 'keyPrefix') {
      // Rust's drivers set it; this batcher draws it itself, per batcher.
      const [a, b] = [defaultConfig().keyPrefix, defaultConfig().keyPrefix];
      assert.equal(a.length, 8);
      assert.notEqual(hex(a), hex(b), '8 random bytes per batcher');
    } else if (s.value === null) {
      assert.equal(defaults[name], undefined, name);
    } else {
      assert.equal(defaults[name], tsValue(s.name, s.value), name);
    }
  }
});

test("the README's settings table has every setting once, in the Rust client's order, with its default", () => {
  const readme = readFileSync(new URL('../../README.md', import.meta.url), 'utf8');
  const table = readme.split('## Settings')[1]!.split('\n## ')[0]!;
  const rows = table
    .split('\n')
    .map((line) => /^\| `(\w+)` \| ([^|]+) \|/.exec(line))
    .filter((m) => m !== null)
    .map((m) => [m[1], m[2]!.trim()]);
  const expected = twins.settings.map((s) => [tsName(s.name), s.name === 'key_prefix' ? '8 random bytes' : s.default]);
  assert.deepEqual(rows, expected);
});

/** A decoded Candid value as JSON, as the Rust side writes it: 64-bit numbers as text, blobs as hex. */
function json(value: unknown): unknown {
  if (typeof value === 'bigint') return value.toString();
  if (value instanceof Uint8Array) return hex(value);
  if (Array.isArray(value)) return value.map(json);
  if (value !== null && typeof value === 'object') {
    return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, json(v)]));
  }
  return value;
}

test('every refusal decodes to the value Rust encoded, and is final, too old or retried as in Rust', () => {
  const codec = new DeclaredWrites(vectorDeclaration());
  assert.ok(twins.refusals.length >= 14);
  for (const r of twins.refusals) {
    const reply = codec.decode(unhex(r.reply), 1);
    assert.equal(reply.kind, 'refused');
    if (reply.kind !== 'refused') continue;
    assert.deepEqual(json(reply.refusal.refusal), r.refusal);
    assert.equal(codec.refusalKind(reply.refusal), r.kind, JSON.stringify(r.refusal));
  }
});

test('every reject code is retried, and may have run, as in Rust', () => {
  for (const r of twins.rejects) {
    const code = r.code as RejectCode;
    assert.deepEqual([rejectIsRetried(code), rejectMayHaveRun(code)], [r.retried, r.may_have_run], `code ${r.code}`);
  }
  assert.deepEqual(
    twins.rejects.map((r) => r.code),
    [...Object.values(RejectCode).filter((c) => typeof c === 'number'), 7],
    'every code of this client, and one it does not know',
  );
});

test('a reply of every outcome record decodes to the outcomes Rust encoded, and only NotExecuted is sent again', () => {
  const { reply, outcomes } = twins.outcomes;
  const decoded = new DeclaredWrites(vectorDeclaration()).decode(unhex(reply), outcomes.length);
  assert.equal(decoded.kind, 'executed');
  if (decoded.kind !== 'executed') return;
  assert.deepEqual(json(decoded.outcomes), outcomes.map((o) => o.outcome));
  assert.deepEqual(
    decoded.outcomes.map((o) => isNotExecuted(o)),
    outcomes.map((o) => o.not_executed),
  );
  assert.ok(outcomes.some((o) => 'NotExecuted' in o.outcome) && outcomes.some((o) => !o.not_executed));
});

test("the retry table is ic-rusqlite-batch-types' (batch_types::retry::RULES)", () => {
  const rust = JSON.parse(
    readFileSync(new URL('../../../batch_types/testdata/retry_rules.json', import.meta.url), 'utf8'),
  ) as unknown;
  assert.deepEqual(RETRY_RULES, rust);
});
