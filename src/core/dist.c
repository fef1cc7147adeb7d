// dist.c - the ranks of a distributed run over MPI; see dist.h.
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "dist.h"
#include "util.h"
#ifdef LSSAR_MPI
#include <mpi.h>
#endif

static int g_rank = 0, g_size = 1, g_mpi = 0, g_shared = 0;
// Solo mode (dist.h) swaps the job's rank and size for 0 and 1, so that every function here,
// which reads g_rank and g_size, acts as in a job of one rank; the real ones wait in g_world_*.
static int g_solo = 0, g_world_rank = 0, g_world_size = 1;

int lssar_dist_built(void) {
#ifdef LSSAR_MPI
    return 1;
#else
    return 0;
#endif
}

// The launcher's own variables: Open MPI's mpirun, PMIx (srun --mpi=pmix, mpirun), PMI-1/2 (srun).
static int launched_size(void) {
    const char *names[] = {"OMPI_COMM_WORLD_SIZE", "PMIX_SIZE", "PMI_SIZE", "SLURM_NTASKS"};
    for (int i = 0; i < 4; i++) {
        const char *e = getenv(names[i]);
        if (e && *e) return atoi(e);
    }
    return getenv("PMIX_RANK") ? 2 : 1;   // PMIx without a size: a job, of unknown size
}

int lssar_dist_init(int *argc, char ***argv) {
    if (g_mpi) return 0;
    int want = launched_size();
    if (want <= 1 && !getenv("PMIX_RANK") && !getenv("OMPI_COMM_WORLD_RANK")) return 0;
#ifdef LSSAR_MPI
    int provided;
    if (MPI_Init_thread(argc, argv, MPI_THREAD_FUNNELED, &provided) != MPI_SUCCESS)
        return lssar_fail(LSSAR_E_IO, "MPI_Init failed: is this lssar run by the mpirun of the Open MPI it "
                          "was built with?");
    g_mpi = 1;
    // errors come back as codes, so a failed collective is reported instead of aborting silently
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    MPI_Comm_rank(MPI_COMM_WORLD, &g_rank);
    MPI_Comm_size(MPI_COMM_WORLD, &g_size);
    return 0;
#else
    (void)argc; (void)argv;
    if (want > 1)
        return lssar_fail(LSSAR_E_UNSUPPORTED, "started by a parallel launcher (%d ranks), but this lssar "
                          "was built without MPI: install libopenmpi-dev (scripts/deps.sh) and rebuild",
                          want);
    return 0;
#endif
}

void lssar_dist_finalize(void) {
#ifdef LSSAR_MPI
    if (g_mpi) MPI_Finalize();
#endif
    g_mpi = 0;
}

void lssar_dist_abort(int rc) {
#ifdef LSSAR_MPI
    if (g_mpi) MPI_Abort(MPI_COMM_WORLD, rc);
#endif
    exit(rc);
}

void lssar_dist_solo(int on) {
    if (on) {
        if (g_solo++ == 0) { g_world_rank = g_rank; g_world_size = g_size; g_rank = 0; g_size = 1; }
    } else if (g_solo > 0 && --g_solo == 0) {
        g_rank = g_world_rank; g_size = g_world_size;
    }
}
int lssar_dist_world_rank(void) { return g_solo ? g_world_rank : g_rank; }
int lssar_dist_world_size(void) { return g_solo ? g_world_size : g_size; }

int lssar_dist_rank(void) { return g_rank; }
int lssar_dist_size(void) { return g_size; }
int lssar_dist_error_shared(void) { return g_shared; }
void lssar_dist_error_is_shared(void) { g_shared = 1; }

#ifdef LSSAR_MPI
static int mpi_failed(int e, const char *what) {
    char s[MPI_MAX_ERROR_STRING];
    int n = 0;
    MPI_Error_string(e, s, &n);
    return lssar_fail(LSSAR_E_IO, "rank %d: %s failed: %s (another rank died? see mpirun's message)", g_rank,
                      what, s);
}
#define MPI_TRY(call, what)                                      \
    do {                                                         \
        int e_ = (call);                                         \
        if (e_ != MPI_SUCCESS) return mpi_failed(e_, what);      \
    } while (0)
