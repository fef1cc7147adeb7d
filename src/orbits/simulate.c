/*
 * simulate.c - many systems -> token shards, metadata, state and CSV (layout: format.h).
 *
 * Pipeline with bounded memory: systems are made in rounds. All OpenMP threads fill round k
 * (each system from its own RNG stream (seed, index), so the bytes do not depend on the thread
 * count, the schedule or the rank count), then one writer thread emits round k in system order
 * while the others fill round k + 1 into the second buffer.
 *
 * Under mpirun (src/core/dist.h) a round is cut into contiguous shares in rank order
 * (lssar_dist_share_of); every rank fills its share, and the shares are gathered into rank 0's
 * round buffer (lssar_dist_gather_bytes, rank order = system order), which rank 0 alone writes.
 * One process is the case N = 1 (its share is the whole round, the gather does nothing), so N
 * ranks write the files of one process, byte for byte. A round is min(N, ROUND_BATCHES) batches
 * of `cap` systems (4096 = 18 MB of tokens and records, or 256 with the state or the CSV: 13 to
 * 38 MB), so rank 0 holds at most 2 x ROUND_BATCHES batches whatever N (about 290 MB; 610 MB with
 * both --state and --csv), the other ranks two shares of a round. Every rank meets at
 * lssar_dist_agree once per round (and after the setup and at the end), so a failure on one rank
 * (rank 0's disk full) ends every rank with its message instead of leaving them waiting.
 */
#include <errno.h>
#include <omp.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cJSON.h>
#include "data/shard.h"
#include "orbits/format.h"
#include "core/dist.h"
#include "core/json.h"

// Batches per round on rank 0 when several ranks share it: bounds rank 0's memory for any N.
#define ROUND_BATCHES 8

int lssar_orb_bin(double v) { return orb_bin(v); }
double lssar_orb_unbin(int bin) { return orb_unbin(bin); }

void lssar_orb_defaults(lssar_orb_opts *o) {
    memset(o, 0, sizeof *o);
    o->systems = 1000;
    o->preset = ORB_PRESET_CODE;
    o->shard_systems = 100000;
    o->split = "train";
}

typedef struct {
    int64_t first, count;  // systems [first, first + count)
    orb_system *sys;       // (count)
    uint16_t *tok;         // (count, 1000, 2)
    float *state;          // (count, 1000, 12) or NULL
    orb_row *rows;         // (count, 999) kept for the CSV, or NULL
} batch;

typedef struct {
    const char *dir;
    const lssar_orb_opts *o;
    shard_writer shard;  int shard_open; int64_t shard_index, in_shard;
    lssar_afile meta, state;
    FILE *csv;
    int rc;
    char msg[1024];      // rc's message: lssar_errmsg is per thread, and the writer is its own thread
    batch *b;            // the batch the writer thread works on
} writer;

static int write_all(FILE *f, const void *p, size_t n, const char *what) {
    if (n && fwrite(p, 1, n, f) != n)
        return lssar_fail(LSSAR_E_IO, "writing %s failed: %s (disk full?)", what, strerror(errno));
    return 0;
}

// Emit one batch in system order: tokens to the shards (a new shard every shard_systems),
// records to NAME_systems.bin, rows to NAME_state.bin and the CSV.
static int write_batch(writer *w, const batch *b) {
    const lssar_orb_opts *o = w->o;
    char path[4096];
    int rc;
    for (int64_t i = 0; i < b->count; i++) {
        if (!w->shard_open) {
            if ((rc = orb_path(path, sizeof path, w->dir, o->split, "shard", w->shard_index))) return rc;
            if ((rc = shard_writer_open(&w->shard, path, 2, ORB_VOCAB))) return rc;
            w->shard_open = 1;
            w->in_shard = 0;
        }
        if ((rc = shard_writer_append(&w->shard, b->tok + (size_t)i * ORB_ROWS * 2, ORB_ROWS))) return rc;
        if (++w->in_shard == o->shard_systems) {
            w->shard_open = 0;
            w->shard_index++;
            if ((rc = shard_writer_close(&w->shard))) return rc;
        }
    }
    if ((rc = write_all(w->meta.f, b->sys, sizeof(orb_system) * b->count, w->meta.path))) return rc;
    if (b->state && (rc = write_all(w->state.f, b->state, sizeof(float) * ORB_ROWS * ORB_S_FIELDS * b->count,
                                    w->state.path)))
        return rc;
    if (w->csv) {
        for (int64_t i = 0; i < b->count; i++) {
            const orb_system *s = &b->sys[i];
            const orb_row *rows = b->rows + (size_t)i * ORB_BODY_ROWS;
            for (int j = 0; j < ORB_BODY_ROWS; j++) {
                const orb_row *r = &rows[j];
                fprintf(w->csv, "%lld,%d,%d,%.10g,%.12g,%.12g,%.12g,%.12g,%.10g,%.10g\n",
                        (long long)(b->first + i), r->body, r->step, r->step * s->dt, r->x, r->y,
                        r->vx, r->vy, r->mass, s->star_mass);
            }
        }
        if (ferror(w->csv))
            return lssar_fail(LSSAR_E_IO, "writing %s failed: %s (disk full?)", o->csv_path, strerror(errno));
    }
    return 0;
}

