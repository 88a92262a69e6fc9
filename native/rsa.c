/*
 * jobhook RSA public operation, s^e mod n, for WebAssembly (freestanding C, no libc).
 *
 * WebCrypto has no raw RSA operation, so the WebCrypto verifier opens signatures
 * itself (docs/protocol.md, "Open first"). This module does the one modular exponentiation: Montgomery
 * multiplication, left-to-right square-and-multiply (e = 65537 is 16 squarings and
 * one multiplication). Everything here is public (signature, modulus, exponent), so
 * nothing needs to run in constant time.
 *
 * Arithmetic: wasm32 has a 64-bit multiply but no 64x64->128 one, so limbs are
 * w = 26..28 bits (reduced radix) in u32 words, and products are summed into u64
 * accumulators *without carrying*: one accumulator takes at most 2k + 1 products
 * below 2^(2w) plus one carry, and k (the limb count) is bounded so that this never
 * reaches 2^64 (see pick_radix). With no carry chain, the inner loop of Montgomery
 * multiplication is t[i+j] += a[j]*b[i] + n[j]*m for all j, independent lanes, done
 * four at a time with 128-bit SIMD (u64x2.extmul of u32x4). A squaring computes each
 * cross product once, doubled, then reduces separately.
 *
 * Interface (all big-endian bytes, in a fixed I/O area):
 *   rsa_prepare(mod_len, exp_len)  modulus and exponent from the I/O area -> the key
 *                                  area (limbs, Montgomery constants, exponent);
 *                                  returns the key area's used size in bytes, or a
 *                                  negative error (even or too small modulus, too
 *                                  large input, zero exponent)
 *   rsa_modexp(base_len)           base from the I/O area -> base^e mod n in the
 *                                  output area, mod_len bytes; 0, or -1 when the
 *                                  base is longer than the modulus
 * The JS side keeps a copy of each key's area and copies it back before an
 * operation with another key, so any number of keys share one instance.
 */

#include <wasm_simd128.h>

typedef unsigned char u8;
typedef unsigned int u32;
typedef int i32;
typedef unsigned long long u64;

#define EXPORT(name) __attribute__((export_name(name)))
/*
 * Hides a value from the optimizer. clang 14 writes u64x2.extmul as extend * extend
 * and only turns that back into the one instruction when both sides are extends; it
 * hoists the extend of a loop-invariant splat out of the loop, which leaves an i64x2.mul
 * (about 8 x86 instructions in V8 against 3 for extmul: the whole operation ran 3x slower).
 */
#define OPAQUE(v) __asm__("" : "+r"(v))

#define MAX_BYTES 2048                         /* moduli up to 16384 bits */
#define MAX_LIMBS ((MAX_BYTES * 8 + 25) / 26)  /* w >= 26 */
#define LANES 4                                /* u32 limbs per SIMD step */
#define PAD (LANES + 4)                        /* zero limbs after every number */
#define STRIDE (MAX_LIMBS + PAD)

#define E_EVEN -1
#define E_SIZE -2
#define E_EXPONENT -3
#define E_BASE -1

/* Key area: header words, then n, r2 (k + PAD limbs each), then the exponent's u32 words. */
#define H_K 0
#define H_W 1
#define H_N0INV 2
#define H_EWORDS 3
#define H_MODLEN 4
#define HEADER 8 /* its last word stays zero: it is n[-1] for addmul_2rows */

static u32 key[HEADER + 2 * STRIDE + MAX_BYTES / 4];
static u8 io[3 * MAX_BYTES]; /* modulus | exponent or base | output */

static u32 xs[STRIDE], acc[STRIDE], tmp[STRIDE];
static u64 t[2 * STRIDE + PAD];

EXPORT("rsa_key") u32 rsa_key(void) { return (u32)(unsigned long)key; }
EXPORT("rsa_io") u32 rsa_io(void) { return (u32)(unsigned long)io; }
EXPORT("rsa_max_bytes") u32 rsa_max_bytes(void) { return MAX_BYTES; }

