/** One Uint8Array holding `chunks` in order (the chunk itself when there is one). */
export function concatBytes(chunks: readonly Uint8Array[]): Uint8Array {
  if (chunks.length === 1) return chunks[0]!;
  let size = 0;
  for (const c of chunks) size += c.byteLength;
  const out = new Uint8Array(size);
  let at = 0;
  for (const c of chunks) {
    out.set(c, at);
    at += c.byteLength;
  }
  return out;
}

/**
 * Whether two byte arrays hold the same bytes (not constant time: for bodies, not
 * secrets). Compared four bytes at a time where both are aligned.
 */
export function equalBytes(a: Uint8Array, b: Uint8Array): boolean {
  const n = a.byteLength;
  if (n !== b.byteLength) return false;
  let i = 0;
  if (n >= 64 && a.byteOffset % 4 === 0 && b.byteOffset % 4 === 0) {
    const words = n >>> 2;
    const wa = new Uint32Array(a.buffer, a.byteOffset, words);
    const wb = new Uint32Array(b.buffer, b.byteOffset, words);
    for (let w = 0; w < words; w++) if (wa[w] !== wb[w]) return false;
    i = words << 2;
  }
  for (; i < n; i++) if (a[i] !== b[i]) return false;
  return true;
}

/** Bytes of base64 text (line breaks and other ASCII whitespace skipped, as atob does): the embedded WebAssembly modules. */
export function decodeBase64(text: string): Uint8Array<ArrayBuffer> {
  const binary = atob(text);
  const bytes = new Uint8Array(binary.length);
  for (let i = 0; i < binary.length; i++) bytes[i] = binary.charCodeAt(i);
  return bytes;
}
