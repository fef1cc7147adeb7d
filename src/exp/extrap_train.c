// extrap_train.c - one run's model: trained, resumed, or reused when it reached the budget; see
// extrap_run.h.
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include "attn/attn.h"
#include "exp/common.h"
#include "exp/extrap_run.h"
#include "exp/passkey.h"
#include "model/checkpoint.h"

static int file_exists(const char *p) { struct stat st; return stat(p, &st) == 0; }

// A folder left by another experiment must not pass for this one: the model's configuration, the
// data recipe (window alignment, passkey share) and the seed must be this call's. *step: the
// model's.
static int check_folder(const train_opts *base, const char *dir, const extrap_run *r, int64_t *step) {
    gpt *g = NULL;
    int rc = ckpt_load_model(dir, &(ckpt_load_opts){.device = base->model.device}, &g, step);
    if (rc) return rc;
    const gpt_config *c = gpt_get_config(g);
    const gpt_config *b = &base->model;
    int same = c->layers == b->layers && c->heads == b->heads && c->dim == b->dim &&
               (b->vocab == 0 || c->vocab == b->vocab) && (int)c->attn == r->attn &&
               (!attn_reweights(r->attn) || c->p == r->p) && c->pos == b->pos && c->max_seq == base->seq &&
               c->rope_base == b->rope_base && c->temp_d == b->temp_d;
    gpt_free(g);
    if (!same)
        return lssar_fail(LSSAR_E_ARG, "%s holds a model with another configuration (layers, heads, dim, "
                                       "vocab, attention, positions, seq, RoPE base or temperature D "
                                       "differ): delete it or choose another --out", dir);
    int align = (int)exp_trainer_meta(dir, "align", 1);
    double mix = exp_passkey_mix(dir);
    int prompt = exp_passkey_prompt(dir);
    if (align != base->align || fabs(mix - base->passkey_mix) > 1e-6 ||
        (mix > 0 && prompt != base->passkey_prompt))
        return lssar_fail(LSSAR_E_ARG, "%s was trained with align %d and passkey mix %g (%s prompt), this "
                                       "call asks for align %d and passkey mix %g (%s prompt): delete it or "
                                       "choose another --out",
                          dir, align, mix, passkey_prompt_name((passkey_prompt)prompt), base->align,
                          (double)base->passkey_mix,
                          passkey_prompt_name((passkey_prompt)base->passkey_prompt));
    // run -sK is trained with --seed + K
    double sd = exp_trainer_meta(dir, "seed", NAN);
    if (isfinite(sd) && sd < 9007199254740992.0 && (uint64_t)sd != base->seed + (uint64_t)r->seed_ix)
        return lssar_fail(LSSAR_E_ARG, "%s was trained with seed %.0f, this call trains it with seed %llu "
                                       "(--seed + its seed index): delete it or choose another --out",
                          dir, sd, (unsigned long long)(base->seed + (uint64_t)r->seed_ix));
    return 0;
}

// Train the run in dir (resume: from its checkpoint) and keep the wall time beside it, for a
// later call that only reads the run back.
static int train_in(const train_opts *base, const char *dir, extrap_run *r, int resume) {
    train_opts o = *base;
    o.out = dir;
    o.model.attn = r->attn;
    o.model.p = r->p;
    o.seed = base->seed + (uint64_t)r->seed_ix;   // seed index K: the same init and data order for every kind
    o.resume = resume;
    if (!base->quiet && resume) fprintf(stderr, "extrapolate: resuming %s\n", r->name);
    else if (!base->quiet)
        fprintf(stderr, "extrapolate: training %s (%d steps, T = %d)\n", r->name, o.steps, o.seq);
    train_result res;
    double t0 = lssar_now();
    int rc = train_run(&o, &res);
    if (rc) return rc;
    r->step = res.step;
    r->train_s = lssar_now() - t0;
    char wp[4200], buf[64];
    snprintf(wp, sizeof wp, "%s/train_seconds.txt", dir);
    snprintf(buf, sizeof buf, "%.1f\n", r->train_s);
    exp_write_text(wp, buf);
    return 0;
}

int extrap_train_run(extrap *x, extrap_run *r) {
    if (r->eval_only) return 0;
    const train_opts *base = &x->base;
    char dir[4096], mp[4200], tp[4200];
    snprintf(dir, sizeof dir, "%s/%s", x->o->out, r->name);
    snprintf(mp, sizeof mp, "%s/%s", dir, CKPT_MODEL_FILE);
    snprintf(tp, sizeof tp, "%s/%s", dir, CKPT_TRAINER_FILE);
    if (file_exists(mp)) {
        int64_t step = 0;
        int rc = check_folder(base, dir, r, &step);
        if (rc) return rc;
        if (step >= base->steps) {
            if (!base->quiet)
                fprintf(stderr, "extrapolate: %s already trained (%lld steps), not retrained\n", r->name,
                        (long long)step);
            r->step = step;
            return 0;
        }
    }
    return train_in(base, dir, r, file_exists(mp) && file_exists(tp));
}

double extrap_train_seconds(const char *out, const char *name) {
    char wp[4200];
    snprintf(wp, sizeof wp, "%s/%s/train_seconds.txt", out, name);
    char *s = NULL;
    size_t n;
    if (lssar_read_file(wp, &s, &n)) return NAN;
    double v = atof(s);
    free(s);
    return v;
}