#endif

int lssar_dist_agree(int rc) {
    g_shared = 0;
    if (g_size == 1) return rc;
#ifdef LSSAR_MPI
    int *all = malloc(sizeof(int) * g_size);
    if (!all) return lssar_fail(LSSAR_E_NOMEM, "out of memory");
    int e = MPI_Allgather(&rc, 1, MPI_INT, all, 1, MPI_INT, MPI_COMM_WORLD);
    if (e != MPI_SUCCESS) { free(all); return mpi_failed(e, "MPI_Allgather"); }
    int first = -1;
    for (int r = 0; r < g_size && first < 0; r++) if (all[r]) first = r;
    int code = first >= 0 ? all[first] : 0;
    free(all);
    if (first < 0) return 0;
    char msg[2048];
    snprintf(msg, sizeof msg, "%s", g_rank == first ? lssar_errmsg() : "");
    MPI_TRY(MPI_Bcast(msg, (int)sizeof msg, MPI_CHAR, first, MPI_COMM_WORLD), "MPI_Bcast");
    msg[sizeof msg - 1] = 0;
    lssar_fail(code, "rank %d: %s", first, msg);
    g_shared = 1;
    return code;
#else
    return rc;
#endif
}

int lssar_dist_check_same(const char *what, const char *label) {
    if (g_size == 1) return 0;
    // FNV-1a of the string: rank 0's against everyone's
    uint64_t h = 1469598103934665603ull;
    for (const char *p = what; *p; p++) h = (h ^ (unsigned char)*p) * 1099511628211ull;
    double mine[2] = {(double)(h >> 32), (double)(h & 0xffffffffu)};
    double *all = malloc(sizeof(double) * 2 * g_size);
    if (!all) return lssar_fail(LSSAR_E_NOMEM, "out of memory");
    int rc = lssar_dist_allgather_f64(mine, 2, all);
    int bad = -1;
    for (int r = 1; !rc && r < g_size && bad < 0; r++)
        if (all[2 * r] != all[0] || all[2 * r + 1] != all[1]) bad = r;
    free(all);
    if (rc) return rc;
    if (bad < 0) return 0;
    g_shared = 1;
    return lssar_fail(LSSAR_E_ARG, "rank %d was started with a different %s from rank 0's: every rank must "
                      "run the same command (one mpirun line, the same flags)", bad, label);
}

int lssar_dist_bcast(void *buf, size_t bytes, int root) {
    if (g_size == 1) return 0;
#ifdef LSSAR_MPI
    if (bytes > INT32_MAX)
        return lssar_fail(LSSAR_E_SIZE, "lssar_dist_bcast: %zu bytes is too many at once", bytes);
    MPI_TRY(MPI_Bcast(buf, (int)bytes, MPI_BYTE, root, MPI_COMM_WORLD), "MPI_Bcast");
#endif
    return 0;
}

int lssar_dist_barrier(void) {
    if (g_size == 1) return 0;
#ifdef LSSAR_MPI
    MPI_TRY(MPI_Barrier(MPI_COMM_WORLD), "MPI_Barrier");
#endif
    return 0;
}

int lssar_dist_allgather_f64(const double *mine, size_t n, double *all) {
    if (g_size == 1) { memcpy(all, mine, n * sizeof(double)); return 0; }
#ifdef LSSAR_MPI
    MPI_TRY(MPI_Allgather(mine, (int)n, MPI_DOUBLE, all, (int)n, MPI_DOUBLE, MPI_COMM_WORLD),
            "MPI_Allgather");
#endif
    return 0;
}

