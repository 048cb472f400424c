// The shared test vectors of the generic packed format, as the Rust side writes them
// (src/batch_types/testdata/declared_vectors.json).
import { readFileSync } from 'node:fs';

import type { DeclarationView } from '../src/index.js';

export type JsonValue = string | number | null;

export interface DeclaredVectors {
  declaration: Omit<DeclarationView, 'digest'> & { digest: string };
  requests: { key: { created_at_time_ns: string; id: string }; ops: { write: string; params: Record<string, JsonValue> }[]; bytes: string; argument: string }[];
  replies: { duplicate: boolean; outcomes: Record<string, Record<string, string | number>>[]; bytes: string }[];
  refused: { bytes: string; offset: number; what: string }[];
}

/** The file (this module runs from src/batch_client_ts/dist/test). */
export const vectorsPath = new URL('../../../batch_types/testdata/declared_vectors.json', import.meta.url);

export const vectors = JSON.parse(readFileSync(vectorsPath, 'utf8')) as DeclaredVectors;

export const hex = (bytes: Uint8Array): string => Buffer.from(bytes).toString('hex');
export const unhex = (text: string): Uint8Array => new Uint8Array(Buffer.from(text, 'hex'));

/** The vectors' declaration as the `batch_declaration` query gives it. */
export function vectorDeclaration(): DeclarationView {
  return { ...vectors.declaration, digest: unhex(vectors.declaration.digest) };
}
