// bpe.c - GPT-2 byte-level BPE: load encoder.json + vocab.bpe, and the merge loop. See bpe.h.
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <cJSON.h>
#include "../core/util.h"
#include "bpe.h"

// ----------------------------------------------------------------------------------- hashing

// Hash of a short byte string: 8 bytes at a time, multiply-xorshift mixing. Tokens and pieces
// are a few bytes long, so this is cheaper than byte-at-a-time FNV.
static inline uint64_t hash_bytes(const uint8_t *s, size_t n) {
    uint64_t h = 0x9E3779B97F4A7C15ull ^ (n * 0xFF51AFD7ED558CCDull);
    while (n >= 8) {
        uint64_t w; memcpy(&w, s, 8);
        h = (h ^ w) * 0xC2B2AE3D27D4EB4Full;
        h ^= h >> 29;
        s += 8; n -= 8;
    }
    uint64_t w = 0;
    for (size_t i = 0; i < n; i++) w |= (uint64_t)s[i] << (8 * i);
    h = (h ^ w) * 0xC2B2AE3D27D4EB4Full;
    h ^= h >> 32;
    h *= 0x165667B19E3779F9ull;
    h ^= h >> 29;
    return h;
}

static inline uint64_t hash_pair(uint32_t a, uint32_t b) {
    uint64_t h = ((uint64_t)a << 32 | b) * 0x9E3779B97F4A7C15ull;
    return h ^ (h >> 31);
}

static uint32_t table_size_for(size_t n) {  // power of two >= 2n (load factor <= 0.5)
    uint32_t s = 16;
    while (s < 2 * n) s <<= 1;
    return s;
}

#define SLOT_EMPTY UINT32_MAX
#define ID_BITS 17  // ids < 2^17 (vocabularies are at most 65536 for uint16 shards)

static inline int bytes_eq(const uint8_t *a, const uint8_t *b, size_t n) {
    for (size_t i = 0; i < n; i++) if (a[i] != b[i]) return 0;  // tokens are short: no call
    return 1;
}

static inline uint64_t head8(const uint8_t *s, size_t n) {
    uint64_t w = 0;
    if (n >= 8) memcpy(&w, s, 8);
    else for (size_t i = 0; i < n; i++) w |= (uint64_t)s[i] << (8 * i);
    return w;
}

static inline int32_t lookup_hashed(const bpe_model *m, const uint8_t *s, size_t n, uint64_t h) {
    uint32_t i = (uint32_t)h & m->lookup_mask;
    uint64_t head = head8(s, n);
    for (;;) {
        const struct bpe_slot *e = &m->lookup[i];
        if (e->meta == SLOT_EMPTY) return -1;
        if (e->head == head && (e->meta >> ID_BITS) == n &&
            (n <= 8 || bytes_eq(m->tok_bytes + e->off + 8, s + 8, n - 8)))
            return (int32_t)(e->meta & ((1u << ID_BITS) - 1));
        i = (i + 1) & m->lookup_mask;
    }
}

int32_t bpe_lookup(const bpe_model *m, const uint8_t *s, size_t n) {
    return lookup_hashed(m, s, n, hash_bytes(s, n));
}

static inline const bpe_merge *find_merge(const bpe_model *m, uint32_t a, uint32_t b) {
    uint32_t i = (uint32_t)hash_pair(a, b) & m->merge_mask;
    for (;;) {
        const bpe_merge *e = &m->merges[i];
        if (e->a == UINT32_MAX) return NULL;
        if (e->a == a && e->b == b) return e;
        i = (i + 1) & m->merge_mask;
    }
}

// Rank of merging a and b; INT_MAX if no merge rule joins them.
static inline int32_t pair_rank(const bpe_model *m, int32_t a, int32_t b) {
    const bpe_merge *e = find_merge(m, (uint32_t)a, (uint32_t)b);
    return e ? e->rank : INT_MAX;
}

// ------------------------------------------------------------------- the byte<->unicode map

void bpe_byte_to_unicode(int out[256]) {
    // Printable Latin-1 bytes stand for themselves; the other 68 (controls, space, 0x7f-0xa0,
    // 0xad) are moved to 256, 257, ... in byte order, so every byte has a visible character.
    int n = 0;
    for (int b = 0; b < 256; b++) {
        int printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
        out[b] = printable ? b : 256 + n++;
    }
}

