// cmd_train.c - `lssar train`: flags -> train_opts (with the passkey source of src/exp/passkey.h
// for --passkey-mix) -> train_run (src/train/train.h).
#include <math.h>
#include <stdio.h>
#include <string.h>
#include "args.h"
#include "lssar.h"
#include "exp/common.h"
#include "exp/passkey.h"
#include "model/checkpoint.h"
#include "core/dist.h"
#include "model/gpt.h"
#include "train/resume.h"
#include "train/train.h"

static const char *ABOUT =
    "Train a GPT model on token shards (llm.c format; the channel count comes from the shard header).\n"
    "Each step draws --accum micro-batches of --batch random windows of --seq + 1 tokens (inputs and\n"
    "next-token targets), clips the gradient norm to --clip and takes one AdamW step (betas --beta1\n"
    "--beta2, weight decay --wd on 2-D weights only). Learning rate: linear warmup over --warmup steps\n"
    "to --lr, then cosine decay to --lr-floor x --lr at --steps. Runs are deterministic for a fixed\n"
    "--seed and --threads.\n"
    "\n"
    "Writes --out/model.safetensors (weights + config), --out/trainer.safetensors (AdamW state, data\n"
    "RNG, schedule: what --resume needs) every --save-every steps and at the end, and one JSON line\n"
    "per step and per validation to --out/log.jsonl. Validation: mean loss on the first\n"
    "--eval-batches x --batch consecutive windows of --val, every --eval-every steps and at the end.\n"
    "A step never waits for the device: the losses and gradient norms stay there and are read back\n"
    "every --log-every steps (and before every checkpoint, validation and the end); then each step\n"
    "gets its line, its \"ms\" the interval's time / its steps, and a NaN names the first bad step.\n"
    "A larger --log-every (say 10 on a GPU) saves the waits; the weights are the same for any value.\n"
    "\n"
    "--resume continues the run in --out exactly where its checkpoint stopped, with the stored\n"
    "model, batch and schedule. --steps changes the schedule's length, --lr --warmup --lr-floor --wd\n"
    "--clip --beta1 --beta2 --eps change the optimizer from the resume point on (say, a lower --lr\n"
    "after a NaN); model, batch, --seq and --seed flags must match or be left out.\n"
    "--stop-at N stops (and saves) after step N of a --steps schedule: `--steps 2N --stop-at N`\n"
    "then `--resume` gives the same weights, bit for bit, as `--steps 2N` in one go.\n"
    "\n"
    "Data parallel: `mpirun -np N lssar train ...` runs N ranks (docs/DISTRIBUTED.md). --batch and\n"
    "--accum are per rank: a step is --accum x N micro-batches, the same windows in the same order as\n"
    "one process with --accum x N, and the same weights bit for bit. Rank 0 writes everything;\n"
    "--resume works on any rank count that divides the step's micro-batches. --zero 1 keeps 1/N of\n"
    "the AdamW state on each rank.\n"
    "\n"
    "--attn sigmoid / relu have no row normalisation; --len-norm sets their length normalisation\n"
    "(docs/attention.md): train (default) uses the training length L = --seq, fixed in the model\n"
    "(sigmoid bias -ln L, relu divides by L); row uses each row's number of visible keys n instead.\n"
    "Other kinds ignore it. Both backends have them (on --device cuda: the fused kernels, one pass).\n"
    "\n"
    "--recompute keeps, per block, only its output and runs the block forward again in the\n"
    "backward: one more forward of all blocks but the last per step (at most 4/3 of the step's FLOPs;\n"
    "1.20x for 12 layers, width 768, vocab 50257, --seq 1024, whose output head is not rerun) for\n"
    "much less activation memory (that shape, batch 1: 640 MiB -> 145 MiB on the CPU, 25 MiB of it\n"
    "the logits; the run's second line prints the size). The weights are bit for bit the same, so a\n"
    "--resume may turn it on or off.\n"
    "\n"
    "--vocab: ids per channel. Default: the vocabulary the shards record (lssar data build, data\n"
    "synth and tokenize --out write it), else 50257 (GPT-2) if every id of the data fits, else give\n"
    "it; byte-tokenized shards from elsewhere want --vocab 257.\n"
    "\n"
    "Crash safety: a run may be killed at any moment (even inside a checkpoint write) and continued\n"
    "with --resume, bit-identical to an uninterrupted run: the two checkpoint files are written into\n"
    "--out/.ckpt-next/ and moved into place together, and the next run completes or discards an\n"
    "interrupted move. A run holds a lock on --out/.lock: a second run on the same --out refuses\n"
    "(naming the process that holds it); the lock of a killed run is gone with it. A failed write\n"
    "(disk full, file size limit) stops the run with a message naming the file; the previous\n"
    "checkpoint stays intact.\n"
    "\n"
    "Exit status: 0 done, 2 bad flags, 1 other errors (bad files, disk full, --out in use),\n"
    "3 the loss or gradient became NaN/Inf: nothing is saved, the last checkpoint is left as it was.";