static void *writer_main(void *arg) {
    writer *w = arg;
    if (w->rc == 0 && (w->rc = write_batch(w, w->b))) snprintf(w->msg, sizeof w->msg, "%s", lssar_errmsg());
    return NULL;
}

// Bring round [first, first + count) to rank 0's b in system order: rank r filled its share
// lssar_dist_share_of(count, r) of it into its own b (rank 0's at the start of its buffer).
// Collective; one process: b already holds the round.
static int gather_round(batch *b, int64_t first, int64_t count) {
    const int N = lssar_dist_size();
    if (N == 1) return 0;
    size_t *cnt = malloc(sizeof(size_t) * N);
    if (!cnt) return lssar_fail(LSSAR_E_NOMEM, "out of memory");
    struct { void *p; size_t unit; } field[4] = {
        {b->sys, sizeof(orb_system)}, {b->tok, sizeof(uint16_t) * ORB_ROWS * 2},
        {b->state, sizeof(float) * ORB_ROWS * ORB_S_FIELDS}, {b->rows, sizeof(orb_row) * ORB_BODY_ROWS}};
    int rc = 0;
    for (int f = 0; f < 4 && !rc; f++) {
        if (!field[f].p) continue;  // the same fields on every rank: the same options
        for (int r = 0; r < N; r++) {
            long lo, hi;
            lssar_dist_share_of((long)count, r, &lo, &hi);
            cnt[r] = (size_t)(hi - lo) * field[f].unit;
        }
        rc = lssar_dist_gather_bytes(field[f].p, field[f].p, cnt, 0);
    }
    free(cnt);
    if (lssar_dist_rank() == 0) { b->first = first; b->count = count; }
    return rc;
}

// Fill a batch: every system independently, in parallel.
static void fill_batch(batch *b, const lssar_orb_opts *o, orb_row *scratch /* (threads, 999) */) {
    #pragma omp parallel for schedule(dynamic, 16)
    for (int64_t i = 0; i < b->count; i++) {
        orb_system *s = &b->sys[i];
        orb_system_at(o->seed, (uint64_t)(b->first + i), o->preset, o->two_body, s);
        orb_row *rows = b->rows ? b->rows + (size_t)i * ORB_BODY_ROWS
                                : scratch + (size_t)omp_get_thread_num() * ORB_BODY_ROWS;
        orb_sequence_rows(s, rows);
        orb_sequence_tokens(s, rows, b->tok + (size_t)i * ORB_ROWS * 2);
        if (b->state) orb_state_fill(s, rows, b->state + (size_t)i * ORB_ROWS * ORB_S_FIELDS);
    }
}

static int batch_alloc(batch *b, int64_t cap, int state, int rows) {
    memset(b, 0, sizeof *b);
    b->sys = malloc(sizeof(orb_system) * cap);
    b->tok = malloc(sizeof(uint16_t) * ORB_ROWS * 2 * cap);
    if (state) b->state = malloc(sizeof(float) * ORB_ROWS * ORB_S_FIELDS * cap);
    if (rows) b->rows = malloc(sizeof(orb_row) * ORB_BODY_ROWS * cap);
    if (!b->sys || !b->tok || (state && !b->state) || (rows && !b->rows))
        return lssar_fail(LSSAR_E_NOMEM, "out of memory for a batch of %lld systems", (long long)cap);
    return 0;
}