#ifdef LSSAR_MPI
// int counts and displacements of MPI's v-collectives, checked
static int to_int_counts(const size_t *off, const size_t *cnt, int *ioff, int *icnt) {
    for (int r = 0; r < g_size; r++) {
        if (off[r] > INT32_MAX || cnt[r] > INT32_MAX || off[r] + cnt[r] > INT32_MAX)
            return lssar_fail(LSSAR_E_SIZE, "a distributed buffer of more than 2^31 floats is not supported");
        ioff[r] = (int)off[r];
        icnt[r] = (int)cnt[r];
    }
    return 0;
}
#endif

int lssar_dist_sum_f32(float *out, const float *x, const size_t *off, const size_t *cnt, int accumulate,
                       float *scratch) {
    const size_t n = cnt[g_rank];
    if (g_size == 1) {
        const float *p = x + off[0];
        if (accumulate) for (size_t i = 0; i < n; i++) out[i] += p[i];
        else if (out != p) memmove(out, p, n * sizeof(float));
        return 0;
    }
#ifdef LSSAR_MPI
    int *so = malloc(sizeof(int) * 4 * g_size);
    if (!so) return lssar_fail(LSSAR_E_NOMEM, "out of memory");
    int *sc = so + g_size, *ro = sc + g_size, *rc_ = ro + g_size;
    int rc = to_int_counts(off, cnt, so, sc);
    for (int s = 0; s < g_size; s++) { ro[s] = (int)(s * n); rc_[s] = (int)n; }
    if (!rc) {
        int e = MPI_Alltoallv(x, sc, so, MPI_FLOAT, scratch, rc_, ro, MPI_FLOAT, MPI_COMM_WORLD);
        if (e != MPI_SUCCESS) rc = mpi_failed(e, "MPI_Alltoallv");
    }
    free(so);
    if (rc) return rc;
    // rank order, one addition per piece: the same sum as one process adding them in turn
    size_t s0 = 0;
    if (!accumulate) { memcpy(out, scratch, n * sizeof(float)); s0 = 1; }
    for (size_t s = s0; s < (size_t)g_size; s++) {
        const float *p = scratch + s * n;
        for (size_t i = 0; i < n; i++) out[i] += p[i];
    }
    return 0;
#else
    return lssar_fail(LSSAR_E_UNSUPPORTED, "built without MPI");
#endif
}

int lssar_dist_allgather_f32(float *x, const size_t *off, const size_t *cnt, int root) {
    if (g_size == 1) return 0;
#ifdef LSSAR_MPI
    int *io = malloc(sizeof(int) * 2 * g_size);
    if (!io) return lssar_fail(LSSAR_E_NOMEM, "out of memory");
    int rc = to_int_counts(off, cnt, io, io + g_size);
    if (!rc && root < 0) {
        int e = MPI_Allgatherv(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, x, io + g_size, io, MPI_FLOAT,
                               MPI_COMM_WORLD);
        if (e != MPI_SUCCESS) rc = mpi_failed(e, "MPI_Allgatherv");
    } else if (!rc) {
        int e = g_rank == root
                    ? MPI_Gatherv(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, x, io + g_size, io, MPI_FLOAT, root,
                                  MPI_COMM_WORLD)
                    : MPI_Gatherv(x + off[g_rank], io[g_size + g_rank], MPI_FLOAT, NULL, NULL, NULL,
                                  MPI_FLOAT, root, MPI_COMM_WORLD);
        if (e != MPI_SUCCESS) rc = mpi_failed(e, "MPI_Gatherv");
    }
    free(io);
    return rc;
#else
    return lssar_fail(LSSAR_E_UNSUPPORTED, "built without MPI");
#endif
}

void lssar_dist_share(long n, long *lo, long *hi) { lssar_dist_share_of(n, g_rank, lo, hi); }