// Decode the UTF-8 of one code point at s[*i]; -1 on a malformed sequence.
static int utf8_next(const char *s, size_t len, size_t *i) {
    const uint8_t *u = (const uint8_t *)s;
    uint8_t c = u[*i];
    int cp, extra;
    if (c < 0x80) { (*i)++; return c; }
    if (c >= 0xC2 && c <= 0xDF) { cp = c & 0x1F; extra = 1; }
    else if (c >= 0xE0 && c <= 0xEF) { cp = c & 0x0F; extra = 2; }
    else if (c >= 0xF0 && c <= 0xF4) { cp = c & 0x07; extra = 3; }
    else return -1;
    for (int k = 1; k <= extra; k++) {
        if (*i + k >= len || (u[*i + k] & 0xC0) != 0x80) return -1;
        cp = cp << 6 | (u[*i + k] & 0x3F);
    }
    *i += extra + 1;
    return cp;
}

// Map a token written in GPT-2's unicode alphabet back to its bytes; returns the byte count,
// or -1 if a character is not one of the 256 stand-ins.
static long unicode_to_bytes(const char *s, const int inv[512], uint8_t *out) {
    size_t len = strlen(s), i = 0;
    long n = 0;
    while (i < len) {
        int cp = utf8_next(s, len, &i);
        if (cp < 0 || cp >= 512 || inv[cp] < 0) return -1;
        out[n++] = (uint8_t)inv[cp];
    }
    return n;
}

// -------------------------------------------------------------------------------- loading

void bpe_free(bpe_model *m) {
    if (!m) return;
    free(m->tok_bytes); free(m->tok_off); free(m->lookup); free(m->merges);
    memset(m, 0, sizeof *m);
}

static int load_encoder(bpe_model *m, const char *path, const int inv[512]) {
    char *text; size_t len;
    int rc = lssar_read_file(path, &text, &len);
    if (rc)
        return lssar_fail(rc, "GPT-2 encoder: %s (run scripts/fetch-gpt2.sh to fetch it)", lssar_errmsg());
    cJSON *root = cJSON_ParseWithLength(text, len);
    free(text);
    if (!root || !cJSON_IsObject(root)) {
        cJSON_Delete(root);
        return lssar_fail(LSSAR_E_FORMAT, "%s is not a JSON object of token -> id (a damaged download? "
                          "delete it and rerun scripts/fetch-gpt2.sh)", path);
    }
    int n = cJSON_GetArraySize(root);
    if (n < 256 || n > 65536) {
        cJSON_Delete(root);
        return lssar_fail(LSSAR_E_FORMAT, "%s has %d tokens; a byte-level BPE vocabulary needs 256..65536",
                          path, n);
    }
    // First pass: the byte length of every id, to lay the bytes out by id.
    long *blen = malloc(sizeof(long) * n);
    uint8_t *tmp = malloc(4096);
    char **keys = calloc(n, sizeof(char *));
    if (!blen || !tmp || !keys) {
        free(blen);
        free(tmp);
        free(keys);
        cJSON_Delete(root);
        return lssar_fail(LSSAR_E_NOMEM, "out of memory loading %s", path);
    }
    for (int i = 0; i < n; i++) blen[i] = -1;
    rc = 0;
    size_t total = 0;
    for (cJSON *it = root->child; it; it = it->next) {
        double v = cJSON_IsNumber(it) ? it->valuedouble : -1;
        if (v < 0 || v >= n || v != (double)(int)v) {
            if (cJSON_IsNumber(it))
                rc = lssar_fail(LSSAR_E_FORMAT, "%s: token \"%.40s\" has id %.17g; ids must be the integers "
                                "0..%d (one per token)", path, it->string ? it->string : "", it->valuedouble,
                                n - 1);
            else
                rc = lssar_fail(LSSAR_E_FORMAT, "%s: token \"%.40s\" has an id that is not a number",
                                path, it->string ? it->string : "");
            break;
        }
        int id = (int)v;
        if (blen[id] >= 0) { rc = lssar_fail(LSSAR_E_FORMAT, "%s: id %d appears twice", path, id); break; }
        if (!it->string || strlen(it->string) > 4000) {
            rc = lssar_fail(LSSAR_E_FORMAT, "%s: id %d has a bad token", path, id);
            break;
        }
        long b = unicode_to_bytes(it->string, inv, tmp);
        if (b <= 0) {
            rc = lssar_fail(LSSAR_E_FORMAT, "%s: token \"%.40s\" (id %d) is not written in GPT-2's byte "
                            "alphabet", path, it->string, id);
            break;
        }
        blen[id] = b; keys[id] = it->string; total += (size_t)b;
    }
    if (!rc) {
        m->n_vocab = n;
        m->tok_off = malloc(sizeof(uint32_t) * (n + 1));
        m->tok_bytes = malloc(total + 1);
        if (!m->tok_off || !m->tok_bytes) rc = lssar_fail(LSSAR_E_NOMEM, "out of memory loading %s", path);
    }
    if (!rc) {
        uint32_t off = 0;
        for (int id = 0; id < n; id++) {
            m->tok_off[id] = off;
            unicode_to_bytes(keys[id], inv, m->tok_bytes + off);  // every id present: n keys, no duplicates
            off += (uint32_t)blen[id];
        }
        m->tok_off[n] = off;
    }
    free(blen); free(tmp); free(keys);
    cJSON_Delete(root);
    return rc;
}