static inline u32 *key_n(void) { return key + HEADER; }
static inline u32 *key_r2(void) { return key + HEADER + STRIDE; }
static inline u32 *key_e(void) { return key + HEADER + 2 * STRIDE; }

/* Leading zero bytes of a big-endian number are not part of its length. */
static u32 strip(const u8 *p, u32 len, u32 *start) {
  u32 s = 0;
  while (s < len && p[s] == 0) s++;
  *start = s;
  return len - s;
}

/* Big-endian bytes -> k limbs of w bits, little-endian, zero-padded to k + PAD. */
static void to_limbs(u32 *out, const u8 *p, u32 len, u32 w, u32 k) {
  u64 bits = 0;
  u32 have = 0, j = 0;
  const u32 mask = (1u << w) - 1;
  for (u32 i = len; i > 0; i--) {
    bits |= (u64)p[i - 1] << have;
    have += 8;
    if (have >= w) {
      out[j++] = (u32)bits & mask;
      bits >>= w;
      have -= w;
    }
  }
  if (have > 0) out[j++] = (u32)bits;
  while (j < k + PAD) out[j++] = 0;
}

/* k limbs of w bits -> len big-endian bytes (the value fits: it is below n). */
static void to_bytes(u8 *p, u32 len, const u32 *limbs, u32 w, u32 k) {
  u64 bits = 0;
  u32 have = 0, j = 0;
  for (u32 i = len; i > 0; i--) {
    if (have < 8 && j < k) {
      bits |= (u64)limbs[j++] << have;
      have += w;
    }
    p[i - 1] = (u8)bits;
    bits >>= 8;
    have = have >= 8 ? have - 8 : 0;
  }
}

/*
 * The widest limb for which no accumulator can overflow: a slot of t takes at most
 * 2k + 1 products < 2^(2w) and one carry < 2^(64-w), so 2k + 2 < 2^(64-2w) keeps it
 * below 2^64. That is w = 28 up to 441 bytes (k <= 126), 27 up to 1721 bytes (k <= 510),
 * 26 above. Returns w, and k through *k, or 0 when too large.
 */
static u32 pick_radix(u32 bits, u32 *k) {
  for (u32 w = 28; w >= 26; w--) {
    u32 limbs = (bits + w - 1) / w;
    if (2 * (u64)limbs + 2 < ((u64)1 << (64 - 2 * w))) {
      *k = limbs;
      return w;
    }
  }
  return 0;
}

/* x < y on k limbs (y may have one more limb `ytop`, 0 or 1 above). */
static int less(const u32 *x, u32 xtop, const u32 *y, u32 k) {
  if (xtop != 0) return 0;
  for (u32 i = k; i > 0; i--) {
    if (x[i - 1] != y[i - 1]) return x[i - 1] < y[i - 1];
  }
  return 0;
}

/* x -= y on k limbs of w bits (x >= y). */
static void sub(u32 *x, const u32 *y, u32 w, u32 k) {
  const u32 mask = (1u << w) - 1;
  u32 borrow = 0;
  for (u32 i = 0; i < k; i++) {
    u32 d = x[i] - y[i] - borrow;
    borrow = d >> 31;
    x[i] = d & mask;
  }
}

/* t[0..len) += a[0..len) * b, len a multiple of LANES (a is zero-padded). */
static inline void addmul(u64 *t, const u32 *a, u32 b, u32 len) {
  v128_t vb = wasm_i32x4_splat((i32)b);
  for (u32 j = 0; j < len; j += LANES) {
    OPAQUE(vb);
    const v128_t va = wasm_v128_load(a + j);
    v128_t lo = wasm_v128_load(t + j);
    v128_t hi = wasm_v128_load(t + j + 2);
    lo = wasm_i64x2_add(lo, wasm_u64x2_extmul_low_u32x4(va, vb));
    hi = wasm_i64x2_add(hi, wasm_u64x2_extmul_high_u32x4(va, vb));
    wasm_v128_store(t + j, lo);
    wasm_v128_store(t + j + 2, hi);
  }
}

