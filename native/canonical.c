/*
 * jobhook canonical JSON engine, byte level, for WebAssembly (freestanding C, no libc).
 *
 * Produces exactly the bytes of the JS engine (src/lib/core/canonical/) for the four
 * dialects; the JS engine is the oracle (test/core/canonical/differential.test.ts).
 *
 * Shape:
 * - parse(): one pass over the UTF-8 body with an explicit container stack. It
 *   validates strict RFC 8259 JSON and UTF-8, decodes string escapes *in place*
 *   (a decoded string is never longer than its escaped text), and writes a tape
 *   of u32 words that points into the body. Objects whose keys are not already in
 *   code point order get a permutation of their members appended after them.
 *   On an error it returns R_MALFORMED and leaves in error_info() what the JS
 *   parser (src/lib/core/canonical/parse.ts) would report: a reason code, the
 *   UTF-8 byte offset, and what the message needs (the character there, the key
 *   of a duplicate). The JS side writes the message from it without parsing
 *   again: re-running the JS parser cost 5 to 30 times this parse on a 1 MB body,
 *   on the calling thread (BENCHMARKS.md). The messages themselves are in JS
 *   (core/canonical/reasons.ts), shared with the JS parser.
 * - serialize(): walks the tape with an explicit stack and writes the canonical
 *   bytes of one dialect into a 64 KiB buffer, handing each full buffer to JS
 *   (import env.emit). Number tokens whose text depends on the dialect are
 *   formatted by JS (import env.format_number, the engine's own formatFloat).
 *
 * Tape entries (word 0 holds the tag in its low 3 bits):
 *   scalar     [len << 3 | tag, offset]            tag ASIS, STR, STR_ESC, INT_BIG, FLOAT
 *   array      [count << 3 | ARR, end]
 *   object     [count << 3 | OBJ, end, perm]       perm = 0 when members are in order,
 *                                                   else index of `count` words, each the
 *                                                   index of a member's key entry
 *   An object member is its key entry (a STR or STR_ESC scalar) followed by its value.
 *   `end` is the index after the container's subtree (and its permutation).
 */

#include <wasm_simd128.h>

typedef unsigned char u8;
typedef unsigned int u32;
typedef int i32;
typedef unsigned long long u64;
typedef long long i64;

#define TAG_ASIS 0    /* written as it stands in every dialect: literals, plain numbers */
#define TAG_STR 1     /* string without escapes: the body bytes between the quotes */
#define TAG_STR_ESC 2 /* string that had escapes, decoded in place to (WTF-)8 */
#define TAG_INT_BIG 3 /* integer token of more than 18 digits */
#define TAG_FLOAT 4   /* float token whose text depends on the dialect */
#define TAG_ARR 5
#define TAG_OBJ 6

#define F_LONE_SURROGATE 1
#define F_UNSAFE_INTEGER 2
#define F_NON_FINITE 4
#define F_NON_ASCII 8
#define F_DIALECT_NUMBERS 16
#define F_NEGATIVE_ZERO 32

#define D_ORJSON 0
#define D_ORJSON_LEGACY 1
#define D_PYTHON_UTF8 2
#define D_PYTHON 3

#define PAD 64          /* readable zero bytes after the body: scans stop on them */
#define MAX_DEPTH 2000  /* MAX_MAX_DEPTH in parse.ts */
#define CHUNK 65536     /* bytes handed to JS at most per emit() */
#define SLACK 128       /* writable bytes after a chunk: small copies write 32 at once */
#define LEN_LIMIT (1u << 29)

#define EXPORT(name) __attribute__((export_name(name)))
#define IMPORT(name) __attribute__((import_module("env"), import_name(name)))
#define INLINE static inline __attribute__((always_inline))
#define likely(x) __builtin_expect(!!(x), 1)
#define unlikely(x) __builtin_expect(!!(x), 0)

/* Hands bytes [p, p + n) of output to the JS sink. */
IMPORT("emit") void js_emit(const u8 *p, u32 n, u32 last);
/* Writes formatFloat(Number(token), dialect) at dst (at most 32 bytes); returns its length. */
IMPORT("format_number") u32 js_format_number(const u8 *token, u32 n, u32 dialect, u8 *dst);
/* Number.isFinite(Number(token)). */
IMPORT("number_is_finite") u32 js_number_is_finite(const u8 *token, u32 n);

#define memcpy __builtin_memcpy
#define memmove __builtin_memmove
#define memset __builtin_memset

/* ------------------------------------------------------------------------------------
 * Allocator: address-ordered blocks with boundary tags, first fit, coalescing on free,
 * the last block can grow in place. Few blocks are alive at once (a handful per
 * document), so a walk over all of them is cheap. Memory freed at the top is reused;
 * WebAssembly memory itself never shrinks (a high-water mark).
 * ---------------------------------------------------------------------------------- */

typedef struct Block {
  u32 size;      /* whole block in bytes, header included, multiple of 16 */
  u32 prev_size; /* size of the block before (0 for the first) */
  u32 used;
  u32 pad_;
} Block;

#define HDR 16u

extern u8 __heap_base;
static u32 heap_start; /* first block */
static u32 heap_top;   /* end of the last block */

static u32 align16(u32 n) { return (n + 15u) & ~15u; }

/* Makes [0, end) addressable. */
static int reserve(u32 end) {
  u32 have = (u32)__builtin_wasm_memory_size(0) * 65536u;
  if (end <= have) return 1;
  u32 pages = (u32)(((u64)end - have + 65535u) >> 16);
  return __builtin_wasm_memory_grow(0, pages) != (__SIZE_TYPE__)-1;
}

static void heap_init(void) {
  if (heap_start) return;
  heap_start = align16((u32)(__SIZE_TYPE__)&__heap_base);
  heap_top = heap_start;
}

INLINE Block *block_at(u32 a) { return (Block *)(__SIZE_TYPE__)a; }
INLINE u32 addr_of(const void *p) { return (u32)(__SIZE_TYPE__)p; }

/* Splits block b (at a) so that it is `need` bytes, the rest becoming a free block. */
static void split(u32 a, u32 need) {
  Block *b = block_at(a);
  u32 rest = b->size - need;
  if (rest < 64) return;
  b->size = need;
  Block *r = block_at(a + need);
  r->size = rest;
  r->prev_size = need;
  r->used = 0;
  u32 after = a + need + rest;
  if (after < heap_top) block_at(after)->prev_size = rest;
}

static u32 total_need(u32 n) {
  if (n > 0xFFFFFF00u - HDR) return 0;
  return align16(n) + HDR;
}

EXPORT("alloc") void *alloc(u32 n) {
  heap_init();
  u32 need = total_need(n);
  if (!need) return 0;
  for (u32 a = heap_start; a < heap_top; a += block_at(a)->size) {
    Block *b = block_at(a);
    if (!b->used && b->size >= need) {
      split(a, need);
      b->used = 1;
      return (void *)(__SIZE_TYPE__)(a + HDR);
    }
  }
  u32 a = heap_top;
  if ((u64)a + need > 0xFFFFFFF0u || !reserve(a + need)) return 0;
  Block *b = block_at(a);
  b->size = need;
  b->used = 1;
  b->prev_size = 0;
  if (a > heap_start) {
    /* find the previous block's size: it is the block that ends at a */
    u32 p = heap_start;
    while (p + block_at(p)->size < a) p += block_at(p)->size;
    b->prev_size = block_at(p)->size;
  }
  heap_top = a + need;
  return (void *)(__SIZE_TYPE__)(a + HDR);
}

