// cmd_tokenize.c - `lssar tokenize`: text -> token ids (printed, or written as a token shard),
// or ids -> text with --decode.
#include <stdio.h>
#include <string.h>
#include "lssar.h"
#include "args.h"
#include "text/tokenize_run.h"

#define CMD "tokenize"

static const char ABOUT[] =
    "Encode text with the GPT-2 BPE or the byte tokenizer, or decode ids back to text.\n"
    "  lssar tokenize < in.txt                      ids on one line, separated by spaces\n"
    "  lssar tokenize --in in.txt --out in.bin      a 1-channel token shard (llm.c format)\n"
    "  echo 15496 995 | lssar tokenize --decode     text (\"Hello world\")\n"
    "Input is read whole from --in or stdin; any bytes are accepted (invalid UTF-8 too: decoding\n"
    "gives the same bytes back). Empty input prints an empty line (exit 0); --out refuses it.\n"
    "\"<|endoftext|>\" in the text is ordinary text unless --allow-special makes it the EOT id\n"
    "(50256 for gpt2, 256 for byte). --decode reads ids separated by spaces, newlines or commas\n"
    "(or a token shard given with --in FILE.bin) and writes the bytes. --jsonl encodes many\n"
    "documents: each input line is a JSON string or an object with a \"text\" string, each output\n"
    "line that document's ids.\n"
    "GPT-2 needs its files:\n"
    "scripts/fetch-gpt2.sh puts them in $LSSAR_DATA/gpt2 (default ./data/gpt2).";

int cmd_tokenize(int argc, char **argv) {
    const char *name = "gpt2", *in = NULL, *out = NULL;
    int ids_flag = 0, decode = 0, allow_special = 0, jsonl = 0;
    arg_spec specs[] = {
        {"tokenizer", ARG_STR, &name, "gpt2 or byte", 0, 0},
        {"in", ARG_STR, &in, "input file (text; ids or a .bin shard with --decode) [default stdin]", 0, 0},
        {"ids", ARG_BOOL, &ids_flag, "print the ids on one line, separated by spaces (the default)", 0, 0},
        {"out", ARG_STR, &out, "write a 1-channel token shard here instead (with --decode: the text)", 0, 0},
        {"decode", ARG_BOOL, &decode, "ids -> text", 0, 0},
        {"allow-special", ARG_BOOL, &allow_special, "encode \"<|endoftext|>\" as the EOT id", 0, 0},
        {"jsonl", ARG_BOOL, &jsonl,
         "input lines are JSON strings or {\"text\": ...} objects, each encoded alone; one line of ids each",
         0, 0},
        {0}};
    int rc = args_parse(CMD, ABOUT, specs, argc, argv);
    if (rc >= 0) return rc;
    if (strcmp(name, "gpt2") && strcmp(name, "byte"))
        return args_error(CMD, "--tokenizer must be gpt2 or byte, got '%s'", name);
    if (ids_flag && out)
        return args_error(CMD, "--ids prints ids and --out writes a shard: give one of them");
    if (ids_flag && decode) return args_error(CMD, "--ids is for encoding; --decode prints text");
    if (jsonl && (decode || out))
        return args_error(CMD, "--jsonl prints ids; it cannot be combined with --decode or --out");
    if (decode && allow_special)
        return args_error(CMD, "--allow-special is for encoding (decoding always turns the EOT id into "
                               "\"<|endoftext|>\")");

    tokenize_opts o = {.tokenizer = name, .in = in, .out = out, .decode = decode,
                       .allow_special = allow_special, .jsonl = jsonl};
    if (tokenize_run(&o)) {
        fprintf(stderr, "lssar tokenize: %s\n", lssar_errmsg());
        return 1;
    }
    return 0;
}
