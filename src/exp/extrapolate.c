// extrapolate.c - length extrapolation's stages in order, its data, and its runs over the MPI
// ranks; see extrapolate.h (the stages' files: extrap_run.h).
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include "core/dist.h"
#include "exp/common.h"
#include "exp/extrap_run.h"
#include "exp/passkey.h"

void extrap_opts_default(extrap_opts *o) {
    memset(o, 0, sizeof *o);
    train_opts_default(&o->train);
    o->train.source = passkey_train_source;   // --passkey-mix mixes passkey windows into the batches
    o->train.steps = 200;
    o->train.quiet = 0;
    o->attn = "softmax,ssmax,lssa,lssar";
    o->seeds = 1;
    o->max_windows = 64;
    o->eval_batch = 4;
    o->mqar_task = (mqar_params){.keys = 64, .values = 64, .pairs = 8};
    o->mqar_eval = 64;
}

static int file_exists(const char *p) { struct stat st; return stat(p, &st) == 0; }

// mqar: the training shard, written by rank 0 alone (the ranks share --out) while the others wait.
static int setup_mqar(extrap *x) {
    const extrap_opts *o = x->o;
    const mqar_params *mp = &o->mqar_task;
    train_opts *b = &x->base;
    if (b->model.vocab == 0) b->model.vocab = mqar_vocab(mp);
    if (b->model.vocab < mqar_vocab(mp))
        return lssar_fail(LSSAR_E_ARG, "--vocab %d is smaller than the mqar vocabulary %d", b->model.vocab,
                          mqar_vocab(mp));
    char tp[4200];
    int ns = o->mqar_train_seqs > 0 ? o->mqar_train_seqs : 2 * b->steps * b->batch * b->accum;
    // the name holds everything the shard depends on, so a call with other settings never
    // trains on sequences of another length
    snprintf(tp, sizeof tp, "%s/mqar_train_T%d_k%d_v%d_p%d_n%d_s%llu.bin", o->out, b->seq, mp->keys,
             mp->values, mp->pairs, ns, (unsigned long long)b->seed);
    // Each sequence is T + 1 tokens, exactly one training window: aligning window starts to
    // T + 1 makes every window one whole sequence (EOT, all pairs, all queries). Unaligned
    // windows cut sequences and hide the pairs most queries refer to.
    b->align = b->seq + 1;
    int rc = 0;
    if (lssar_dist_rank() == 0 && !file_exists(tp)) rc = mqar_write_shard(tp, mp, b->seq, ns, b->seed + 1000);
    if ((rc = lssar_dist_agree(rc))) return rc;
    x->train_list = strdup(tp);
    b->val = NULL;
    return 0;
}

// text: the training shards, val.bin and its document index, the manifest's hash and vocabulary.
static int setup_text(extrap *x) {
    const extrap_opts *o = x->o;
    train_opts *b = &x->base;
    char idxp[4096];
    snprintf(x->val_path, sizeof x->val_path, "%s/val.bin", o->data);
    snprintf(idxp, sizeof idxp, "%s/val_index.json", o->data);
    int rc = exp_train_shards(o->data, &x->train_list);
    if (!rc) rc = shard_open(&x->val, x->val_path);
    if (!rc && file_exists(idxp)) x->have_docs = !(rc = exp_docs_load(idxp, &x->docs));
    // a file one rank cannot read stops every rank here, with that rank's error
    if ((rc = lssar_dist_agree(rc))) return rc;
    if (!x->have_docs)
        fprintf(stderr, "extrapolate: note: %s is missing; windows are consecutive ones of val.bin and may "
                        "cross documents\n", idxp);
    b->val = x->val_path;
    exp_manifest_hash(o->data, x->hash);
    if (b->model.vocab == 0) {
        b->model.vocab = exp_manifest_vocab(o->data);   // 257 for byte data, 50257 for GPT-2
        if (b->model.vocab < 0 || b->model.vocab > 65535)
            return lssar_fail(LSSAR_E_ARG, "%s/manifest.json: tokenizer vocab_size %d is outside 1..65535 "
                                           "(damaged): rebuild the folder with `lssar data build`, or give "
                                           "--vocab", o->data, b->model.vocab);
    }
    if (o->ntasks && b->model.vocab && (b->model.vocab < 50257 || b->model.vocab > 50304))
        return lssar_fail(LSSAR_E_ARG, "--downstream needs models with the GPT-2 tokenizer (vocabulary "
                                       "50257..50304), %s has vocabulary %d (byte-level data?)",
                          o->data, b->model.vocab);
    return 0;
}