static int seen(const arg_spec *s, const char *name) {
    for (; s->name; s++) if (!strcmp(s->name, name)) return s->seen;
    return 0;
}

// On --resume, a model or schedule flag that disagrees with the checkpoint is a mistake.
static int check_resume_flags(const arg_spec *sp, train_opts *o, const char *attn, const char *pos,
                              const char *len_norm) {
    // a missing or damaged checkpoint is a file error (exit 1); a flag that disagrees with it is a
    // usage error (exit 2, below)
    train_state s;
    gpt_config c;
    if (train_read_checkpoint(o->out, &c, &s)) {
        fprintf(stderr, "lssar train: --resume: %s\n", lssar_errmsg());
        return 1;
    }
    char stored[64], given[64];
    lssar_attn_kind given_attn = c.attn;
    if (seen(sp, "attn") && args_attn_kind("train", attn, &given_attn)) return 2;
#define SAME(flag, cond, sfmt, sval, gval)                                                                 \
    if (seen(sp, flag) && !(cond)) {                                                                       \
        snprintf(stored, sizeof stored, sfmt, sval);                                                       \
        snprintf(given, sizeof given, sfmt, gval);                                                         \
        return args_error("train",                                                                         \
                          "--%s %s differs from the checkpoint in %s (%s): --resume continues the stored " \
                          "run; drop --%s, or start a new run in another --out",                           \
                          flag, given, o->out, stored, flag);                                              \
    }
    SAME("attn", given_attn == c.attn, "%s", lssar_attn_name(c.attn), attn);
    SAME("pos", gpt_pos_parse(pos) == (int)c.pos, "%s", lssar_pos_name(c.pos), pos);
    SAME("p", o->model.p == c.p, "%g", c.p, o->model.p);
    SAME("len-norm", o->model.len_norm == c.len_norm, "%s", lssar_len_norm_name(c.len_norm), len_norm);
    SAME("rope-base", o->model.rope_base == c.rope_base, "%g", c.rope_base, o->model.rope_base);
    SAME("temp-d", o->model.temp_d == c.temp_d, "%d", c.temp_d, o->model.temp_d);
    SAME("layers", o->model.layers == c.layers, "%d", c.layers, o->model.layers);
    SAME("heads", o->model.heads == c.heads, "%d", c.heads, o->model.heads);
    SAME("dim", o->model.dim == c.dim, "%d", c.dim, o->model.dim);
    SAME("vocab", o->model.vocab == c.vocab, "%d", c.vocab, o->model.vocab);
    SAME("untied", o->model.tied == c.tied, "%d", !c.tied, !o->model.tied);
    SAME("seq", o->seq == s.seq, "%d", s.seq, o->seq);
    SAME("batch", o->batch == s.batch, "%d", s.batch, o->batch);
    // the checkpoint's accum counts the micro-batches of a step over all ranks
    SAME("accum", o->accum * lssar_dist_size() == s.accum, "%d", s.accum / lssar_dist_size(), o->accum);
    SAME("seed", o->seed == s.seed, "%llu", (unsigned long long)s.seed, (unsigned long long)o->seed);
    SAME("align", o->align == s.align, "%d", s.align, o->align);
    SAME("passkey-mix", o->passkey_mix == s.passkey_mix, "%g", s.passkey_mix, o->passkey_mix);
    SAME("passkey-short", o->passkey_prompt == s.passkey_prompt, "%d", s.passkey_prompt, o->passkey_prompt);
#undef SAME
    // Optimizer flags may change on resume (e.g. a lower --lr after a NaN); the ones not given
    // keep their stored values.
#define KEEP(flag, field) if (!seen(sp, flag)) o->field = s.field; else o->override_optim = 1;
    KEEP("lr", lr);
    KEEP("lr-floor", min_lr_frac);
    KEEP("warmup", warmup);
    KEEP("wd", wd);
    KEEP("clip", clip);
    KEEP("beta1", beta1);
    KEEP("beta2", beta2);
    KEEP("eps", eps);
#undef KEEP
    return 0;
}

