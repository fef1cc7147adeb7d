// cmd_data.c - `lssar data build`: token shards from the packaged corpora or the user's files.
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "args.h"
#include "cli/commands.h"
#include "lssar.h"
#include "../text/corpus.h"


static int data_usage(FILE *f) {
    fprintf(f, "usage: lssar data build --corpus LIST --tokenizer gpt2|byte --out DIR [--text PATH] "
               "[flags]\n\n"
               "Build token shards (train_000.bin ..., val.bin, val_index.json, manifest.json) from the\n"
               "corpora fetched by scripts/fetch-corpora.sh: sotu, kjv, web, austen, mobydick (or all), "
               "and/or\n"
               "your own files with --text. See docs/DATA.md. `lssar data build --help` lists every flag.\n");
    fprintf(f, "\n       lssar data synth --out FILE [flags]   a synthetic-task shard (lssar data synth "
               "--help)\n");
    return f == stderr ? 2 : 0;
}

static int cmd_data_build(int argc, char **argv) {
    corpus_build_opts o;
    corpus_build_defaults(&o);
    const char *corpora = NULL;
    float val_frac = (float)o.val_frac, val_max_frac = (float)o.val_max_frac;
    int shard_mtok = (int)(o.shard_tokens / 1000000);
    int shard_tokens = 0, quiet = 0;
    arg_spec specs[] = {
        {"corpus", ARG_STR, &corpora,
         "comma-separated corpora: sotu, kjv, web, austen, mobydick, all, text [default all, or text alone "
         "with --text]",
         0, 0},
        {"tokenizer", ARG_STR, &o.tokenizer, "gpt2 or byte", 0, 0},
        {"out", ARG_STR, &o.out_dir, "output folder", 1, 0},
        {"text", ARG_STR, &o.text_path,
         "your own text: a file or a folder (recursive), one document per file", 0, 0},
        {"raw", ARG_STR, &o.raw_dir, "folder of the fetched corpora [default $LSSAR_DATA/raw or ./data/raw]",
         0, 0},
        {"val-frac", ARG_FLOAT, &val_frac, "share of each corpus's tokens held out for val (whole documents)",
         0, 0},
        {"val-max-frac", ARG_FLOAT, &val_max_frac,
         "extra long documents for val never raise a corpus's held-out share above this", 0, 0},
        {"long-tokens", ARG_INT, &o.long_tokens, "tokens that make a document long (16x T = 1024)", 0, 0},
        {"min-long-val", ARG_INT, &o.min_long_val, "long documents wanted in val (a warning if fewer exist)",
         0, 0},
        {"shard-mtokens", ARG_INT, &shard_mtok, "millions of tokens per train shard at most", 0, 0},
        {"shard-tokens", ARG_INT, &shard_tokens,
         "tokens per train shard at most (overrides --shard-mtokens; for tests)", 0, 0},
        {"seed", ARG_U64, &o.seed, "seed of the training-document order", 0, 0},
        {"quiet", ARG_BOOL, &quiet, "no progress lines", 0, 0},
        {0}};
    int rc = args_parse("data build", "Build token shards from text corpora (see docs/DATA.md).", specs, argc,
                        argv);
    if (rc >= 0) return rc;
    if (corpora) o.corpora = corpora;
    else if (o.text_path) o.corpora = "text";
    if (strcmp(o.tokenizer, "gpt2") && strcmp(o.tokenizer, "byte"))
        return args_error("data build", "--tokenizer must be gpt2 or byte, got '%s'", o.tokenizer);
    if (val_frac < 0 || val_frac >= 1)
        return args_error("data build", "--val-frac must be in [0, 1), got %g", val_frac);
    if (shard_mtok < 1 && !shard_tokens)
        return args_error("data build", "--shard-mtokens must be >= 1, got %d", shard_mtok);
    if (val_max_frac < 0 || val_max_frac > 1)
        return args_error("data build", "--val-max-frac must be in [0, 1], got %g", val_max_frac);
    o.val_frac = round(val_frac * 1e6) / 1e6;   // 0.1, not 0.100000001 (float) in manifest.json
    o.val_max_frac = round(val_max_frac * 1e6) / 1e6;
    o.shard_tokens = shard_tokens ? shard_tokens : (long)shard_mtok * 1000000L;
    o.quiet = quiet;
    if (o.min_long_val < 0)
        return args_error("data build", "--min-long-val must be >= 0, got %d", o.min_long_val);
    rc = corpus_build(&o);
    if (rc) {
        fprintf(stderr, "lssar data build: %s\n", lssar_errmsg()[0] ? lssar_errmsg() : lssar_strerror(rc));
        return 1;
    }
    return 0;
}

int cmd_data(int argc, char **argv) {
    if (argc < 2) return data_usage(stderr);
    if (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h") || !strcmp(argv[1], "help"))
        return data_usage(stdout);
    if (!strcmp(argv[1], "build")) return cmd_data_build(argc - 1, argv + 1);
    if (!strcmp(argv[1], "synth")) return cmd_data_synth(argc - 1, argv + 1);
    fprintf(stderr, "lssar data: unknown subcommand '%s' (subcommands: build, synth)\n", argv[1]);
    return 2;
}