static int build_lookup(bpe_model *m, const char *path) {
    static const char eot_text[] = "<|endoftext|>";
    // Load up to 0.8: GPT-2's 50257 tokens fit 65536 slots = 1 MB, about one core's L2 cache.
    uint32_t size = 16;
    while (size < m->n_vocab + m->n_vocab / 4) size <<= 1;
    m->lookup = malloc(sizeof(struct bpe_slot) * size);
    if (!m->lookup) return lssar_fail(LSSAR_E_NOMEM, "out of memory loading %s", path);
    for (uint32_t i = 0; i < size; i++) m->lookup[i].meta = SLOT_EMPTY;
    m->lookup_mask = size - 1;
    m->eot = -1;
    for (int b = 0; b < 256; b++) m->byte_id[b] = -1;
    for (int id = 0; id < m->n_vocab; id++) {
        const uint8_t *s = m->tok_bytes + m->tok_off[id];
        size_t n = m->tok_off[id + 1] - m->tok_off[id];
        // The special token is only produced on request (allow_special), never by BPE or by the
        // whole-piece shortcut, so it stays out of the lookup table.
        if (n == sizeof eot_text - 1 && !memcmp(s, eot_text, n)) { m->eot = id; continue; }
        if (bpe_lookup(m, s, n) >= 0)
            return lssar_fail(LSSAR_E_FORMAT, "%s: two ids (%d and %d) have the same bytes", path,
                              bpe_lookup(m, s, n), id);
        uint32_t i = (uint32_t)hash_bytes(s, n) & m->lookup_mask;
        while (m->lookup[i].meta != SLOT_EMPTY) i = (i + 1) & m->lookup_mask;
        m->lookup[i] = (struct bpe_slot){head8(s, n), m->tok_off[id], (uint32_t)n << ID_BITS | (uint32_t)id};
        if (n == 1) m->byte_id[s[0]] = id;
    }
    for (int b = 0; b < 256; b++)
        if (m->byte_id[b] < 0) return lssar_fail(LSSAR_E_FORMAT, "%s has no token for the single byte "
                                                 "0x%02x; a byte-level BPE vocabulary needs all 256", path,
                                                 b);
    return 0;
}