EXPORT("free") void release(void *p) {
  if (!p) return;
  u32 a = addr_of(p) - HDR;
  Block *b = block_at(a);
  b->used = 0;
  /* merge with the next block */
  u32 next = a + b->size;
  if (next < heap_top && !block_at(next)->used) {
    b->size += block_at(next)->size;
    u32 after = a + b->size;
    if (after < heap_top) block_at(after)->prev_size = b->size;
  }
  /* merge with the previous block */
  if (a > heap_start && b->prev_size) {
    u32 pa = a - b->prev_size;
    Block *pb = block_at(pa);
    if (!pb->used) {
      pb->size += b->size;
      u32 after = pa + pb->size;
      if (after < heap_top) block_at(after)->prev_size = pb->size;
      a = pa;
      b = pb;
    }
  }
  /* a free block at the top goes back to the wilderness */
  if (a + b->size == heap_top) heap_top = a;
}

/* Grows (or keeps) the block of p to hold n bytes; the first `keep` bytes survive. */
static void *grow(void *p, u32 keep, u32 n) {
  u32 a = addr_of(p) - HDR;
  Block *b = block_at(a);
  u32 need = total_need(n);
  if (!need) return 0;
  if (b->size >= need) return p;
  u32 next = a + b->size;
  u32 avail = b->size;
  if (next < heap_top && !block_at(next)->used) {
    avail += block_at(next)->size;
    next += block_at(next)->size;
  }
  if (next == heap_top) {
    /* the block (maybe with a free neighbour) is last: extend it in place */
    if ((u64)a + need > 0xFFFFFFF0u || !reserve(a + need)) return 0;
    b->size = need;
    heap_top = a + need;
    return p;
  }
  if (avail >= need) {
    b->size = avail;
    if (next < heap_top) block_at(next)->prev_size = avail;
    split(a, need);
    return p;
  }
  void *q = alloc(n);
  if (!q) return 0;
  memcpy(q, p, keep);
  release(p);
  return q;
}

/* An input buffer for a body of up to n bytes (the parser needs PAD bytes after it). */
EXPORT("input_alloc") u8 *input_alloc(u32 n) {
  if (n >= LEN_LIMIT) return 0;
  return alloc(n + PAD);
}

/* Grows an input buffer holding `used` bytes to hold n. */
EXPORT("input_grow") u8 *input_grow(u8 *p, u32 used, u32 n) {
  if (n >= LEN_LIMIT) return 0;
  return grow(p, used, n + PAD);
}

/* Bytes of heap in use or kept (for tests: it must not grow over parse/dispose cycles). */
EXPORT("heap_bytes") u32 heap_bytes(void) {
  heap_init();
  return heap_top - heap_start;
}

/* ------------------------------------------------------------------------------------
 * Byte scanning
 * ---------------------------------------------------------------------------------- */

/* First byte at or after p that is '"', '\\', a control (< 0x20) or >= 0x7F.
   The zero padding after the body stops it. */
INLINE const u8 *scan_string(const u8 *p) {
  const v128_t quote = wasm_i8x16_splat('"');
  const v128_t bslash = wasm_i8x16_splat('\\');
  const v128_t c20 = wasm_i8x16_splat(0x20);
  const v128_t c5f = wasm_i8x16_splat(0x5f);
  for (;;) {
    v128_t v = wasm_v128_load(p);
    v128_t m = wasm_v128_or(wasm_v128_or(wasm_i8x16_eq(v, quote), wasm_i8x16_eq(v, bslash)),
                            wasm_u8x16_ge(wasm_i8x16_sub(v, c20), c5f));
    u32 bits = (u32)wasm_i8x16_bitmask(m);
    if (bits) return p + __builtin_ctz(bits);
    p += 16;
  }
}

/* First byte in [p, end) that a dialect must escape ('"', '\\', controls, and with
   `ascii` everything from 0x7F up), or end. May read up to 15 bytes past end. */
INLINE const u8 *scan_escape(const u8 *p, const u8 *end, int ascii) {
  const v128_t quote = wasm_i8x16_splat('"');
  const v128_t bslash = wasm_i8x16_splat('\\');
  const v128_t c20 = wasm_i8x16_splat(0x20);
  const v128_t lim = wasm_i8x16_splat(ascii ? 0x5f : 0xe0);
  while (p < end) {
    v128_t v = wasm_v128_load(p);
    v128_t m = wasm_v128_or(wasm_v128_or(wasm_i8x16_eq(v, quote), wasm_i8x16_eq(v, bslash)),
                            wasm_u8x16_ge(wasm_i8x16_sub(v, c20), lim));
    u32 bits = (u32)wasm_i8x16_bitmask(m);
    if (bits) {
      const u8 *q = p + __builtin_ctz(bits);
      return q < end ? q : end;
    }
    p += 16;
  }
  return end;
}

/* Length of the valid UTF-8 sequence (2-4 bytes) starting with byte >= 0x80 at p, or 0. */
INLINE u32 utf8_seq(const u8 *p) {
  u32 c = p[0];
  if (c < 0xC2) return 0;
  if (c < 0xE0) return (p[1] & 0xC0) == 0x80 ? 2 : 0;
  if (c < 0xF0) {
    if ((p[1] & 0xC0) != 0x80 || (p[2] & 0xC0) != 0x80) return 0;
    u32 cp = ((c & 0x0F) << 12) | ((u32)(p[1] & 0x3F) << 6) | (p[2] & 0x3F);
    if (cp < 0x800 || (cp >= 0xD800 && cp <= 0xDFFF)) return 0;
    return 3;
  }
  if (c < 0xF5) {
    if ((p[1] & 0xC0) != 0x80 || (p[2] & 0xC0) != 0x80 || (p[3] & 0xC0) != 0x80) return 0;
    u32 cp = ((c & 0x07) << 18) | ((u32)(p[1] & 0x3F) << 12) | ((u32)(p[2] & 0x3F) << 6) | (p[3] & 0x3F);
    if (cp < 0x10000 || cp > 0x10FFFF) return 0;
    return 4;
  }
  return 0;
}

INLINE int hexval(u32 c) {
  if (c - '0' < 10) return (int)(c - '0');
  c |= 0x20;
  if (c - 'a' < 6) return (int)(c - 'a' + 10);
  return -1;
}

/* The four hex digits at p, or -1. */
INLINE int hex4(const u8 *p) {
  int a = hexval(p[0]), b = hexval(p[1]), c = hexval(p[2]), d = hexval(p[3]);
  if ((a | b | c | d) < 0) return -1;
  return (a << 12) | (b << 8) | (c << 4) | d;
}

