import { readFixture, readFixtureBytes } from './paths.js';

// TEST-ONLY keys from fixtures/keys (see its README).
export type Bits = 2048 | 3072 | 4096;

export function publicPem(bits: Bits): string {
  return readFixture('keys', `test-${bits}-public.pem`);
}
export function privatePem(bits: Bits): string {
  return readFixture('keys', `test-${bits}-private.pem`);
}
export function keyForms(bits: Bits) {
  return {
    'PEM SPKI': readFixture('keys', `test-${bits}-public.pem`),
    'PEM PKCS#1': readFixture('keys', `test-${bits}-public-pkcs1.pem`),
    'PEM certificate': readFixture('keys', `test-${bits}-cert.pem`),
    'DER SPKI': readFixtureBytes('keys', `test-${bits}-public.der`),
    JWK: JSON.parse(readFixture('keys', `test-${bits}-public.jwk.json`)) as {
      kty: 'RSA';
      n: string;
      e: string;
    },
  };
}

export interface DeliveryFixture {
  name: string;
  dialect: 'orjson' | 'orjson-legacy' | 'python-utf8' | 'python';
  keyBits: Bits;
  jobId: string;
  canonicalSha256: string;
  headers: Record<string, string>;
  body: string;
}

export function deliveries(): DeliveryFixture[] {
  return (JSON.parse(readFixture('deliveries', 'deliveries.json')) as { cases: DeliveryFixture[] }).cases;
}