int lssar_dist_allgather_bytes(const void *mine, size_t n, char **all, size_t *total, size_t *counts) {
    *all = NULL;
    *total = 0;
    if (g_size == 1) {
        if (counts) counts[0] = n;
        if (!n) return 0;
        if (!(*all = malloc(n))) return lssar_fail(LSSAR_E_NOMEM, "out of memory (%zu bytes)", n);
        memcpy(*all, mine, n);
        *total = n;
        return 0;
    }
#ifdef LSSAR_MPI
    if (n > INT32_MAX)
        return lssar_fail(LSSAR_E_SIZE, "lssar_dist_allgather_bytes: %zu bytes from one rank is "
                          "too many at once", n);
    int *io = malloc(sizeof(int) * 2 * g_size);
    if (!io) return lssar_fail(LSSAR_E_NOMEM, "out of memory");
    int *icnt = io, *ioff = io + g_size, mine_n = (int)n, rc = 0;
    int e = MPI_Allgather(&mine_n, 1, MPI_INT, icnt, 1, MPI_INT, MPI_COMM_WORLD);
    if (e != MPI_SUCCESS) rc = mpi_failed(e, "MPI_Allgather");
    size_t sum = 0;
    for (int r = 0; !rc && r < g_size; r++) {
        if (sum + (size_t)icnt[r] > INT32_MAX)
            rc = lssar_fail(LSSAR_E_SIZE, "lssar_dist_allgather_bytes: more than 2^31 bytes in all");
        ioff[r] = (int)sum;
        sum += (size_t)icnt[r];
        if (counts) counts[r] = (size_t)icnt[r];
    }
    char *buf = NULL;
    if (!rc && sum && !(buf = malloc(sum))) rc = lssar_fail(LSSAR_E_NOMEM, "out of memory (%zu bytes)", sum);
    if (!rc) {
        e = MPI_Allgatherv(mine, mine_n, MPI_BYTE, buf, icnt, ioff, MPI_BYTE, MPI_COMM_WORLD);
        if (e != MPI_SUCCESS) rc = mpi_failed(e, "MPI_Allgatherv");
    }
    free(io);
    if (rc) { free(buf); return rc; }
    *all = buf;
    *total = sum;
    return 0;
#else
    return lssar_fail(LSSAR_E_UNSUPPORTED, "built without MPI");
#endif
}

void lssar_dist_share_of(long n, int rank, long *lo, long *hi) {
    *lo = (long)((long long)n * rank / g_size);
    *hi = (long)((long long)n * (rank + 1) / g_size);
}

int lssar_dist_gather_bytes(const void *mine, void *all, const size_t *counts, int root) {
    if (g_size == 1) {
        if (counts[0] && all != mine) memmove(all, mine, counts[0]);
        return 0;
    }
#ifdef LSSAR_MPI
    int *io = malloc(sizeof(int) * 2 * g_size);
    if (!io) return lssar_fail(LSSAR_E_NOMEM, "out of memory");
    int *icnt = io, *ioff = io + g_size, rc = 0;
    size_t sum = 0;
    for (int r = 0; r < g_size && !rc; r++) {
        if (counts[r] > INT32_MAX || sum + counts[r] > INT32_MAX)
            rc = lssar_fail(LSSAR_E_SIZE, "lssar_dist_gather_bytes: more than 2^31 bytes in all");
        ioff[r] = (int)sum;
        icnt[r] = (int)counts[r];
        sum += counts[r];
    }
    if (!rc) {
        // MPI forbids a root's send buffer overlapping its receive buffer: in place is MPI_IN_PLACE
        const void *send = g_rank == root && mine == (const char *)all + ioff[root] ? MPI_IN_PLACE : mine;
        int e = MPI_Gatherv(send, icnt[g_rank], MPI_BYTE, all, icnt, ioff, MPI_BYTE, root, MPI_COMM_WORLD);
        if (e != MPI_SUCCESS) rc = mpi_failed(e, "MPI_Gatherv");
    }
    free(io);
    return rc;
#else
    (void)root;
    return lssar_fail(LSSAR_E_UNSUPPORTED, "built without MPI");
#endif
}