int cmd_train(int argc, char **argv) {
    train_opts o;
    train_opts_default(&o);
    const char *attn = "lssar", *len_norm = "train";
    int steps = 100, no_plot = 0;
    args_model_flags mf = {.device = "cpu", .pos = "rope"};
    arg_spec sp[] = {
        {"data", ARG_STR, &o.data, "training shards TRAIN.bin[,MORE.bin] (required unless --resume)", 0, 0},
        {"val", ARG_STR, &o.val, "validation shard", 0, 0},
        {"out", ARG_STR, &o.out, "run directory (checkpoints, log.jsonl)", 1, 0},
        {"resume", ARG_BOOL, &o.resume, "continue the run in --out from its checkpoint", 0, 0},
        {"attn", ARG_STR, &attn,
         "attention: softmax, ssmax, lssa, lssar, sigmoid or relu, or a preset with other stages: +dot, "
         "+ssmax, +cos (score), +exp, +softplus (phi), +rw, +norw (re-weighting), e.g. softmax+cos+rw",
         0, 0},
        {"p", ARG_FLOAT, &o.model.p,
         "re-weighting power p (the kinds that re-weight: lssar, softmax+rw, ...)", 0, 0},
        {"len-norm", ARG_STR, &len_norm,
         "sigmoid/relu length normalisation: train (L = --seq) or row (L = n)", 0, 0},
        ARGS_MODEL_SPECS(&o.model, &mf, 0),
        {"ordinal", ARG_INT, &o.ordinal,
         "token ids 0..N-1 are ordered bins (orbits: 7000): their embeddings start as sinusoids of the id, "
         "each channel in its own share of the width (fresh runs only)",
         0, 0},
        {"seq", ARG_INT, &o.seq, "training sequence length T", 0, 0},
        {"batch", ARG_INT, &o.batch, "sequences per micro-batch", 0, 0},
        {"accum", ARG_INT, &o.accum, "micro-batches per optimizer step (gradient accumulation)", 0, 0},
        {"steps", ARG_INT, &steps, "optimizer steps (the length of the schedule)", 0, 0},
        {"lr", ARG_FLOAT, &o.lr, "peak learning rate", 0, 0},
        {"warmup", ARG_INT, &o.warmup, "linear warmup steps (-1: 10% of --steps)", 0, 0},
        {"lr-floor", ARG_FLOAT, &o.min_lr_frac, "cosine decay ends at this fraction of --lr", 0, 0},
        {"wd", ARG_FLOAT, &o.wd, "AdamW weight decay (2-D weights only)", 0, 0},
        {"clip", ARG_FLOAT, &o.clip, "clip the global gradient norm to this (0: off)", 0, 0},
        {"beta1", ARG_FLOAT, &o.beta1, "AdamW beta1", 0, 0},
        {"beta2", ARG_FLOAT, &o.beta2, "AdamW beta2", 0, 0},
        {"eps", ARG_FLOAT, &o.eps, "AdamW epsilon", 0, 0},
        {"seed", ARG_U64, &o.seed, "seed of the initialisation and the data order", 0, 0},
        {"align", ARG_INT, &o.align,
         "windows start at multiples of this (sequences of fixed length, e.g. 1000 for orbits)", 0, 0},
        {"passkey-mix", ARG_FLOAT, &o.passkey_mix,
         "replace this share of training windows by passkey sequences (lssar passkey; text models)", 0, 0},
        {"passkey-short", ARG_BOOL, &o.passkey_prompt,
         "passkey sequences without the task sentence (byte models: whole filler units fit short windows)", 0,
         0},
        {"eval-every", ARG_INT, &o.eval_every, "validation every N steps (0: only at the end)", 0, 0},
        {"eval-batches", ARG_INT, &o.eval_batches, "validation batches (of --batch windows)", 0, 0},
        {"save-every", ARG_INT, &o.save_every, "checkpoint every N steps (0: only at the end)", 0, 0},
        {"log-every", ARG_INT, &o.log_every,
         "read the loss and gradient norm back from the device every N steps (log.jsonl still has every "
         "step; the same results for any N)",
         0, 0},
        {"stop-at", ARG_INT, &o.stop_at,
         "stop and save after this step, keeping the --steps schedule (0: off)", 0, 0},
        {"threads", ARG_INT, &o.threads, "CPU threads for OpenMP and OpenBLAS (0: all cores)", 0, 0},
        {"quiet", ARG_BOOL, &o.quiet, "no progress lines", 0, 0},
        {"no-plot", ARG_BOOL, &no_plot, "do not draw OUT/loss.png", 0, 0},
        {"device", ARG_STR, &mf.device, ARGS_DEVICE_HELP, 0, 0},
        {"recompute", ARG_BOOL, &o.recompute,
         "recompute activations in the backward: less memory, up to 4/3 the FLOPs, same weights (see above)",
         0, 0},
        {"zero", ARG_INT, &o.zero,
         "under mpirun: 1 shards the AdamW state over the ranks (ZeRO-1), 0 keeps it whole on each", 0, 0},
        {0}};
    int rc = args_parse("train", ABOUT, sp, argc, argv);
    if (rc >= 0) return rc;
    if (args_model_check("train", &mf, &o.model)) return 2;
    if (args_attn_kind("train", attn, &o.model.attn)) return 2;
    if (lssar_len_norm_parse(len_norm, &o.model.len_norm))
        return args_error("train", "--len-norm '%s' is unknown: use train or row", len_norm);
    if (!(o.model.p > 0)) return args_error("train", "--p must be > 0 (the paper uses 15)");
    if (steps < 1) return args_error("train", "--steps must be >= 1");
    if (o.threads < 0) return args_error("train", "--threads must be >= 0");
    if (o.stop_at < 0) return args_error("train", "--stop-at must be >= 0");
    if (o.log_every < 1) return args_error("train", "--log-every must be >= 1 (1: every step)");
    int locked = 0;
    if (o.resume) {
        // lock the run and complete a checkpoint that a kill left half moved, before reading it
        if (train_resume_lock(o.out, o.quiet, &locked)) {
            fprintf(stderr, "lssar train: %s\n", lssar_errmsg());
            return 1;
        }
        rc = check_resume_flags(sp, &o, attn, mf.pos, len_norm);
        if (lssar_dist_agree(rc ? (rc == 2 ? LSSAR_E_ARG : rc) : 0)) {   // every rank stops if one does
            if (!rc) fprintf(stderr, "lssar train: %s\n", lssar_errmsg());
            if (locked) train_dir_unlock(o.out);
            return rc ? rc : 2;
        }
        o.steps = seen(sp, "steps") ? steps : 0;   // 0: keep the stored schedule
    } else {
        if (!o.data)
            return args_error("train", "missing --data TRAIN.bin[,MORE.bin] (see lssar train --help)");
        const gpt_config *mc = &o.model;
        if (mc->layers < 1 || mc->heads < 1 || mc->dim < 1)
            return args_error("train", "--layers, --heads and --dim must be >= 1");
        if (mc->dim % mc->heads)
            return args_error("train", "--heads %d must divide --dim %d", mc->heads, mc->dim);
        if (o.seq < 1 || o.batch < 1 || o.accum < 1)
            return args_error("train", "--seq, --batch and --accum must be >= 1");
        if (mc->vocab < 0 || mc->vocab > 65535)
            return args_error("train", "--vocab must be in 1..65535 (or 0 for the default)");
        if (!(o.lr > 0)) return args_error("train", "--lr must be > 0");
        o.steps = steps;
    }
    // the batches: the shards, with passkey windows mixed in when the run has a passkey share (the
    // source looks at the run's share, so a resumed run mixes as its checkpoint says)
    o.source = passkey_train_source;
    o.source_arg = NULL;
    train_result r;
    rc = train_run(&o, &r);
    if (locked) train_dir_unlock(o.out);
    if (rc) {
        fprintf(stderr, "lssar train: %s\n", lssar_errmsg()[0] ? lssar_errmsg() : lssar_strerror(rc));
        return rc == LSSAR_E_NAN ? 3 : 1;
    }
    if (!o.quiet && !isnan(r.train_loss)) {   // else train said there was nothing to do
        if (isnan(r.val_loss))
            fprintf(stderr, "lssar train: done: step %lld, train loss %.4f, %.1f s\n", (long long)r.step,
                    r.train_loss, r.seconds);
        else
            fprintf(stderr, "lssar train: done: step %lld, train loss %.4f, val loss %.4f, %.1f s\n",
                    (long long)r.step, r.train_loss, r.val_loss, r.seconds);
    }
    // the loss curve: a missing gnuplot or plot error is a note; the run itself succeeded
    if (!no_plot && lssar_dist_rank() == 0 && exp_plot_train_log(o.out) && !o.quiet)
        fprintf(stderr, "lssar train: no loss.png: %s\n", lssar_errmsg());
    return 0;
}