static void batch_free(batch *b) { free(b->sys); free(b->tok); free(b->state); free(b->rows); }

static int write_headers(writer *w, int64_t n, int finish) {
    const lssar_orb_opts *o = w->o;
    orb_meta_header mh = {0};
    memcpy(mh.magic, ORB_META_MAGIC, 8);
    mh.version = ORB_FORMAT_VERSION; mh.record_size = sizeof(orb_system);
    mh.systems = n; mh.seed = o->seed; mh.preset = o->preset; mh.two_body = o->two_body;
    mh.rows = ORB_ROWS; mh.steps = ORB_STEPS;
    if (finish && fseek(w->meta.f, 0, SEEK_SET) != 0)
        return lssar_fail(LSSAR_E_IO, "seek in %s failed", w->meta.path);
    int rc = write_all(w->meta.f, &mh, sizeof mh, w->meta.path);
    if (rc || !o->state) return rc;
    orb_state_header sh = {0};
    memcpy(sh.magic, ORB_STATE_MAGIC, 8);
    sh.version = ORB_FORMAT_VERSION; sh.fields = ORB_S_FIELDS; sh.systems = n; sh.rows = ORB_ROWS;
    if (finish && fseek(w->state.f, 0, SEEK_SET) != 0)
        return lssar_fail(LSSAR_E_IO, "seek in %s failed", w->state.path);
    return write_all(w->state.f, &sh, sizeof sh, w->state.path);
}

static int write_json(const char *dir, const lssar_orb_opts *o, int64_t nshards) {
    char path[4096], name[4096];
    int rc = orb_path(path, sizeof path, dir, o->split, "json", 0);
    if (rc) return rc;
    cJSON *j = cJSON_CreateObject();
    cJSON_AddStringToObject(j, "format", "lssar-orbits");
    cJSON_AddNumberToObject(j, "version", ORB_FORMAT_VERSION);
    cJSON_AddStringToObject(j, "split", o->split);
    cJSON_AddNumberToObject(j, "systems", (double)o->systems);
    char seed[32];
    snprintf(seed, sizeof seed, "%llu", (unsigned long long)o->seed);
    cJSON_AddStringToObject(j, "seed", seed);  // a string: 64-bit seeds do not fit a JSON double
    cJSON_AddStringToObject(j, "preset", orb_preset_name(o->preset));
    cJSON_AddBoolToObject(j, "two_body", o->two_body);
    cJSON_AddNumberToObject(j, "rows_per_sequence", ORB_ROWS);
    cJSON_AddNumberToObject(j, "channels", 2);
    cJSON_AddNumberToObject(j, "bins", ORB_BINS);
    cJSON_AddNumberToObject(j, "vocab", ORB_VOCAB);
    cJSON *range = cJSON_AddArrayToObject(j, "range_au");
    cJSON_AddItemToArray(range, cJSON_CreateNumber(ORB_LO));
    cJSON_AddItemToArray(range, cJSON_CreateNumber(ORB_HI));
    cJSON *dts = cJSON_AddObjectToObject(j, "dt_tokens_years");
    cJSON_AddNumberToObject(dts, "7000", ORB_DT_WEEK);
    cJSON_AddNumberToObject(dts, "7001", ORB_DT_HALFYEAR);
    cJSON_AddNumberToObject(j, "shard_systems", (double)o->shard_systems);
    cJSON *sh = cJSON_AddArrayToObject(j, "shards");
    for (int64_t i = 0; i < nshards; i++) {
        snprintf(name, sizeof name, "%s_%06lld.bin", o->split, (long long)i);
        cJSON_AddItemToArray(sh, cJSON_CreateString(name));
    }
    snprintf(name, sizeof name, "%s_systems.bin", o->split);
    cJSON_AddStringToObject(j, "systems_file", name);
    cJSON_AddStringToObject(j, "systems_format", "64-byte header 'LSSORBM1', then per system 464 bytes: "
        "int32 K, int32 dt_token, f64 dt, star_mass, cx, cy, star_x, star_y, int32 fix_planet, fix_step, "
        "10 x {f64 m, a, e, theta, tau} (src/orbits/sample.h)");
    if (o->state) {
        snprintf(name, sizeof name, "%s_state.bin", o->split);
        cJSON_AddStringToObject(j, "state_file", name);
        cJSON_AddStringToObject(j, "state_format", "64-byte header 'LSSORBS1', then per system 1000 rows x "
            "12 f32: x, y, vx, vy, dx, dy, dvx, dvy, r, mass, star_mass, F; row 0 (dt) zero; rows in token "
            "order (src/orbits/format.h)");
    }
    rc = lssar_write_json(path, j);
    cJSON_Delete(j);
    return rc;
}

