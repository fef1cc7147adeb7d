// hooks.c - the test build of the program (BUILD/tests/lssar-hooks: the program's objects and this
// file): faults injected into real runs from environment variables, for the shell tests that kill
// or poison `lssar train` (tests/test_crash.sh, test_dist.sh, test_dist_netns.sh, test_recipe.sh,
// scripts/crash-test.sh). The library and BUILD/lssar never read these variables; they only call
// the seams (lssar_save_pause in core/util.h, train_test_hooks in train/train.h) that this sets.
//
//   LSSAR_TEST_DELAY_SAVE_MS=N       sleep N ms inside every checkpoint write (before each rename)
//   LSSAR_TEST_NAN_AT_STEP=K         step K's loss reads back as NaN
//   LSSAR_TEST_NAN_GRAD_AT_STEP=K    one gradient element of step K's first micro-batch is NaN
//   LSSAR_TEST_KILL_AT_STEP=K        with LSSAR_TEST_KILL_RANK=R: rank R raises SIGKILL at the start
//                                    of step K, as a crashed machine would
//   LSSAR_TEST_OVERLAP=1             the gradient buckets inside the backward (gpt_dp_overlap) on,
//                                    so that path runs on the CPU too
#include <errno.h>
#include <math.h>
#include <signal.h>
#include <stdlib.h>
#include <time.h>
#include "core/dist.h"
#include "core/util.h"
#include "train/train.h"

static long delay_ms, nan_loss_at, nan_grad_at, kill_at, kill_rank;

static long env_long(const char *name) {
    const char *e = getenv(name);
    return e && *e ? atol(e) : 0;
}

static void save_pause(void) {
    struct timespec ts = {delay_ms / 1000, (delay_ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {}
}

static double step_loss(int64_t step, double loss) { return step == nan_loss_at ? NAN : loss; }

// the first element of the first tensor's gradient, in the first micro-batch of the step
static int grads_done(gpt *m, int64_t step, int micro) {
    if (micro != 0 || step != nan_grad_at) return 0;
    float *g = malloc(gpt_tensor_numel(m, 0) * sizeof(float));
    if (!g) return lssar_fail(LSSAR_E_NOMEM, "out of memory");
    int rc = gpt_read_tensor(m, GPT_BUF_GRAD, 0, g);
    g[0] = NAN;
    if (!rc) rc = gpt_write_tensor(m, GPT_BUF_GRAD, 0, g);
    free(g);
    return rc;
}

static void step_start(int64_t step) {
    if (step == kill_at && kill_rank == lssar_dist_rank()) raise(SIGKILL);
}

static void overlap_on(gpt_dp *dp) { gpt_dp_overlap(dp, 1); }

__attribute__((constructor)) static void hooks_from_env(void) {
    delay_ms = env_long("LSSAR_TEST_DELAY_SAVE_MS");
    nan_loss_at = env_long("LSSAR_TEST_NAN_AT_STEP");
    nan_grad_at = env_long("LSSAR_TEST_NAN_GRAD_AT_STEP");
    kill_at = env_long("LSSAR_TEST_KILL_AT_STEP");
    kill_rank = env_long("LSSAR_TEST_KILL_RANK");
    if (delay_ms > 0) lssar_save_pause = save_pause;
    if (nan_loss_at > 0) train_test_hooks.step_loss = step_loss;
    if (nan_grad_at > 0) train_test_hooks.grads_done = grads_done;
    if (kill_at > 0 && getenv("LSSAR_TEST_KILL_RANK")) train_test_hooks.step_start = step_start;
    if (env_long("LSSAR_TEST_OVERLAP") == 1) train_test_hooks.dp_ready = overlap_on;
}
