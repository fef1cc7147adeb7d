/*
 * format.h - what `lssar orbits simulate --out DIR [--split NAME]` writes, and readers for it.
 *
 * DIR layout (NAME defaults to "train"; use e.g. --split val / --split force, with its own --seed):
 *   NAME_000000.bin, NAME_000001.bin, ...
 *       token shards in the core's format (src/data/shard.h) with channels = 2: each holds
 *       shard_systems sequences (the last one fewer) of 1000 rows, row 0 the dt token. Sequence
 *       (= system) i lives in shard i / shard_systems at rows (i % shard_systems) * 1000 + [0, 1000).
 *   NAME_systems.bin
 *       per-system metadata: a 64-byte orb_meta_header, then one 464-byte orb_system record
 *       (sample.h) per system, in system order. Little-endian, float64 / int32. Everything needed
 *       to recompute the continuous trajectories exactly (orb_sequence_rows).
 *   NAME_state.bin     (only with --state; `--two-body` implies it: the force set)
 *       per-row physical state: a 64-byte orb_state_header, then for each system 1000 rows of
 *       12 float32 (ORB_S_* below), row r of a system matching token row r of its sequence.
 *       Row 0 (the dt row) is all zero. Row r >= 1: j = r - 1, slot = j % (K+1), step = j / (K+1);
 *       slot < K is planet slot+1, slot == K the star (the same order as the tokens).
 *   NAME.json
 *       a summary: counts, seed, preset, the file names and these formats in words.
 *
 * A "row" (the unit of the rows/s metric) is one token row: one sequence position, i.e. one body
 * position at one time step or the dt row; a system is 1000 rows; 10M systems are 1e10 rows.
 */
#ifndef LSSAR_ORBITS_FORMAT_H
#define LSSAR_ORBITS_FORMAT_H

#include <stddef.h>
#include <stdint.h>
#include "orbits/sample.h"
#include "orbits/sequence.h"

#define ORB_META_MAGIC "LSSORBM1"
#define ORB_STATE_MAGIC "LSSORBS1"
#define ORB_FORMAT_VERSION 1

typedef struct {
    char magic[8];        // "LSSORBM1"
    int32_t version;      // 1
    int32_t record_size;  // 464 = sizeof(orb_system)
    int64_t systems;      // number of records
    uint64_t seed;        // --seed
    int32_t preset;       // 0 code, 1 paper
    int32_t two_body;     // 1: K = 1 everywhere
    int32_t rows;         // 1000 rows per sequence
    int32_t steps;        // 500 steps generated per body
    char reserved[16];
} orb_meta_header;        // 64 bytes

// Per-row state fields (float32), in this order.
enum {
    ORB_S_X, ORB_S_Y,       // absolute position (AU)
    ORB_S_VX, ORB_S_VY,     // absolute velocity (AU/yr)
    ORB_S_DX, ORB_S_DY,     // position relative to the star (body - star); 0 for the star
    ORB_S_DVX, ORB_S_DVY,   // velocity relative to the star; 0 for the star
    ORB_S_R,                // distance to the star (0 for the star)
    ORB_S_MASS,             // the body's mass (Msun): m1 for planets
    ORB_S_STAR_MASS,        // the star's mass (Msun): m2
    ORB_S_F,                // |F| = G m1 m2 / r^2 (planets); star: |sum of the planets' pulls|
    ORB_S_FIELDS            // 12
};

typedef struct {
    char magic[8];        // "LSSORBS1"
    int32_t version;      // 1
    int32_t fields;       // 12
    int64_t systems;
    int32_t rows;         // 1000 rows per system
    int32_t reserved0;
    char reserved[32];
} orb_state_header;       // 64 bytes

/* Which body and step token/state row r (1..999) of a K-planet sequence holds: body 0 is the star,
   1..K the planets (the CSV's numbering). Row 0 is the dt row (body -1, step -1). */
static inline void orb_row_body(int K, int r, int *body, int *step) {
    if (r <= 0) { *body = *step = -1; return; }
    int slot = (r - 1) % (K + 1);
    *step = (r - 1) / (K + 1);
    *body = slot < K ? slot + 1 : 0;
}

/* Fill one sequence's state rows (1000, 12) from its physical rows. */
void orb_state_fill(const orb_system *s, const orb_row *rows /* (999) */, float *out /* (1000, 12) */);

/* Read-only memory maps of the two files; errors name the file and the problem. */
typedef struct {
    const orb_meta_header *h;
    const orb_system *sys;    // (n)
    int64_t n;
    void *map; size_t len;
} orb_meta;
int orb_meta_open(orb_meta *m, const char *path);
void orb_meta_close(orb_meta *m);

typedef struct {
    const orb_state_header *h;
    const float *rows;        // (n, 1000, 12)
    int64_t n;
    void *map; size_t len;
} orb_state;
int orb_state_open(orb_state *s, const char *path);
void orb_state_close(orb_state *s);

/* Path of a split's file: "DIR/NAME_systems.bin", "DIR/NAME_state.bin", "DIR/NAME.json", or the
   shard "DIR/NAME_%06d.bin" (kind "shard", index i). Writes at most n bytes; returns 0 or an error. */
int orb_path(char *buf, size_t n, const char *dir, const char *split, const char *kind, int64_t i);

#endif