static int load_merges(bpe_model *m, const char *path, const int inv[512]) {
    char *text; size_t len;
    int rc = lssar_read_file(path, &text, &len);
    if (rc) return lssar_fail(rc, "GPT-2 merges: %s (run scripts/fetch-gpt2.sh to fetch it)", lssar_errmsg());
    // At most one merge per line: count lines for the table size.
    size_t lines = 1;
    for (size_t i = 0; i < len; i++) lines += text[i] == '\n';
    uint32_t size = table_size_for(lines);
    m->merges = malloc(sizeof(bpe_merge) * size);
    uint8_t *buf = malloc(len + 1);
    if (!m->merges || !buf) {
        free(text);
        free(buf);
        return lssar_fail(LSSAR_E_NOMEM, "out of memory loading %s", path);
    }
    for (uint32_t i = 0; i < size; i++) m->merges[i].a = UINT32_MAX;
    m->merge_mask = size - 1;
    m->n_merges = 0;
    char *p = text, *end = text + len;
    int line = 0;
    while (p < end) {
        char *nl = memchr(p, '\n', (size_t)(end - p));
        char *eol = nl ? nl : end;
        line++;
        if (eol > p && eol[-1] == '\r') eol[-1] = 0;
        *eol = 0;
        if (line == 1 && !strncmp(p, "#version", 8)) { p = eol + 1; continue; }
        if (*p == 0) { p = eol + 1; continue; }  // blank line (the file ends with one)
        char *sp = strchr(p, ' ');
        if (!sp || sp == p || !sp[1] || strchr(sp + 1, ' ')) {
            rc = lssar_fail(LSSAR_E_FORMAT, "%s line %d: expected two tokens separated by one space, got "
                            "\"%.60s\"", path, line, p);
            break;
        }
        *sp = 0;
        long na = unicode_to_bytes(p, inv, buf), nb = na > 0 ? unicode_to_bytes(sp + 1, inv, buf + na) : -1;
        int32_t a = na > 0 ? bpe_lookup(m, buf, (size_t)na) : -1;
        int32_t b = nb > 0 ? bpe_lookup(m, buf + na, (size_t)nb) : -1;
        int32_t ab = (a >= 0 && b >= 0) ? bpe_lookup(m, buf, (size_t)(na + nb)) : -1;
        if (a < 0 || b < 0 || ab < 0) {
            rc = lssar_fail(LSSAR_E_FORMAT, "%s line %d: merge \"%s %s\" uses or makes a token that is not "
                            "in encoder.json (mismatched files? rerun scripts/fetch-gpt2.sh)", path, line, p,
                            sp + 1);
            break;
        }
        if (!find_merge(m, (uint32_t)a, (uint32_t)b)) {  // a repeated pair keeps its first (lowest) rank
            uint32_t i = (uint32_t)hash_pair((uint32_t)a, (uint32_t)b) & m->merge_mask;
            while (m->merges[i].a != UINT32_MAX) i = (i + 1) & m->merge_mask;
            m->merges[i] = (bpe_merge){(uint32_t)a, (uint32_t)b, m->n_merges, ab};
        }
        m->n_merges++;
        p = eol + 1;
    }
    if (!rc && m->n_merges == 0) rc = lssar_fail(LSSAR_E_FORMAT, "%s has no merges", path);
    free(text); free(buf);
    return rc;
}

int bpe_load(bpe_model *m, const char *encoder_json, const char *vocab_bpe) {
    memset(m, 0, sizeof *m);
    int fwd[256], inv[512];
    bpe_byte_to_unicode(fwd);
    for (int i = 0; i < 512; i++) inv[i] = -1;
    for (int b = 0; b < 256; b++) inv[fwd[b]] = b;
    int rc = load_encoder(m, encoder_json, inv);
    if (!rc) rc = build_lookup(m, encoder_json);
    if (!rc) rc = load_merges(m, vocab_bpe, inv);
    if (rc) bpe_free(m);
    return rc;
}

// ------------------------------------------------------------------------------ the merges

void bpe_scratch_free(bpe_scratch *sc) {
    free(sc->buf); free(sc->ents); free(sc->toks);
    memset(sc, 0, sizeof *sc);
}

void bpe_scratch_cache(bpe_scratch *sc, const uint8_t *text, size_t len) {
    // About one slot per 64 bytes of text (most pieces are tokens and never reach the cache),
    // 1k..64k slots; filled at most half, after which new pieces are simply not cached.
    uint32_t size = 1024;
    while (size < len / 64 && size < 65536) size <<= 1;
    sc->ents = calloc(size, sizeof(bpe_cache_ent));
    if (!sc->ents) return;  // no cache: slower, same result
    sc->text = text; sc->text_len = len;
    sc->mask = size - 1; sc->used = 0;
}