// A previous, larger run into the same directory and split left shards past the last one (and
// maybe a state file): remove them, so that NAME_*.bin is exactly this run.
static void remove_stale(const char *dir, const lssar_orb_opts *o, int64_t nshards) {
    char path[4096];
    for (int64_t i = nshards;; i++) {
        if (orb_path(path, sizeof path, dir, o->split, "shard", i) || unlink(path) != 0) break;
    }
    if (!o->state && !orb_path(path, sizeof path, dir, o->split, "state", 0)) unlink(path);
}

// The options' errors: every rank finds the same ones by itself (lssar_dist_error_is_shared).
static int check_opts(const lssar_orb_opts *o) {
    if (o->systems <= 0)
        return lssar_fail(LSSAR_E_SIZE, "--systems must be > 0, got %lld", (long long)o->systems);
    if (o->preset != ORB_PRESET_CODE && o->preset != ORB_PRESET_PAPER)
        return lssar_fail(LSSAR_E_ARG, "unknown orbits preset %d (0 code, 1 paper)", o->preset);
    if (o->shard_systems <= 0 || o->shard_systems * ORB_ROWS > INT32_MAX)
        return lssar_fail(LSSAR_E_SIZE, "--shard-systems must be 1..%d (a shard holds at most 2^31-1 "
                          "rows), got %lld", INT32_MAX / ORB_ROWS, (long long)o->shard_systems);
    if (!o->split || !*o->split || strchr(o->split, '/'))
        return lssar_fail(LSSAR_E_ARG, "--split must be a plain file-name prefix such as train "
                          "or val, got '%s'", o->split ? o->split : "");
    if (o->threads < 0) return lssar_fail(LSSAR_E_ARG, "--threads must be >= 0, got %d", o->threads);
    return 0;
}

