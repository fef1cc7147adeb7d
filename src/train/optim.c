// optim.c - the learning-rate schedule and the AdamW step of the trainer and the probes; see
// train.h.
#include <math.h>
#include "nn/nn.h"
#include "train.h"

double train_lr_at(const train_schedule *sc, int64_t step) {
    double lr = sc->lr, lr_min = sc->lr_min;
    if (sc->warmup > 0 && step <= sc->warmup) return lr * (double)step / sc->warmup;
    double span = sc->steps - sc->warmup;
    double u = span > 0 ? (double)(step - sc->warmup) / span : 1.0;
    if (u < 0) u = 0;
    if (u > 1) u = 1;   // past the schedule (never in a normal run): stay at the floor
    return lr_min + 0.5 * (lr - lr_min) * (1.0 + cos(M_PI * u));
}

train_schedule train_schedule_of(const train_state *s) {
    // min_lr_frac x lr in float, as the trainer has always computed it (bit-exact resumes)
    train_schedule sc = {s->lr, s->min_lr_frac * s->lr, s->warmup, s->steps};
    return sc;
}

float train_lr(const train_state *s, int64_t step) {
    train_schedule sc = train_schedule_of(s);
    return (float)train_lr_at(&sc, step);
}

// The model's tensors through its one AdamW step (gpt_adamw_step); the caller's host tensors
// through the same update on the CPU.
int train_adamw_step(gpt *m, float lr, const train_tensor *extra, int n_extra, int64_t t,
                     const train_adamw *h) {
    if (!h) return lssar_fail(LSSAR_E_NULL, "train_adamw_step: no hyper-parameters");
    if (t < 1 || t > 0x7fffffff)
        return lssar_fail(LSSAR_E_ARG, "train_adamw_step: step t = %lld; steps count from 1", (long long)t);
    int rc = gpt_adamw_check(h->beta1, h->beta2, h->eps);
    if (!rc && m) rc = gpt_adamw_step(m, (int)t, lr, h->beta1, h->beta2, h->eps, h->wd);
    if (rc) return rc;
    for (int i = 0; i < n_extra; i++) {
        const train_tensor *x = &extra[i];
        if (!x->param || !x->grad || !x->m || !x->v)
            return lssar_fail(LSSAR_E_NULL, "train_adamw_step: tensor %d has a NULL buffer", i);
        adamw_update(x->param, x->grad, x->m, x->v, x->n, (int)t, x->lr, h->beta1, h->beta2, h->eps,
                     x->decay ? h->wd : 0.0f);
    }
    return 0;
}