// Cached ids of piece s[0..n) (inside sc->text) with hash h, or NULL.
static const bpe_cache_ent *cache_find(const bpe_scratch *sc, const uint8_t *s, size_t n, uint64_t h) {
    uint32_t i = (uint32_t)(h >> 32) & sc->mask;
    for (;;) {
        const bpe_cache_ent *e = &sc->ents[i];
        if (e->len == 0) return NULL;
        if (e->h == h && e->len == n && bytes_eq(sc->text + e->off, s, n)) return e;
        i = (i + 1) & sc->mask;
    }
}

static void cache_add(bpe_scratch *sc, const uint8_t *s, size_t n, uint64_t h, const int32_t *ids, size_t k) {
    if (sc->used >= (sc->mask + 1) / 2 || s < sc->text || s + n > sc->text + sc->text_len || n > UINT32_MAX)
        return;
    if (sc->ntoks + k > sc->tcap) {
        size_t cap = sc->tcap ? 2 * sc->tcap : 4096;
        while (cap < sc->ntoks + k) cap *= 2;
        int32_t *t = realloc(sc->toks, sizeof(int32_t) * cap);
        if (!t) return;
        sc->toks = t; sc->tcap = cap;
    }
    uint32_t i = (uint32_t)(h >> 32) & sc->mask;
    while (sc->ents[i].len) i = (i + 1) & sc->mask;
    sc->ents[i] = (bpe_cache_ent){h, (uint32_t)(s - sc->text), (uint32_t)n, (uint32_t)sc->ntoks, (uint32_t)k};
    memcpy(sc->toks + sc->ntoks, ids, sizeof(int32_t) * k);
    sc->ntoks += k;
    sc->used++;
}

static void *scratch_get(bpe_scratch *sc, size_t bytes) {
    if (sc->cap < bytes) {
        size_t cap = bytes + bytes / 2;
        void *p = realloc(sc->buf, cap);
        if (!p) return NULL;
        sc->buf = p; sc->cap = cap;
    }
    return sc->buf;
}

// Quadratic loop for short pieces: keep the rank (and result) of every adjacent pair; merge the
// leftmost lowest, update the two pairs around it, repeat. tok, rank, mid have n entries.
static inline void pair_info(const bpe_model *m, int32_t a, int32_t b, int32_t *rank, int32_t *mid) {
    const bpe_merge *e = find_merge(m, (uint32_t)a, (uint32_t)b);
    *rank = e ? e->rank : INT_MAX;
    *mid = e ? e->id : -1;
}

static long merge_small(const bpe_model *m, int32_t *tok, int32_t *rank, int32_t *mid, size_t n) {
    for (size_t i = 0; i + 1 < n; i++) pair_info(m, tok[i], tok[i + 1], &rank[i], &mid[i]);
    while (n > 1) {
        int32_t best = INT_MAX; size_t bi = 0;
        for (size_t i = 0; i + 1 < n; i++)
            if (rank[i] < best) { best = rank[i]; bi = i; }
        if (best == INT_MAX) break;
        tok[bi] = mid[bi];
        size_t tail = n - bi - 2;  // pairs after the merged one
        memmove(tok + bi + 1, tok + bi + 2, sizeof(int32_t) * tail);
        memmove(rank + bi + 1, rank + bi + 2, sizeof(int32_t) * tail);
        memmove(mid + bi + 1, mid + bi + 2, sizeof(int32_t) * tail);
        n--;
        if (bi + 1 < n) pair_info(m, tok[bi], tok[bi + 1], &rank[bi], &mid[bi]);
        else rank[bi] = INT_MAX;
        if (bi > 0) pair_info(m, tok[bi - 1], tok[bi], &rank[bi - 1], &mid[bi - 1]);
    }
    return (long)n;
}

// Heap loop for long pieces. Symbols form a doubly linked list over the original positions;
// the heap holds (rank, position of the left symbol) for candidate pairs. Entries go stale when
// a neighbour merges; a popped entry is used only if its pair still exists with that rank (a
// pair's rank is unique, so equal rank means the same pair). Ties go to the leftmost position,
// as in the quadratic loop, so both give identical results.
typedef struct { int32_t rank; uint32_t pos; } heap_ent;

static inline int ent_less(heap_ent x, heap_ent y) {
    return x.rank < y.rank || (x.rank == y.rank && x.pos < y.pos);
}