/* t[0..len) += a[0..len) * b + n[0..len) * m. */
static inline void addmul2(u64 *t, const u32 *a, u32 b, const u32 *n, u32 m, u32 len) {
  v128_t vb = wasm_i32x4_splat((i32)b);
  v128_t vm = wasm_i32x4_splat((i32)m);
  for (u32 j = 0; j < len; j += LANES) {
    OPAQUE(vb);
    OPAQUE(vm);
    const v128_t va = wasm_v128_load(a + j);
    const v128_t vn = wasm_v128_load(n + j);
    v128_t lo = wasm_v128_load(t + j);
    v128_t hi = wasm_v128_load(t + j + 2);
    lo = wasm_i64x2_add(lo, wasm_u64x2_extmul_low_u32x4(va, vb));
    hi = wasm_i64x2_add(hi, wasm_u64x2_extmul_high_u32x4(va, vb));
    lo = wasm_i64x2_add(lo, wasm_u64x2_extmul_low_u32x4(vn, vm));
    hi = wasm_i64x2_add(hi, wasm_u64x2_extmul_high_u32x4(vn, vm));
    wasm_v128_store(t + j, lo);
    wasm_v128_store(t + j + 2, hi);
  }
}

/*
 * Two rows at once: t[j] += x[j]*b0 + x[j-1]*b1 for j in [0, len) (x[-1] is read).
 * Half the loads and stores of t of two addmul calls, and the next pair of rows
 * starts 16 bytes on, where this one's stores are.
 */
static inline void addmul_2rows(u64 *t, const u32 *x, u32 b0, u32 b1, u32 len) {
  v128_t v0 = wasm_i32x4_splat((i32)b0);
  v128_t v1 = wasm_i32x4_splat((i32)b1);
  for (u32 j = 0; j < len; j += LANES) {
    OPAQUE(v0);
    OPAQUE(v1);
    const v128_t xa = wasm_v128_load(x + j);
    const v128_t xb = wasm_v128_load(x + j - 1);
    v128_t lo = wasm_v128_load(t + j);
    v128_t hi = wasm_v128_load(t + j + 2);
    lo = wasm_i64x2_add(lo, wasm_u64x2_extmul_low_u32x4(xa, v0));
    hi = wasm_i64x2_add(hi, wasm_u64x2_extmul_high_u32x4(xa, v0));
    lo = wasm_i64x2_add(lo, wasm_u64x2_extmul_low_u32x4(xb, v1));
    hi = wasm_i64x2_add(hi, wasm_u64x2_extmul_high_u32x4(xb, v1));
    wasm_v128_store(t + j, lo);
    wasm_v128_store(t + j + 2, hi);
  }
}

static inline u32 round_up(u32 k) { return (k + LANES - 1) & ~(u32)(LANES - 1); }

/*
 * out = t[k..2k) normalised to w-bit limbs, minus n if it is not below n. The sum in t
 * is below 2n when one factor is below n and the other below R = 2^(wk).
 */
static void finish(u32 *out, const u32 *n, u32 w, u32 k) {
  const u32 mask = (1u << w) - 1;
  u64 carry = 0;
  for (u32 j = 0; j < k; j++) {
    u64 v = t[k + j] + carry;
    out[j] = (u32)v & mask;
    carry = v >> w;
  }
  for (u32 j = k; j < k + PAD; j++) out[j] = 0; /* another key may have left limbs there */
  if (!less(out, (u32)carry, n, k)) sub(out, n, w, k);
}

/*
 * Montgomery reduction of t (2k slots, no carries done yet): out = t / R mod n.
 * Row i adds m*n at slot i, m chosen so that slot i becomes a multiple of 2^w, whose
 * carry moves up. Rows go in pairs: the second m is found from slot i+1 as the first
 * row and its carry will leave it.
 */