// The run list, --out and the data; rank 0 says which rank runs what.
static int stage_setup(extrap *x) {
    const extrap_opts *o = x->o;
    x->base = o->train;
    snprintf(x->hash, sizeof x->hash, "none");
    x->nf = o->nfactors;
    for (int f = 0; f < x->nf; f++) x->seqs[f] = o->train.seq * o->factors[f];
    int rc = extrap_plan(x);
    if (!rc) rc = lssar_mkdirs(o->out);
    if (!rc) rc = o->mqar ? setup_mqar(x) : setup_text(x);
    if (rc) return rc;
    x->base.data = x->train_list;
    x->base.eval_every = 0;
    const int ranks = lssar_dist_size();
    if (ranks > 1 && !o->train.quiet) {
        fprintf(stderr, "extrapolate: %d runs over %d ranks:", x->nr, ranks);
        for (int q = 0; q < ranks && q < x->nr; q++) {
            fprintf(stderr, "%s rank %d:", q ? ";" : "", q);
            for (int i = q; i < x->nr; i += ranks) fprintf(stderr, " %s", x->runs[i].name);
        }
        fprintf(stderr, " (the other ranks' progress is not shown)\n");
    }
    x->t_all = lssar_now();
    return 0;
}

// The runs are spread over the ranks: run i on rank i mod N. Each rank does its own in solo mode
// (src/core/dist.h), as one process, so that train_run does not take part in data parallelism
// over the other ranks; the stage ends at lssar_dist_agree, where a failure of one rank becomes
// every rank's.
static int on_my_runs(extrap *x, int (*job)(extrap *, extrap_run *)) {
    const int rank = lssar_dist_rank(), ranks = lssar_dist_size();
    int rc = 0;
    lssar_dist_solo(1);
    for (int i = rank; i < x->nr && !rc; i += ranks) rc = job(x, &x->runs[i]);
    lssar_dist_solo(0);
    return lssar_dist_agree(rc);
}

// Training comes first for every run, since the lssa->lssar run evaluates the lssa model, which
// another rank may train.
static int stage_train(extrap *x) { return on_my_runs(x, extrap_train_run); }
static int stage_eval(extrap *x) { return on_my_runs(x, extrap_eval_run); }
static int stage_downstream(extrap *x) { return on_my_runs(x, extrap_downstream_run); }

static int stage_tokenizer(extrap *x) {
    return lssar_dist_agree(x->o->ntasks ? lssar_tokenizer_open("gpt2", &x->tok) : 0);
}

// Every rank's runs to every rank: run i, filled in by rank i mod N, arrives whole (plain numbers
// and strings: the ranks run the same build), so rank 0 writes from the bits one process would.
static int stage_gather(extrap *x) {
    const int rank = lssar_dist_rank(), ranks = lssar_dist_size(), nr = x->nr;
    if (ranks == 1) return 0;
    int mine = 0;
    for (int i = rank; i < nr; i += ranks) mine++;
    extrap_run *buf = malloc((mine ? mine : 1) * sizeof *buf);
    char *all = NULL;
    size_t total = 0;
    int rc = lssar_dist_agree(buf ? 0 : lssar_fail(LSSAR_E_NOMEM, "out of memory"));
    if (rc) goto done;
    for (int i = rank, k = 0; i < nr; i += ranks) buf[k++] = x->runs[i];
    rc = lssar_dist_allgather_bytes(buf, mine * sizeof *buf, &all, &total, NULL);
    if (!rc && total != (size_t)nr * sizeof *buf)
        rc = lssar_fail(LSSAR_E_SIZE, "extrapolate: the ranks returned %zu bytes of results, %zu expected",
                        total, (size_t)nr * sizeof *buf);
    for (int q = 0, at = 0; !rc && q < ranks; q++) {   // rank q's runs q, q + N, ... in that order
        const extrap_run *from = (const extrap_run *)(all + (size_t)at * sizeof *buf);
        int k = 0;
        for (int i = q; i < nr; i += ranks) x->runs[i] = from[k++];
        at += k;
    }
done:
    free(all);
    free(buf);
    return rc;
}

// Rank 0 alone writes the results; the others wait for it here.
static int stage_report(extrap *x) {
    for (int i = 0; i < x->nr; i++)
        if (!x->runs[i].eval_only) x->runs[i].train_s = extrap_train_seconds(x->o->out, x->runs[i].name);
    return lssar_dist_agree(lssar_dist_rank() == 0 ? extrap_report(x) : 0);
}

int extrapolate(const extrap_opts *o, extrap_stage *at) {
    // in the order of extrap_stage
    static int (*const stages[])(extrap *) = {stage_setup, stage_train, stage_eval, stage_tokenizer,
                                              stage_downstream, stage_gather, stage_report};
    extrap x = {.o = o};
    int rc = 0;
    for (int s = 0; s < (int)(sizeof stages / sizeof *stages) && !rc; s++) {
        *at = (extrap_stage)s;
        rc = stages[s](&x);
    }
    free(x.runs);
    free(x.train_list);
    shard_close(&x.val);
    exp_docs_free(&x.docs);
    lssar_tokenizer_free(x.tok);
    return rc;
}