static void heap_push(heap_ent *h, size_t *n, heap_ent e) {
    size_t i = (*n)++;
    while (i > 0) {
        size_t p = (i - 1) / 2;
        if (!ent_less(e, h[p])) break;
        h[i] = h[p]; i = p;
    }
    h[i] = e;
}

static heap_ent heap_pop(heap_ent *h, size_t *n) {
    heap_ent top = h[0], last = h[--(*n)];
    size_t i = 0;
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= *n) break;
        if (c + 1 < *n && ent_less(h[c + 1], h[c])) c++;
        if (!ent_less(h[c], last)) break;
        h[i] = h[c]; i = c;
    }
    if (*n) h[i] = last;
    return top;
}

static long merge_heap(const bpe_model *m, int32_t *tok, size_t n, bpe_scratch *sc, int32_t *out) {
    // Layout in scratch: prev, next (int32 each, n), heap (3n entries: n-1 initial + 2 per merge).
    size_t need = sizeof(int32_t) * 2 * n + sizeof(heap_ent) * 3 * n;
    char *w = scratch_get(sc, need);
    if (!w) return -1;
    int32_t *prev = (int32_t *)w, *next = prev + n;
    heap_ent *heap = (heap_ent *)(next + n);
    size_t hn = 0;
    for (size_t i = 0; i < n; i++) { prev[i] = (int32_t)i - 1; next[i] = i + 1 < n ? (int32_t)i + 1 : -1; }
    for (size_t i = 0; i + 1 < n; i++) {
        int32_t r = pair_rank(m, tok[i], tok[i + 1]);
        if (r != INT_MAX) heap_push(heap, &hn, (heap_ent){r, (uint32_t)i});
    }
    while (hn) {
        heap_ent e = heap_pop(heap, &hn);
        int32_t i = (int32_t)e.pos, j = next[i];
        if (tok[i] < 0 || j < 0) continue;  // left symbol merged away, or no right neighbour
        const bpe_merge *mg = find_merge(m, (uint32_t)tok[i], (uint32_t)tok[j]);
        if (!mg || mg->rank != e.rank) continue;  // stale
        tok[i] = mg->id;
        tok[j] = -1;  // dead
        next[i] = next[j];
        if (next[j] >= 0) prev[next[j]] = i;
        if (prev[i] >= 0) {
            int32_t r = pair_rank(m, tok[prev[i]], tok[i]);
            if (r != INT_MAX) heap_push(heap, &hn, (heap_ent){r, (uint32_t)prev[i]});
        }
        if (next[i] >= 0) {
            int32_t r = pair_rank(m, tok[i], tok[next[i]]);
            if (r != INT_MAX) heap_push(heap, &hn, (heap_ent){r, (uint32_t)i});
        }
    }
    long k = 0;
    for (int32_t i = 0; i >= 0; i = next[i]) out[k++] = tok[i];
    return k;
}

long bpe_merge_loop(const bpe_model *m, const uint8_t *s, size_t n, int32_t *out, bpe_scratch *sc,
                    size_t small_max) {
    if (n <= small_max && n <= 256) {
        int32_t rank[256], mid[256];
        for (size_t i = 0; i < n; i++) out[i] = m->byte_id[s[i]];
        return merge_small(m, out, rank, mid, n);
    }
    // The heap loop works in place in out (dead symbols marked -1), then compacts into out.
    for (size_t i = 0; i < n; i++) out[i] = m->byte_id[s[i]];
    return merge_heap(m, out, n, sc, out);
}

long bpe_encode_piece(const bpe_model *m, const uint8_t *s, size_t n, int32_t *out, bpe_scratch *sc) {
    if (n == 1) { out[0] = m->byte_id[s[0]]; return 1; }
    uint64_t h = hash_bytes(s, n);
    int32_t id = lookup_hashed(m, s, n, h);
    if (id >= 0) { out[0] = id; return 1; }
    if (sc->ents) {
        const bpe_cache_ent *e = cache_find(sc, s, n, h);
        if (e) { memcpy(out, sc->toks + e->tok, sizeof(int32_t) * e->ntok); return e->ntok; }
    }
    long k = bpe_merge_loop(m, s, n, out, sc, BPE_SMALL);
    if (k > 0 && sc->ents) cache_add(sc, s, n, h, out, (size_t)k);
    return k;
}