static void reduce(u32 *out, const u32 *n, u32 n0inv, u32 w, u32 k) {
  const u32 mask = (1u << w) - 1;
  const u32 len = round_up(k + 1);
  u32 i = 0;
  for (; i + 1 < k; i += 2) {
    const u32 m0 = ((u32)t[i] * n0inv) & mask;
    const u64 c = (t[i] + (u64)n[0] * m0) >> w;
    const u32 m1 = ((u32)(t[i + 1] + (u64)n[1] * m0 + c) * n0inv) & mask;
    addmul_2rows(t + i, n, m0, m1, len);
    t[i + 1] += t[i] >> w;
    t[i + 2] += t[i + 1] >> w;
  }
  if (i < k) {
    const u32 m = ((u32)t[i] * n0inv) & mask;
    addmul(t + i, n, m, round_up(k));
    t[i + 1] += t[i] >> w;
  }
  finish(out, n, w, k);
}

static void clear_t(u32 k) { __builtin_memset(t, 0, (2 * round_up(k) + PAD) * sizeof(u64)); }

/* out = a * b / R mod n (a < R, b < n). out may be a or b. */
static void mont_mul(u32 *out, const u32 *a, const u32 *b, const u32 *n, u32 n0inv, u32 w, u32 k) {
  const u32 mask = (1u << w) - 1;
  const u32 len = round_up(k);
  clear_t(k);
  for (u32 i = 0; i < k; i++) {
    const u32 bi = b[i];
    const u32 m = ((u32)(t[i] + (u64)a[0] * bi) * n0inv) & mask;
    addmul2(t + i, a, bi, n, m, len);
    t[i + 1] += t[i] >> w;
  }
  finish(out, n, w, k);
}

/* out = a^2 / R mod n (a < n): cross products once, doubled, then a reduction. */
static void mont_sqr(u32 *out, const u32 *a, const u32 *n, u32 n0inv, u32 w, u32 k) {
  clear_t(k);
  for (u32 i = 0; i < k; i++) tmp[i] = a[i] << 1; /* < 2^(w+1): products stay below 2^(2w+1) */
  for (u32 i = k; i < k + PAD; i++) tmp[i] = 0;
  /*
   * Row p: t[2p] += a[p]^2 and t[p+j] += 2 a[p] a[j] for j > p (the padding beyond k is
   * zero). Rows p and p+1 together: slots 2p, 2p+1 and 2p+2 here, from 2p+3 on both
   * rows in one pass.
   */
  u32 p = 0;
  for (; p + 1 < k; p += 2) {
    const u64 ap = a[p], aq = a[p + 1];
    t[2 * p] += ap * ap;
    t[2 * p + 1] += tmp[p + 1] * ap;
    t[2 * p + 2] += tmp[p + 2] * ap + aq * aq;
    addmul_2rows(t + 2 * p + 3, tmp + p + 3, (u32)ap, (u32)aq, round_up(k - p - 2));
  }
  if (p < k) {
    t[2 * p] += (u64)a[p] * a[p];
    addmul(t + 2 * p + 1, tmp + p + 1, a[p], round_up(k - p - 1));
  }
  reduce(out, n, n0inv, w, k);
}

/* x = 2x mod n (x < n). */
static void dbl(u32 *x, const u32 *n, u32 w, u32 k) {
  const u32 mask = (1u << w) - 1;
  u32 carry = 0;
  for (u32 i = 0; i < k; i++) {
    u32 v = (x[i] << 1) | carry;
    carry = v >> w;
    x[i] = v & mask;
  }
  if (!less(x, carry, n, k)) sub(x, n, w, k);
}

/*
 * r2 = R^2 mod n = 2^(2wk) mod n. From 2^(bits-1) (below n), doublings reach
 * y = 2^(wk+h) (the Montgomery form of 2^h); each Montgomery squaring doubles h;
 * after s of them, a few doublings more make up wk exactly.
 */
static void compute_r2(u32 *r2, const u32 *n, u32 n0inv, u32 w, u32 k, u32 bits) {
  const u32 s = 5;
  const u32 wk = w * k;
  const u32 h = wk >> s;
  for (u32 i = 0; i < k + PAD; i++) r2[i] = 0;
  r2[(bits - 1) / w] = 1u << ((bits - 1) % w);
  for (u32 i = bits - 1; i < wk + h; i++) dbl(r2, n, w, k);
  for (u32 i = 0; i < s; i++) mont_sqr(r2, r2, n, n0inv, w, k);
  for (u32 i = h << s; i < wk; i++) dbl(r2, n, w, k);
}