int lssar_orbits_simulate(const char *dir, const lssar_orb_opts *o, lssar_orb_stats *st) {
    if (!o) return lssar_fail(LSSAR_E_NULL, "orbits options are NULL");
    int rc = check_opts(o);
    if (!rc && o->csv_path && !dir) rc = lssar_fail(LSSAR_E_ARG, "a CSV needs an output directory");
    if (rc) { lssar_dist_error_is_shared(); return rc; }
    const int N = lssar_dist_size(), lead = lssar_dist_rank() == 0;
    const char *wdir = lead ? dir : NULL;   // where this rank writes: rank 0 alone writes
    int prev_threads = omp_get_max_threads();
    int threads = o->threads > 0 ? o->threads : prev_threads;
    omp_set_num_threads(threads);

    // A round: `cap` systems per rank (today's batch), at most ROUND_BATCHES batches in all.
    int keep_rows = o->csv_path != NULL;
    int64_t cap = (o->state || keep_rows) ? 256 : 4096;
    int64_t round = cap * (N < ROUND_BATCHES ? N : ROUND_BATCHES);
    if (round > o->systems) round = o->systems;
    // this rank's buffer: rank 0 receives whole rounds, the others hold their share (at most ceil)
    int64_t have = lead ? round : (round + N - 1) / N;
    batch bufs[2];
    memset(bufs, 0, sizeof bufs);
    writer w;
    memset(&w, 0, sizeof w);
    w.dir = wdir; w.o = o;
    orb_row *scratch = malloc(sizeof(orb_row) * ORB_BODY_ROWS * threads);
    rc = scratch ? 0 : lssar_fail(LSSAR_E_NOMEM, "out of memory");
    for (int i = 0; i < 2 && !rc; i++) rc = batch_alloc(&bufs[i], have, o->state, keep_rows);
    char path[4096];
    if (!rc && wdir) {
        rc = lssar_mkdirs(wdir);
        if (!rc) rc = orb_path(path, sizeof path, wdir, o->split, "systems", 0);
        if (!rc) rc = lssar_afile_open(&w.meta, path);
        if (!rc && o->state && !(rc = orb_path(path, sizeof path, wdir, o->split, "state", 0)))
            rc = lssar_afile_open(&w.state, path);
        if (!rc && o->csv_path) {
            w.csv = fopen(o->csv_path, "w");
            if (!w.csv) rc = lssar_fail(LSSAR_E_IO, "cannot create %s: %s", o->csv_path, strerror(errno));
            else fputs("system,body,step,t,x,y,vx,vy,mass,star_mass\n", w.csv);
        }
        if (!rc) rc = write_headers(&w, o->systems, 0);
    }
    // Every rank calls lssar_dist_agree after the setup, once per round, and once at the end,
    // unless an earlier one failed (`agreed`: then every rank holds the error already).
    int agreed = (rc = lssar_dist_agree(rc)) != 0;

    lssar_progress pr;
    memset(&pr, 0, sizeof pr);
    if (o->progress && lead) lssar_progress_start(&pr, "orbits simulate", "systems", (double)o->systems);
    double t0 = lssar_now();
    pthread_t th;
    int th_running = 0;
    for (int64_t first = 0, k = 0; first < o->systems && !agreed; first += round, k++) {
        batch *b = &bufs[k & 1];
        int64_t count = o->systems - first < round ? o->systems - first : round;
        long lo, hi;
        lssar_dist_share_of((long)count, lssar_dist_rank(), &lo, &hi);
        b->first = first + lo;
        b->count = hi - lo;
        fill_batch(b, o, scratch);
        if (th_running) {
            pthread_join(th, NULL);
            th_running = 0;
            if (!rc && (rc = w.rc)) lssar_fail(rc, "%s", w.msg);
        }
        if ((rc = lssar_dist_agree(rc))) { agreed = 1; break; }
        // MPI itself failed: this rank's agree at the end meets the others' next one
        if ((rc = gather_round(b, first, count))) break;
        if (wdir) {
            w.b = b;
            // no thread: write inline
            if (pthread_create(&th, NULL, writer_main, &w) != 0) rc = write_batch(&w, b);
            else th_running = 1;
        }
        if (o->progress && lead) {
            double done = (double)(first + count), el = lssar_now() - t0;
            char extra[64];
            snprintf(extra, sizeof extra, "%.3g rows/s", el > 0 ? done * ORB_ROWS / el : 0.0);
            lssar_progress_update(&pr, done, extra);
        }
    }
    if (th_running) { pthread_join(th, NULL); if (!rc && (rc = w.rc)) lssar_fail(rc, "%s", w.msg); }
    if (wdir) {
        if (!rc && w.shard_open) { w.shard_open = 0; w.shard_index++; rc = shard_writer_close(&w.shard); }
        if (w.shard_open) shard_writer_abort(&w.shard);
        if (!rc) rc = write_headers(&w, o->systems, 1);
        if (w.meta.f) { if (!rc) rc = lssar_afile_commit(&w.meta); else lssar_afile_abort(&w.meta); }
        if (w.state.f) { if (!rc) rc = lssar_afile_commit(&w.state); else lssar_afile_abort(&w.state); }
        if (w.csv && fclose(w.csv) != 0 && !rc)
            rc = lssar_fail(LSSAR_E_IO, "closing %s failed: %s", o->csv_path, strerror(errno));
        if (!rc) rc = write_json(wdir, o, w.shard_index);
        if (!rc) remove_stale(wdir, o, w.shard_index);
    }
    if (!agreed) rc = lssar_dist_agree(rc);
    double el = lssar_now() - t0;
    if (st) { st->rows = rc ? 0 : o->systems * ORB_ROWS; st->seconds = el; }
    for (int i = 0; i < 2; i++) batch_free(&bufs[i]);
    free(scratch);
    omp_set_num_threads(prev_threads);
    return rc;
}