INLINE u8 *put_utf8(u8 *w, u32 cp) {
  if (cp < 0x80) {
    *w++ = (u8)cp;
  } else if (cp < 0x800) {
    *w++ = (u8)(0xC0 | (cp >> 6));
    *w++ = (u8)(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    /* also lone surrogates (WTF-8), which keep code point order */
    *w++ = (u8)(0xE0 | (cp >> 12));
    *w++ = (u8)(0x80 | ((cp >> 6) & 0x3F));
    *w++ = (u8)(0x80 | (cp & 0x3F));
  } else {
    *w++ = (u8)(0xF0 | (cp >> 18));
    *w++ = (u8)(0x80 | ((cp >> 12) & 0x3F));
    *w++ = (u8)(0x80 | ((cp >> 6) & 0x3F));
    *w++ = (u8)(0x80 | (cp & 0x3F));
  }
  return w;
}

/* ------------------------------------------------------------------------------------
 * Errors
 *
 * The JS parser's errors, in its order: it decodes the whole body first (invalid
 * UTF-8 anywhere comes before any syntax error), then parses from the start and
 * fails at the first problem it meets. This parser fails at the first problem it
 * meets too, but meets duplicate keys later (it compares keys when an object
 * closes) and does not look at bytes past the point where it stopped; diagnose()
 * settles that, on the error path only, so valid bodies pay nothing for it.
 * ---------------------------------------------------------------------------------- */

/* The reason codes of error_info()->reason; engine.ts maps each to its message. */
enum {
  E_UTF8 = 1,     /* invalid UTF-8 */
  E_VALUE_END,    /* unexpected end of input, expected a value */
  E_VALUE_CHAR,   /* unexpected <character>, expected a value */
  E_LITERAL,      /* invalid literal, expected true, false or null (arg: its first letter) */
  E_MINUS,        /* invalid number: a digit must follow the minus sign */
  E_POINT,        /* ... the decimal point */
  E_EXPONENT,     /* ... the exponent mark */
  E_HEX,          /* invalid \u escape: four hex digits expected */
  E_UNTERMINATED, /* unterminated string */
  E_ESCAPE,       /* invalid escape in string */
  E_CONTROL,      /* unescaped control character in string */
  E_DEPTH,        /* nesting deeper than the limit */
  E_ARRAY_END,    /* unexpected end of input in an array */
  E_ARRAY_CHAR,   /* unexpected <character>, expected ',' or ']' */
  E_OBJECT_END,   /* unexpected end of input in an object */
  E_OBJECT_CHAR,  /* unexpected <character>, expected ',' or '}' */
  E_KEY,          /* expected a string key */
  E_COLON,        /* expected ':' after an object key */
  E_DUPLICATE,    /* duplicate key (arg, arg2: the key's decoded bytes) */
  E_TRAILING,     /* unexpected data after the JSON value */
  /* what the parser notes where it stops; diagnose() turns them into the above */
  E_NUMBER,       /* a value that is no token: a bad number or no value at all */
  E_DUP_CLOSE     /* an object that closed with a duplicate key */
};

typedef struct Failure {
  u32 reason;
  u32 offset; /* UTF-8 byte offset in the body, as BodyMalformedError gives it */
  u32 arg;    /* the code point at offset (E_*_CHAR), the literal's first letter
                 (E_LITERAL), the address of the key's decoded (WTF-8) bytes
                 (E_DUPLICATE); while parsing, E_CONTROL's opening quote */
  u32 arg2;   /* E_DUPLICATE: the length of those bytes */
} Failure;

static Failure err;

/* Where parse() left the reason of its last R_MALFORMED. */
EXPORT("error_info") Failure *error_info(void) { return &err; }

/* Notes a failure in a string (at is the reader's position) and returns 0, string_tail's error. */
static __attribute__((noinline)) u32 string_fails(u32 reason, u32 at, u32 quote) {
  err.reason = reason;
  err.offset = at;
  err.arg = quote;
  return 0;
}

/* ------------------------------------------------------------------------------------
 * Parser
 *
 * One function keeps the parser's state (tape pointer and length, flags, the open
 * container) in locals, so the compiler holds them in WebAssembly locals rather than
 * memory; the rare paths (escapes and non-ASCII in strings, sorting, growing the
 * tape, asking JS about a number) are separate functions.
 * ---------------------------------------------------------------------------------- */

typedef struct Doc {
  u8 *in;
  u32 len;
  u32 *tape;
  u32 tape_len;
  u32 flags;
  u64 layout;
} Doc;

/* An open container that is not the innermost one (that one lives in locals). */
typedef struct Frame {
  u32 hdr;      /* tape index of the container's header */
  u32 count;    /* items so far */
  u32 is_obj;
} Frame;

static Frame frames[MAX_DEPTH + 2];

/*
 * Compares two keys (tape indices of key entries) by their decoded bytes, 8 at a
 * time: keys lie in the padded body, so reading past their end is safe (and masked).
 */
INLINE int key_cmp(const u32 *t, const u8 *s, u32 a, u32 b) {
  u32 la = t[a] >> 3, lb = t[b] >> 3;
  const u8 *pa = s + t[a + 1], *pb = s + t[b + 1];
  u32 n = la < lb ? la : lb;
  for (u32 i = 0;; i += 8) {
    u64 x, y;
    memcpy(&x, pa + i, 8);
    memcpy(&y, pb + i, 8);
    u32 rem = n - i;
    if (rem < 8) {
      u64 mask = rem ? ~0ull >> (64 - 8 * rem) : 0;
      x &= mask;
      y &= mask;
    }
    if (x != y) {
      x = __builtin_bswap64(x);
      y = __builtin_bswap64(y);
      return x < y ? -1 : 1;
    }
    if (rem <= 8) break;
  }
  return (la > lb) - (la < lb);
}

static void sift_down(const u32 *t, const u8 *s, u32 *m, u32 root, u32 n) {
  for (;;) {
    u32 c = 2 * root + 1;
    if (c >= n) return;
    if (c + 1 < n && key_cmp(t, s, m[c], m[c + 1]) < 0) c++;
    if (key_cmp(t, s, m[root], m[c]) >= 0) return;
    u32 x = m[root];
    m[root] = m[c];
    m[c] = x;
    root = c;
  }
}

/* Sorts the key entries m[0..n) by key (equal keys end up side by side, in no particular order). */
static void heap_sort(const u32 *t, const u8 *s, u32 *m, u32 n) {
  for (u32 r = n / 2; r-- > 0;) sift_down(t, s, m, r, n);
  for (u32 e = n - 1; e > 0; e--) {
    u32 x = m[0];
    m[0] = m[e];
    m[e] = x;
    sift_down(t, s, m, 0, e);
  }
}

/* Whether the key at tape index a is the lb bytes at pb (16 at a time, no branch per length). */
INLINE int key_eq(const u32 *t, const u8 *s, u32 a, const u8 *pb, u32 lb) {
  if ((t[a] >> 3) != lb) return 0;
  const u8 *pa = s + t[a + 1];
  for (u32 i = 0;; i += 16) {
    u32 eq = (u32)wasm_i8x16_bitmask(wasm_i8x16_eq(wasm_v128_load(pa + i), wasm_v128_load(pb + i)));
    u32 rem = lb - i;
    if (rem <= 16) return (eq | (0xFFFFFFFFu << rem)) == 0xFFFFFFFFu;
    if (eq != 0xFFFF) return 0;
  }
}

/*
 * The key order of the last object of each member count up to 16: bodies repeat a
 * few object shapes (every OCR word has the same keys in the same order), so most
 * objects reuse an order after comparing their keys for equality, which costs less
 * than sorting them (and mispredicts less). Valid for one parse (`shape_gen`).
 */
typedef struct Shape {
  u32 gen;
  u32 in_order;
  u32 len[16];
  const u8 *key[16];
  u8 ord[16]; /* ord[r] = the ordinal of the r-th member in key order */
} Shape;

static Shape shapes[17];
static u32 shape_gen;

/*
 * Orders the object with header at t[h] and n >= 2 members: writes at t[at] the tape
 * indices of its members' keys in key order and returns 1, or returns 2 when the
 * members are already in order (nothing written), or 0 on a duplicate key.
 */
static __attribute__((noinline)) u32 sort_object(u32 *t, const u8 *s, u32 h, u32 n, u32 at) {
  u32 *m = t + at;
  u32 k = h + 3;
  for (u32 j = 0; j < n; j++) {
    m[j] = k;
    k += 2; /* the key */
    k = (t[k] & 7) >= TAG_ARR ? t[k + 1] : k + 2;
  }
  if (n <= 16) {
    Shape *sh = &shapes[n];
    u32 pos[16];
    for (u32 j = 0; j < n; j++) pos[j] = m[j];
    if (sh->gen == shape_gen) {
      u32 same = 1;
      for (u32 j = 0; j < n && same; j++) same = key_eq(t, s, pos[j], sh->key[j], sh->len[j]);
      if (same) {
        if (sh->in_order) return 2;
        for (u32 r = 0; r < n; r++) m[r] = pos[sh->ord[r]];
        return 1;
      }
    }
    /* insertion sort of the ordinals; an equal key is met before a smaller one, so every duplicate is seen */
    u8 ord[16];
    u32 moved = 0;
    for (u32 a = 0; a < n; a++) {
      u8 x = (u8)a;
      u32 b = a;
      for (; b > 0; b--) {
        int d = key_cmp(t, s, pos[ord[b - 1]], pos[x]);
        if (d == 0) return 0;
        if (d < 0) break;
        ord[b] = ord[b - 1];
        moved = 1;
      }
      ord[b] = x;
    }
    sh->gen = shape_gen;
    sh->in_order = !moved;
    for (u32 j = 0; j < n; j++) {
      sh->key[j] = s + t[pos[j] + 1];
      sh->len[j] = t[pos[j]] >> 3;
      sh->ord[j] = ord[j];
      m[j] = pos[ord[j]];
    }
    return moved ? 1 : 2;
  }
  u32 in_order = 1;
  for (u32 j = 1; j < n && in_order; j++) {
    int d = key_cmp(t, s, m[j - 1], m[j]);
    if (d == 0) return 0;
    in_order = d < 0;
  }
  if (in_order) return 2;
  heap_sort(t, s, m, n);
  for (u32 j = 1; j < n; j++) {
    if (key_cmp(t, s, m[j - 1], m[j]) == 0) return 0;
  }
  return 1;
}

static __attribute__((noinline)) u32 *tape_grow(u32 *t, u32 used, u32 cap) { return grow(t, used * 4u, cap * 4u); }

INLINE u32 skip_ws(const u8 *s, u32 i) {
  /* every whitespace byte is <= ' ', so one compare passes the usual token */
  while (unlikely(s[i] <= ' ')) {
    u32 c = s[i];
    if (c == ' ' || c == '\n' || c == '\r' || c == '\t') i++;
    else break;
  }
  return i;
}

/* Results of string_tail (a rare path, so globals rather than a struct in memory). */
static u32 str_len, str_tag, str_flags;

/*
 * The rest of a string from p, its first byte that is not plain printable ASCII
 * (`start` is the index after the opening quote). Validates UTF-8, decodes escapes
 * in place (writing at w behind the reader r: the decoded form is never longer).
 * Returns the index after the closing quote, or 0 on an error; sets str_len, str_tag
 * and str_flags.
 */
static __attribute__((noinline)) u32 string_tail(u8 *s, u32 start, const u8 *p) {
  u32 flags = 0;
  for (;;) {
    u32 c = *p;
    if (c == '"') {
      str_len = (u32)(p - (s + start));
      str_tag = TAG_STR;
      str_flags = flags;
      return (u32)(p - s) + 1;
    }
    if (c == '\\') break;
    /* a control character, or the end of the body (told apart by diagnose()) */
    if (c < 0x20) return string_fails(E_CONTROL, (u32)(p - s), start - 1);
    if (c == 0x7F) {
      p++;
    } else {
      u32 n = utf8_seq(p);
      if (!n) return string_fails(E_UTF8, (u32)(p - s), start - 1);
      p += n;
    }
    flags |= F_NON_ASCII;
    p = scan_string(p);
  }
  u8 *w = (u8 *)p;
  const u8 *r = p;
  for (;;) {
    u32 c = *r;
    if (c == '"') break;
    if (c == '\\') {
      u32 e = r[1];
      u32 b;
      switch (e) {
        case '"': b = '"'; break;
        case '\\': b = '\\'; break;
        case '/': b = '/'; break;
        case 'b': b = 0x08; break;
        case 'f': b = 0x0C; break;
        case 'n': b = 0x0A; break;
        case 'r': b = 0x0D; break;
        case 't': b = 0x09; break;
        case 'u': {
          int h = hex4(r + 2);
          if (h < 0) return string_fails(E_HEX, (u32)(r - s), start - 1);
          r += 6;
          u32 cp = (u32)h;
          if (cp >= 0x7F) flags |= F_NON_ASCII;
          if (cp >= 0xD800 && cp <= 0xDBFF) {
            /* a high surrogate joins an immediately following low one (UTF-16 adjacency) */
            int lo = (r[0] == '\\' && r[1] == 'u') ? hex4(r + 2) : -1;
            if (lo >= 0xDC00 && lo <= 0xDFFF) {
              cp = 0x10000 + ((cp - 0xD800) << 10) + ((u32)lo - 0xDC00);
              r += 6;
            } else {
              flags |= F_LONE_SURROGATE;
            }
          } else if (cp >= 0xDC00 && cp <= 0xDFFF) {
            flags |= F_LONE_SURROGATE;
          }
          w = put_utf8(w, cp);
          continue;
        }
        default:
          /* a backslash that ends the body is an unterminated string (diagnose()) */
          return string_fails(E_ESCAPE, (u32)(r - s), start - 1);
      }
      *w++ = (u8)b;
      r += 2;
    } else if (c >= 0x20 && c < 0x7F) {
      const u8 *q = scan_string(r);
      u32 n = (u32)(q - r);
      memmove(w, r, n);
      w += n;
      r = q;
    } else if (c < 0x20) {
      return string_fails(E_CONTROL, (u32)(r - s), start - 1);
    } else if (c == 0x7F) {
      flags |= F_NON_ASCII;
      *w++ = (u8)c;
      r++;
    } else {
      u32 n = utf8_seq(r);
      if (!n) return string_fails(E_UTF8, (u32)(r - s), start - 1);
      flags |= F_NON_ASCII;
      for (u32 k = 0; k < n; k++) w[k] = r[k];
      w += n;
      r += n;
    }
  }
  str_len = (u32)(w - (s + start));
  str_tag = TAG_STR_ESC;
  str_flags = flags;
  return (u32)(r - s) + 1;
}

INLINE int is_digit(u32 c) { return c - '0' < 10; }

/*
 * Number of consecutive ASCII digits at p, 8 bytes at a time without a branch per
 * digit (number tokens vary in length, and a mispredicted loop exit costs more than
 * the token). A byte is a digit when its high nibble is 3 before and after adding 6.
 * A carry out of a byte >= 0xFA only disturbs later bytes, past that non-digit.
 * Reads up to 8 bytes past the run: the body is padded.
 */
INLINE u32 digit_run(const u8 *p) {
  const u64 hi = 0xF0F0F0F0F0F0F0F0ull, three = 0x3030303030303030ull, six = 0x0606060606060606ull;
  for (u32 n = 0;; n += 8) {
    u64 x;
    memcpy(&x, p + n, 8);
    u64 m = ((x & hi) ^ three) | (((x + six) & hi) ^ three);
    if (likely(m)) return n + ((u32)__builtin_ctzll(m) >> 3);
  }
}

/* Finiteness of Number(token) given the decimal exponent e of its first significant digit. */
static __attribute__((noinline)) int finite_by_exponent(i64 e, const u8 *token, u32 n) {
  if (e <= 307) return 1;
  if (e >= 309) return 0;
  return (int)js_number_is_finite(token, n);
}

/*
 * Parses the number token at i into the scalar entry e[0..2). Returns the index
 * after it, or 0. Mirrors Parser.number() in parse.ts, flags included.
 */
INLINE u32 parse_number(const u8 *s, u32 i, u32 *e, u32 *flags) {
  u32 start = i;
  if (s[i] == '-') i++;
  u32 int_start = i;
  u32 int_len = digit_run(s + i);
  if (!int_len) return 0;
  if (s[i] == '0') int_len = 1; /* a leading zero is the whole integer part (what follows is then an error) */
  i += int_len;
  u32 frac_start = 0, frac_len = 0;
  int has_frac = 0, has_exp = 0;
  i64 exp = 0;
  if (s[i] == '.') {
    has_frac = 1;
    frac_start = i + 1;
    frac_len = digit_run(s + frac_start);
    if (!frac_len) return 0;
    i = frac_start + frac_len;
  }
  if (unlikely((s[i] | 0x20) == 'e')) {
    has_exp = 1;
    i++;
    int neg = 0;
    if (s[i] == '+' || s[i] == '-') {
      neg = s[i] == '-';
      i++;
    }
    if (!is_digit(s[i])) return 0;
    do {
      if (exp < 100000000) exp = exp * 10 + (s[i] - '0');
      i++;
    } while (is_digit(s[i]));
    if (neg) exp = -exp;
  }
  u32 n = i - start;
  e[1] = start;
  e[0] = (n << 3) | TAG_ASIS;
  if (!has_frac && !has_exp) {
    if (unlikely(int_len > 15)) {
      if (int_len > 18) {
        *flags |= F_UNSAFE_INTEGER;
      } else {
        u64 v = 0;
        for (u32 k = 0; k < int_len; k++) v = v * 10 + (s[int_start + k] - '0');
        if (v > 9007199254740991ull) *flags |= F_UNSAFE_INTEGER;
      }
    }
    if (likely(int_len <= 18)) {
      if (unlikely(n == 2 && s[start] == '-' && s[start + 1] == '0')) {
        /* written 0: point at the 0 */
        *flags |= F_NEGATIVE_ZERO;
        e[0] = (1u << 3) | TAG_ASIS;
        e[1] = start + 1;
      }
      return i;
    }
    *flags |= F_DIALECT_NUMBERS;
    if (int_len > 308 && !finite_by_exponent((i64)int_len - 1, s + start, n)) *flags |= F_NON_FINITE;
    e[0] = (n << 3) | TAG_INT_BIG;
    return i;
  }
  if (!has_exp) {
    /* asWritten(): a fixed-notation token that is its canonical text in every dialect */
    u32 last = s[frac_start + frac_len - 1];
    int as_written;
    if (last == '0' && frac_len != 1) {
      as_written = 0;
    } else if (s[int_start] != '0') {
      as_written = int_len > 15 ? 0 : (last == '0' || int_len + frac_len <= 15);
    } else if (last == '0') {
      as_written = 1;
    } else {
      /* leading zeros of the fraction (fewer than frac_len: its last digit is not 0) */
      u64 x;
      memcpy(&x, s + frac_start, 8);
      x ^= 0x3030303030303030ull;
      u32 z = x ? (u32)__builtin_ctzll(x) >> 3 : 8;
      as_written = z <= 3 && frac_len - z <= 15;
    }
    if (likely(as_written)) return i;
  }
  if (has_exp || int_len + frac_len > 300) {
    /* the decimal exponent of the first significant digit decides finiteness */
    i64 e10;
    int zero = 0;
    if (s[int_start] != '0') {
      e10 = (i64)int_len - 1;
    } else {
      u32 z = 0;
      while (z < frac_len && s[frac_start + z] == '0') z++;
      if (z == frac_len) zero = 1;
      e10 = -(i64)z - 1;
    }
    if (!zero && !finite_by_exponent(e10 + exp, s + start, n)) *flags |= F_NON_FINITE;
  }
  *flags |= F_DIALECT_NUMBERS;
  e[0] = (n << 3) | TAG_FLOAT;
  return i;
}

/* ------------------------------------------------------------------------------------
 * The error path: from where the parser stopped to the JS parser's error
 * ---------------------------------------------------------------------------------- */

/*
 * Offset of the first byte in [i, len) that starts an invalid UTF-8 sequence, or len
 * (invalidUtf8Offset() in utf8.ts). i is at the start of a sequence; ASCII is passed
 * 16 bytes at a time; a sequence cut by the end meets the zero padding and fails.
 */
static u32 invalid_utf8(const u8 *s, u32 i, u32 len) {
  while (i < len) {
    u32 high = (u32)wasm_i8x16_bitmask(wasm_v128_load(s + i));
    if (!high) {
      i += 16;
      continue;
    }
    i += __builtin_ctz(high);
    if (i >= len) break;
    u32 n = utf8_seq(s + i);
    if (!n) return i;
    i += n;
  }
  return len;
}

/* The code point of the valid UTF-8 sequence at p. */
static u32 code_point(const u8 *p) {
  u32 c = p[0];
  if (c < 0x80) return c;
  if (c < 0xE0) return ((c & 0x1F) << 6) | (p[1] & 0x3F);
  if (c < 0xF0) return ((c & 0x0F) << 12) | ((u32)(p[1] & 0x3F) << 6) | (p[2] & 0x3F);
  return ((c & 0x07) << 18) | ((u32)(p[1] & 0x3F) << 12) | ((u32)(p[2] & 0x3F) << 6) | (p[3] & 0x3F);
}

/* A value at i that parse_number() refused: which check of Parser.number() (or value()) fails, and where. */
static void number_failure(const u8 *s, u32 i) {
  u32 p = i;
  if (s[p] == '-') p++;
  if (!is_digit(s[p])) {
    err.reason = p > i ? E_MINUS : E_VALUE_CHAR; /* no number at all: no value */
    err.offset = p;
    return;
  }
  if (s[p] == '0') p++;
  else while (is_digit(s[p])) p++;
  if (s[p] == '.') {
    p++;
    if (!is_digit(s[p])) {
      err.reason = E_POINT;
      err.offset = p;
      return;
    }
    while (is_digit(s[p])) p++;
  }
  /* what is left to fail: an exponent mark without digits */
  p++;
  if (s[p] == '+' || s[p] == '-') p++;
  err.reason = E_EXPONENT;
  err.offset = p;
}

/* The duplicate is the key entry at tape index k: parse.ts reports its opening quote. */
static void note_duplicate(const u8 *s, const u32 *t, u32 k) {
  err.reason = E_DUPLICATE;
  err.offset = t[k + 1] - 1;
  err.arg = addr_of(s + t[k + 1]);
  err.arg2 = t[k] >> 3;
}

/*
 * The open object of frame f: parse.ts compares each key with the one before while
 * they come in order, and fails at once on an equal one (before the key's value, so
 * before anything this parser met after it). Its keys are its complete members' and
 * the key of the member being read, if it was read (its entry lies below `limit`, the
 * tape index where the member's value starts or would have). Returns 1 when it found
 * that duplicate.
 */
static int in_order_duplicate(const u8 *s, const u32 *t, const Frame *f, u32 limit) {
  u32 n = f->count;
  u32 k = f->hdr + 3; /* the first key */
  if (n == 0) return 0; /* one key at most */
  for (u32 j = 1;; j++) {
    u32 prev = k;
    k += 2;
    k = (t[k] & 7) >= TAG_ARR ? t[k + 1] : k + 2; /* past member j - 1: key j */
    if (j == n && k >= limit) return 0;           /* no key after the complete members */
    int d = key_cmp(t, s, prev, k);
    if (d == 0) {
      note_duplicate(s, t, k);
      return 1;
    }
    /* out of order: parse.ts compares no more until the object ends */
    if (d > 0 || j == n) return 0;
  }
}

/*
 * The object of frame f closed with a duplicate key (and no duplicate while its keys
 * came in order): the one parse.ts's sorted() reports. Up to 16 members it sorts by
 * insertion and meets first the first key equal to an earlier one; with more, a
 * stable sort puts equal keys together and the first pair is the smallest repeated
 * key: it reports that key's second occurrence. m has room for the members' count.
 */
static void duplicate_at_close(const u8 *s, const u32 *t, const Frame *f, u32 *m) {
  u32 n = f->count;
  u32 k = f->hdr + 3;
  for (u32 j = 0; j < n; j++) {
    m[j] = k;
    k += 2;
    k = (t[k] & 7) >= TAG_ARR ? t[k + 1] : k + 2;
  }
  if (n <= 16) {
    for (u32 a = 1; a < n; a++) {
      for (u32 b = 0; b < a; b++) {
        if (key_cmp(t, s, m[b], m[a]) == 0) {
          note_duplicate(s, t, m[a]);
          return;
        }
      }
    }
    return;
  }
  heap_sort(t, s, m, n);
  /* tape indices follow the document: the second smallest index of the first run of equal keys */
  for (u32 j = 1; j < n; j++) {
    if (key_cmp(t, s, m[j - 1], m[j]) != 0) continue;
    u32 first = m[j - 1] < m[j] ? m[j - 1] : m[j];
    u32 second = m[j - 1] < m[j] ? m[j] : m[j - 1];
    for (u32 r = j + 1; r < n && key_cmp(t, s, m[j], m[r]) == 0; r++) {
      if (m[r] < first) {
        second = first;
        first = m[r];
      } else if (m[r] < second) {
        second = m[r];
      }
    }
    note_duplicate(s, t, second);
    return;
  }
}

/*
 * Turns the failure the parser noted in err (at err.offset, the reader's position)
 * into the JS parser's error. frames[1..sp] are the open containers (the innermost
 * included); the tape holds their members so far and has room for the members of an
 * object closing with a duplicate.
 */
static __attribute__((noinline)) void diagnose(u8 *s, u32 len, u32 *t, u32 tl, u32 sp, u32 utf8_known) {
  /* string_tail() found invalid UTF-8: everything before it was valid, so it is the first */
  if (err.reason == E_UTF8) return;
  /*
   * Invalid UTF-8 anywhere in the body comes first (the JS parser decodes before it
   * parses). The bytes before the reader were validated as they were read (outside
   * strings only ASCII passes) and may hold escapes decoded in place, so the check
   * starts at the reader. Not for a body encoded from well-formed text (utf8_known):
   * it is valid, and checking the rest of a large non-ASCII one costs a millisecond.
   */
  u32 bad = utf8_known ? len : invalid_utf8(s, err.offset, len);
  if (bad < len) {
    err.reason = E_UTF8;
    err.offset = bad;
    return;
  }
  /* then a duplicate met while an open object's keys came in order; the outermost comes first */
  for (u32 d = 1; d <= sp; d++) {
    if (frames[d].is_obj && in_order_duplicate(s, t, &frames[d], d < sp ? frames[d + 1].hdr : tl)) return;
  }
  u32 at = err.offset;
  switch (err.reason) {
    case E_NUMBER:
      number_failure(s, at);
      if (err.reason == E_VALUE_CHAR) {
        if (at == len) err.reason = E_VALUE_END;
        else err.arg = code_point(s + at);
      }
      break;
    case E_CONTROL:
      /* the end of the body: parse.ts reports the string from its opening quote */
      if (at == len) {
        err.reason = E_UNTERMINATED;
        err.offset = err.arg;
      }
      break;
    case E_ESCAPE:
      if (at + 1 == len) err.reason = E_UNTERMINATED; /* reported at the backslash */
      break;
    case E_KEY:
      if (at == len) err.reason = E_OBJECT_END;
      break;
    case E_ARRAY_CHAR:
    case E_OBJECT_CHAR:
      if (at == len) err.reason = err.reason == E_ARRAY_CHAR ? E_ARRAY_END : E_OBJECT_END;
      else err.arg = code_point(s + at);
      break;
    case E_LITERAL:
      err.arg = s[at];
      break;
    case E_DUP_CLOSE:
      duplicate_at_close(s, t, &frames[sp], t + tl);
      break;
    default:
      break;
  }
}

enum { R_MALFORMED = 0, R_NO_MEMORY = 1 };

/* Makes room for n more tape words (may move the tape). */
#define TAPE_ROOM(n)                                                \
  do {                                                              \
    if (unlikely(tl + (n) > cap)) {                                 \
      u64 want_ = (u64)cap + (cap >> 1) + (n) + 64;                 \
      if (want_ > 0x3FFFFFF0u) goto no_memory;                      \
      u32 *grown_ = tape_grow(t, tl, (u32)want_);                   \
      if (!grown_) goto no_memory;                                  \
      t = grown_;                                                   \
      cap = (u32)want_;                                             \
    }                                                               \
  } while (0)

/* Notes why the body is malformed, where the reader is; diagnose() settles the rest. */
#define FAIL(reason_, at_)                                          \
  do {                                                              \
    why = (reason_);                                                \
    where = (at_);                                                  \
    goto malformed;                                                 \
  } while (0)

/* The string whose opening quote is at i, as a scalar entry; i moves past it. */
#define PARSE_STRING()                                              \
  do {                                                              \
    const u8 *q_ = scan_string(s + i + 1);                          \
    if (likely(*q_ == '"')) {                                       \
      t[tl] = ((u32)(q_ - (s + i + 1)) << 3) | TAG_STR;             \
      t[tl + 1] = i + 1;                                            \
      i = (u32)(q_ - s) + 1;                                        \
    } else {                                                        \
      u32 end_ = string_tail(s, i + 1, q_);                         \
      if (!end_) goto string_failed; /* noted by string_tail() */   \
      t[tl] = (str_len << 3) | str_tag;                             \
      t[tl + 1] = i + 1;                                            \
      flags |= str_flags;                                           \
      i = end_;                                                     \
    }                                                               \
    tl += 2;                                                        \
  } while (0)

static void doc_release(Doc *d) {
  release(d->in);
  release(d->tape);
  release(d);
}

/*
 * Parses the body in `in` (from input_alloc; this takes it over: it is freed with
 * the document, or here when memory runs out). Returns the document, or R_NO_MEMORY,
 * or R_MALFORMED with the reason in error_info(); then `in` is the caller's to free,
 * after reading the error (its key may lie in it). `utf8_known`: the body was encoded
 * from a well-formed string, so it is valid UTF-8.
 */
EXPORT("parse") u32 parse(u8 *in, u32 len, u32 max_depth, u32 utf8_known) {
  if (max_depth > MAX_DEPTH) max_depth = MAX_DEPTH;
  memset(in + len, 0, PAD);
  shape_gen++; /* forget the key orders of other documents */
  Doc *d = alloc(sizeof(Doc));
  u32 cap = len / 4 + 64;
  u32 *t = alloc(cap * 4u);
  u32 result;
  if (!d || !t) {
    result = R_NO_MEMORY;
    goto fail;
  }
  u8 *s = in;
  u32 tl = 0, flags = 0;
  u64 layout = 0;
  u32 sp = 0; /* open containers; the innermost is in the c_* locals, the others in frames[1..sp-1] */
  u32 c_hdr = 0, c_count = 0, c_obj = 0;
  u32 i = skip_ws(s, 0);
  u32 want_key = 0; /* the next item is an object member: key and colon first */
  u32 why, where;   /* a failure's reason and offset (FAIL) */
  for (;;) {
    if (want_key) {
      if (s[i] != '"') FAIL(E_KEY, i);
      TAPE_ROOM(2);
      PARSE_STRING();
      i = skip_ws(s, i);
      if (s[i] != ':') FAIL(E_COLON, i);
      i = skip_ws(s, i + 1);
    }
    /* a value starts at i */
    TAPE_ROOM(4);
    u32 c = s[i];
    u32 closing = 0; /* the value was a container that is already closed (empty) */
    switch (c) {
      case '"':
        PARSE_STRING();
        break;
      case '{':
      case '[':
        if (sp >= max_depth) FAIL(E_DEPTH, i);
        if (sp) {
          Frame *f = &frames[sp];
          f->hdr = c_hdr;
          f->count = c_count;
          f->is_obj = c_obj;
        }
        sp++;
        c_hdr = tl;
        c_count = 0;
        c_obj = c == '{';
        tl += c_obj ? 3 : 2;
        i = skip_ws(s, i + 1);
        if (s[i] != (c_obj ? '}' : ']')) {
          want_key = c_obj;
          continue;
        }
        i++;
        closing = 1;
        break;
      case 't':
        if (s[i + 1] != 'r' || s[i + 2] != 'u' || s[i + 3] != 'e') FAIL(E_LITERAL, i);
        t[tl] = (4u << 3) | TAG_ASIS;
        t[tl + 1] = i;
        tl += 2;
        i += 4;
        break;
      case 'f':
        if (s[i + 1] != 'a' || s[i + 2] != 'l' || s[i + 3] != 's' || s[i + 4] != 'e') FAIL(E_LITERAL, i);
        t[tl] = (5u << 3) | TAG_ASIS;
        t[tl + 1] = i;
        tl += 2;
        i += 5;
        break;
      case 'n':
        if (s[i + 1] != 'u' || s[i + 2] != 'l' || s[i + 3] != 'l') FAIL(E_LITERAL, i);
        t[tl] = (4u << 3) | TAG_ASIS;
        t[tl + 1] = i;
        tl += 2;
        i += 4;
        break;
      default: {
        u32 after = parse_number(s, i, t + tl, &flags);
        if (!after) FAIL(E_NUMBER, i);
        i = after;
        tl += 2;
        break;
      }
    }
    /* after a value: close containers that end here, then a comma (or the end of the body) */
    for (;;) {
      if (closing) {
        /* the container at depth sp ends: header, layout whitespace, key order */
        u64 d2 = 2ull * sp;
        u32 h = c_hdr, n = c_count;
        if (!c_obj) {
          t[h] = (n << 3) | TAG_ARR;
          t[h + 1] = tl;
          if (n) layout += (u64)n * (1 + d2) + d2 - 1;
        } else {
          if (n) layout += (u64)n * (2 + d2) + d2 - 1;
          t[h] = (n << 3) | TAG_OBJ;
          t[h + 2] = 0;
          if (n > 1) {
            TAPE_ROOM(n);
            u32 r = sort_object(t, s, h, n, tl);
            if (!r) FAIL(E_DUP_CLOSE, i);
            if (r == 1) {
              t[h + 2] = tl;
              tl += n;
            }
          }
          t[h + 1] = tl;
        }
        sp--;
        if (sp) {
          Frame *f = &frames[sp];
          c_hdr = f->hdr;
          c_count = f->count;
          c_obj = f->is_obj;
        }
      }
      i = skip_ws(s, i);
      if (sp == 0) {
        if (i != len) FAIL(E_TRAILING, i);
        goto done;
      }
      c_count++;
      c = s[i];
      if (c == ',') {
        i = skip_ws(s, i + 1);
        want_key = c_obj;
        break;
      }
      if (c != (c_obj ? '}' : ']')) FAIL(c_obj ? E_OBJECT_CHAR : E_ARRAY_CHAR, i);
      i++;
      closing = 1;
    }
  }
done:
  d->in = in;
  d->len = len;
  d->tape = t;
  d->tape_len = tl;
  d->flags = flags;
  d->layout = layout;
  return addr_of(d);
malformed:
  err.reason = why;
  err.offset = where;
string_failed:
  /* the innermost container joins the others for diagnose() */
  if (sp) {
    frames[sp].hdr = c_hdr;
    frames[sp].count = c_count;
    frames[sp].is_obj = c_obj;
  }
  diagnose(s, len, t, tl, sp, utf8_known);
  release(t);
  release(d);
  /* the input stays: error_info() may point into it (a duplicate key); the caller frees it */
  return R_MALFORMED;
no_memory:
  result = R_NO_MEMORY;
fail:
  release(t);
  release(d);
  release(in);
  return result;
}

EXPORT("doc_flags") u32 doc_flags(Doc *d) { return d->flags; }
EXPORT("doc_layout") double doc_layout(Doc *d) { return (double)d->layout; }
EXPORT("doc_free") void doc_free(Doc *d) { doc_release(d); }

/* ------------------------------------------------------------------------------------
 * Serializer
 * ---------------------------------------------------------------------------------- */

/* ",\n" and the indent of the deepest item; copies read up to 32 bytes from any offset */
static u8 INDENT[2 + 2 * MAX_DEPTH + 2 + 64];
static const char HEX[] = "0123456789abcdef";

typedef struct SFrame {
  u32 remaining;
  u32 perm; /* tape index of the next permutation word, or 0 */
  u32 end;
  u32 is_obj;
} SFrame;

/* The work area handed to serialize(): output chunk, slack, then the frame stack. */
#define WORK_OUT (CHUNK + SLACK)
#define WORK_SIZE (WORK_OUT + (MAX_DEPTH + 2) * 16)

EXPORT("work_size") u32 work_size(void) { return WORK_SIZE; }

EXPORT("init") void init(void) {
  heap_init();
  memset(INDENT, ' ', sizeof INDENT);
  INDENT[0] = ',';
  INDENT[1] = '\n';
}

typedef struct Out {
  u8 *base;
  u8 *lim;
} Out;

static u8 *flush(Out *S, u8 *o) {
  if (o > S->base) js_emit(S->base, (u32)(o - S->base), 0);
  return S->base;
}

/* The last chunk, flagged so that JS can hash a one-chunk text without copying it. */
static void flush_last(Out *S, u8 *o) {
  js_emit(S->base, (u32)(o - S->base), 1);
}

/* 32 bytes from src to o (both may run past n: src is padded, o has slack). */
INLINE u8 *copy32(u8 *o, const u8 *src, u32 n) {
  v128_t a = wasm_v128_load(src);
  v128_t b = wasm_v128_load(src + 16);
  wasm_v128_store(o, a);
  wasm_v128_store(o + 16, b);
  return o + n;
}

static u8 *put_long(Out *S, u8 *o, const u8 *src, u32 n) {
  for (;;) {
    u32 room = (u32)(S->lim - o);
    if (n <= room) {
      memcpy(o, src, n);
      return o + n;
    }
    memcpy(o, src, room);
    o = flush(S, o + room);
    src += room;
    n -= room;
  }
}

/* src must be readable 32 bytes from its start. */
INLINE u8 *put(Out *S, u8 *o, const u8 *src, u32 n) {
  if (likely(n <= 32 && (u32)(S->lim - o) >= n)) return copy32(o, src, n);
  return put_long(S, o, src, n);
}

INLINE u8 *put1(Out *S, u8 *o, u8 c) {
  if (unlikely(o >= S->lim)) o = flush(S, o);
  *o++ = c;
  return o;
}

/* Makes room for n (<= CHUNK) contiguous bytes. */
INLINE u8 *room(Out *S, u8 *o, u32 n) {
  if (unlikely((u32)(S->lim - o) < n)) o = flush(S, o);
  return o;
}

INLINE u8 *put_u_escape(u8 *o, u32 unit) {
  o[0] = '\\';
  o[1] = 'u';
  o[2] = (u8)HEX[(unit >> 12) & 15];
  o[3] = (u8)HEX[(unit >> 8) & 15];
  o[4] = (u8)HEX[(unit >> 4) & 15];
  o[5] = (u8)HEX[unit & 15];
  return o + 6;
}

/*
 * Writes the decoded string p[0..n) as a quoted token: '"', '\\' and controls
 * escaped; with `ascii` (python dialect) every code point from U+007F up as \uXXXX
 * (astral ones as a surrogate pair; WTF-8 lone surrogates as themselves).
 */
static u8 *put_escaped(Out *S, u8 *o, const u8 *p, u32 n, int ascii) {
  const u8 *end = p + n;
  o = put1(S, o, '"');
  while (p < end) {
    const u8 *q = scan_escape(p, end, ascii);
    if (q > p) o = put(S, o, p, (u32)(q - p));
    if (q == end) break;
    p = q;
    o = room(S, o, 12);
    u32 c = *p;
    if (c < 0x80) {
      p++;
      switch (c) {
        case '"': o[0] = '\\'; o[1] = '"'; o += 2; break;
        case '\\': o[0] = '\\'; o[1] = '\\'; o += 2; break;
        case 0x08: o[0] = '\\'; o[1] = 'b'; o += 2; break;
        case 0x09: o[0] = '\\'; o[1] = 't'; o += 2; break;
        case 0x0A: o[0] = '\\'; o[1] = 'n'; o += 2; break;
        case 0x0C: o[0] = '\\'; o[1] = 'f'; o += 2; break;
        case 0x0D: o[0] = '\\'; o[1] = 'r'; o += 2; break;
        default: o = put_u_escape(o, c); break; /* other controls and U+007F */
      }
    } else {
      u32 cp;
      if (c < 0xE0) {
        cp = ((c & 0x1F) << 6) | (p[1] & 0x3F);
        p += 2;
      } else if (c < 0xF0) {
        cp = ((c & 0x0F) << 12) | ((u32)(p[1] & 0x3F) << 6) | (p[2] & 0x3F);
        p += 3;
      } else {
        cp = ((c & 0x07) << 18) | ((u32)(p[1] & 0x3F) << 12) | ((u32)(p[2] & 0x3F) << 6) | (p[3] & 0x3F);
        p += 4;
      }
      if (cp >= 0x10000) {
        cp -= 0x10000;
        o = put_u_escape(o, 0xD800 + (cp >> 10));
        o = put_u_escape(o, 0xDC00 + (cp & 0x3FF));
      } else {
        o = put_u_escape(o, cp);
      }
    }
  }
  return put1(S, o, '"');
}

typedef struct Ser {
  Out out;
  const u32 *t;
  const u8 *s;
  u32 dialect;
  int ascii;  /* python dialect and some string needs \u escapes */
  int orjson; /* integers outside -2^63 .. 2^64-1 are floats */
} Ser;

/* True when the integer token (optional '-', no leading zeros) is within -2^63 .. 2^64-1. */
static int in_orjson_range(const u8 *p, u32 n) {
  static const char MIN[] = "9223372036854775808";
  static const char MAX[] = "18446744073709551615";
  const char *bound = MAX;
  u32 bl = 20;
  if (*p == '-') {
    p++;
    n--;
    bound = MIN;
    bl = 19;
  }
  if (n != bl) return n < bl;
  for (u32 k = 0; k < n; k++) {
    if (p[k] != (u8)bound[k]) return p[k] < (u8)bound[k];
  }
  return 1;
}

/* Writes the scalar entry at t[pos]. */
static u8 *put_scalar(Ser *R, u8 *o, u32 pos) {
  Out *S = &R->out;
  u32 w0 = R->t[pos];
  u32 n = w0 >> 3;
  const u8 *src = R->s + R->t[pos + 1];
  switch (w0 & 7) {
    case TAG_ASIS:
      return put(S, o, src, n);
    case TAG_STR:
      if (R->ascii) return put_escaped(S, o, src, n, 1);
      if (likely(n <= 32 && (u32)(S->lim - o) >= n + 2)) {
        *o = '"';
        copy32(o + 1, src, n);
        o[n + 1] = '"';
        return o + n + 2;
      }
      o = put1(S, o, '"');
      o = put_long(S, o, src, n);
      return put1(S, o, '"');
    case TAG_STR_ESC:
      return put_escaped(S, o, src, n, R->ascii);
    case TAG_INT_BIG:
      if (!R->orjson || in_orjson_range(src, n)) return put(S, o, src, n);
      /* fall through: orjson reads it as a float */
    default:
      o = room(S, o, 64);
      return o + js_format_number(src, n, R->dialect, o);
  }
}

/* Writes the key entry at t[k] followed by ": ". */
INLINE u8 *put_key(Ser *R, u8 *o, u32 k) {
  Out *S = &R->out;
  u32 w0 = R->t[k];
  u32 n = w0 >> 3;
  if (likely((w0 & 7) == TAG_STR && !R->ascii && n <= 32 && (u32)(S->lim - o) >= n + 4)) {
    const u8 *src = R->s + R->t[k + 1];
    *o = '"';
    copy32(o + 1, src, n);
    o[n + 1] = '"';
    o[n + 2] = ':';
    o[n + 3] = ' ';
    return o + n + 4;
  }
  o = put_scalar(R, o, k);
  o = put1(S, o, ':');
  return put1(S, o, ' ');
}

/* "\n" (or ",\n" with comma) and the indent of depth d. */
INLINE u8 *put_newline(Out *S, u8 *o, u32 d, int comma) {
  return put(S, o, INDENT + 1 - comma, 1 + comma + 2 * d);
}

/* Writes the canonical bytes of `dialect` through emit(); `work` is a work_size() area. */
EXPORT("serialize") void serialize(Doc *d, u32 dialect, u8 *work) {
  Ser R;
  R.out.base = work;
  R.out.lim = work + CHUNK;
  R.t = d->tape;
  R.s = d->in;
  R.dialect = dialect;
  R.ascii = dialect == D_PYTHON && (d->flags & F_NON_ASCII);
  R.orjson = dialect == D_ORJSON || dialect == D_ORJSON_LEGACY;
  SFrame *stack = (SFrame *)(work + WORK_OUT);
  Out *S = &R.out;
  const u32 *t = R.t;
  u8 *o = work;
  u32 pos = 0;
  u32 sp = 0; /* stack[1..sp] */
  u32 depth = 0;
  SFrame *f = 0;
  for (;;) {
    /* the value at pos */
    u32 w0 = t[pos];
    u32 tag = w0 & 7;
    if (tag < TAG_ARR) {
      /* the usual scalars inline: a short plain string (not python-escaped), a token as written */
      u32 n = w0 >> 3;
      const u8 *src = R.s + t[pos + 1];
      if (likely(n <= 32 && (u32)(S->lim - o) >= n + 2 && (tag == TAG_ASIS || (tag == TAG_STR && !R.ascii)))) {
        u32 q = tag; /* 1 for a string: quotes around it */
        *o = '"';
        copy32(o + q, src, n);
        o[n + 1] = '"';
        o += n + 2 * q;
      } else {
        o = put_scalar(&R, o, pos);
      }
      pos += 2;
    } else {
      u32 n = w0 >> 3;
      int obj = tag == TAG_OBJ;
      if (n == 0) {
        o = room(S, o, 2);
        o[0] = obj ? '{' : '[';
        o[1] = obj ? '}' : ']';
        o += 2;
        pos = t[pos + 1];
      } else {
        f = &stack[++sp];
        f->remaining = n;
        f->is_obj = obj;
        f->end = t[pos + 1];
        f->perm = obj ? t[pos + 2] : 0;
        pos += obj ? 3 : 2;
        depth++;
        o = put1(S, o, obj ? '{' : '[');
        o = put_newline(S, o, depth, 0);
        goto item;
      }
    }
    /* after a value: the next item, or close containers */
    for (;;) {
      if (sp == 0) {
        flush_last(S, o);
        return;
      }
      f = &stack[sp];
      if (--f->remaining == 0) {
        depth--;
        o = put_newline(S, o, depth, 0);
        o = put1(S, o, f->is_obj ? '}' : ']');
        pos = f->end;
        sp--;
        continue;
      }
      o = put_newline(S, o, depth, 1);
      break;
    }
  item:
    if (f->is_obj) {
      u32 k = f->perm ? t[f->perm++] : pos;
      o = put_key(&R, o, k);
      pos = k + 2;
    }
  }
}