EXPORT("rsa_prepare") i32 rsa_prepare(u32 mod_len, u32 exp_len) {
  if (mod_len > MAX_BYTES || exp_len > MAX_BYTES) return E_SIZE;
  u32 ms, es;
  const u32 mlen = strip(io, mod_len, &ms);
  const u32 elen = strip(io + MAX_BYTES, exp_len, &es);
  const u8 *m = io + ms;
  const u8 *e = io + MAX_BYTES + es;
  if (mlen < 2) return E_SIZE;
  if ((m[mlen - 1] & 1) == 0) return E_EVEN;
  if (elen == 0) return E_EXPONENT;
  u32 bits = mlen * 8;
  for (u8 top = m[0]; (top & 0x80) == 0; top <<= 1) bits--;
  u32 k;
  const u32 w = pick_radix(mlen * 8, &k); /* k covers every base of mod_len bytes */
  if (w == 0) return E_SIZE;

  u32 *n = key_n();
  to_limbs(n, m, mlen, w, k);
  /* -n^-1 mod 2^w by Newton's iteration (n*n = 1 mod 8 for odd n: 3, 6, 12, 24, 48 bits). */
  u32 inv = n[0];
  for (int i = 0; i < 4; i++) inv *= 2 - n[0] * inv;
  const u32 n0inv = (0u - inv) & ((1u << w) - 1);

  compute_r2(key_r2(), n, n0inv, w, k, bits);

  /* The exponent as u32 words, least significant first. */
  u32 *ew = key_e();
  const u32 ewords = (elen + 3) / 4;
  for (u32 i = 0; i < ewords; i++) ew[i] = 0;
  for (u32 i = 0; i < elen; i++) ew[i / 4] |= (u32)e[elen - 1 - i] << (8 * (i % 4));

  key[H_K] = k;
  key[H_W] = w;
  key[H_N0INV] = n0inv;
  key[H_EWORDS] = ewords;
  key[H_MODLEN] = mlen;
  return (i32)((HEADER + 2 * STRIDE + ewords) * 4);
}

EXPORT("rsa_modexp") i32 rsa_modexp(u32 base_len) {
  const u32 k = key[H_K], w = key[H_W], n0inv = key[H_N0INV], ewords = key[H_EWORDS], mlen = key[H_MODLEN];
  const u32 *n = key_n();
  const u32 *e = key_e();
  u32 bs;
  if (base_len > MAX_BYTES) return E_BASE;
  const u32 blen = strip(io + MAX_BYTES, base_len, &bs);
  if (blen > mlen) return E_BASE;

  /* xs = base * R mod n (base < 2^(8 mlen) <= R). */
  to_limbs(tmp, io + MAX_BYTES + bs, blen, w, k);
  mont_mul(xs, tmp, key_r2(), n, n0inv, w, k);

  /* Left to right over the exponent's bits, from the one below the top bit. */
  u32 top = ewords - 1;
  while (top > 0 && e[top] == 0) top--;
  int bit = 31 - __builtin_clz(e[top]);
  for (u32 i = 0; i < k + PAD; i++) acc[i] = xs[i];
  for (i32 word = (i32)top; word >= 0; word--) {
    for (bit = (word == (i32)top ? bit - 1 : 31); bit >= 0; bit--) {
      mont_sqr(acc, acc, n, n0inv, w, k);
      if ((e[word] >> bit) & 1) mont_mul(acc, acc, xs, n, n0inv, w, k);
    }
  }

  /* Out of Montgomery form: acc / R mod n. */
  clear_t(k);
  for (u32 i = 0; i < k; i++) t[i] = acc[i];
  reduce(acc, n, n0inv, w, k);
  to_bytes(io + 2 * MAX_BYTES, mlen, acc, w, k);
  return 0;
}
