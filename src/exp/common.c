// common.c - shared helpers of the experiment commands; see common.h.
#include <glob.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include "core/sha256.h"
#include "core/util.h"
#include "exp/common.h"
#include "exp/plot.h"
#include "model/checkpoint.h"
#include "model/safetensors.h"

int exp_write_text(const char *path, const char *text) {
    lssar_afile a;
    int rc = lssar_afile_open(&a, path);
    if (rc) return rc;
    fputs(text, a.f);
    return lssar_afile_commit(&a);
}

int exp_train_shards(const char *dir, char **list) {
    char pat[4096];
    snprintf(pat, sizeof pat, "%s/train_*.bin", dir);
    glob_t g;
    *list = NULL;
    if (glob(pat, 0, NULL, &g) != 0 || g.gl_pathc == 0) {
        globfree(&g);
        return lssar_fail(LSSAR_E_IO, "no training shards %s: build them with `lssar data build --out %s`",
                          pat, dir);
    }
    size_t len = 1;
    for (size_t i = 0; i < g.gl_pathc; i++) len += strlen(g.gl_pathv[i]) + 1;
    char *s = calloc(len, 1);
    if (!s) { globfree(&g); return lssar_fail(LSSAR_E_NOMEM, "out of memory"); }
    for (size_t i = 0; i < g.gl_pathc; i++) {
        if (i) strcat(s, ",");
        strcat(s, g.gl_pathv[i]);
    }
    globfree(&g);
    *list = s;
    return 0;
}

void exp_manifest_hash(const char *dir, char hex[65]) {
    char p[4096];
    snprintf(p, sizeof p, "%s/manifest.json", dir);
    if (sha256_file_hex(p, hex)) snprintf(hex, 65, "none");
}

int exp_parse_doubles(const char *s, double *out, int max) {
    int n = 0;
    const char *p = s;
    while (p && *p) {
        char *end;
        double v = strtod(p, &end);
        if (end == p || n >= max) return -1;
        out[n++] = v;
        p = end;
        if (*p == ',') p++;
        else if (*p) return -1;
    }
    return n;
}

int exp_manifest_vocab(const char *dir) {
    char p[4096];
    snprintf(p, sizeof p, "%s/manifest.json", dir);
    char *s = NULL;
    size_t n;
    if (lssar_read_file(p, &s, &n)) return 0;
    cJSON *j = cJSON_Parse(s);
    free(s);
    int v = 0;
    cJSON *t = j ? cJSON_GetObjectItem(j, "tokenizer") : NULL;
    cJSON *vs = t ? cJSON_GetObjectItem(t, "vocab_size") : NULL;
    if (cJSON_IsNumber(vs)) v = vs->valueint;
    cJSON_Delete(j);
    return v;
}

double exp_trainer_meta(const char *model, const char *key, double dflt) {
    char p[4200];
    struct stat st;
    if (stat(model, &st) != 0 || !S_ISDIR(st.st_mode)) return dflt;
    snprintf(p, sizeof p, "%s/%s", model, CKPT_TRAINER_FILE);
    st_file f;
    if (st_open(&f, p)) return dflt;
    const char *v = st_meta(&f, key);
    double x = v ? atof(v) : dflt;
    st_close(&f);
    return x;
}

double exp_passkey_mix(const char *model) { return exp_trainer_meta(model, "passkey_mix", 0); }
int exp_passkey_prompt(const char *model) { return (int)exp_trainer_meta(model, "passkey_prompt", 0); }

int exp_plot_train_log(const char *dir) {
    char p[4200];
    snprintf(p, sizeof p, "%s/log.jsonl", dir);
    char *text = NULL;
    size_t len = 0;
    int rc = lssar_read_file(p, &text, &len);
    if (rc) return rc;
    size_t lines = 1;
    for (size_t i = 0; i < len; i++) lines += text[i] == '\n';
    // (step, loss) and (step, val_loss), in the order the run logged them: at most one per line
    double *ts = malloc(lines * sizeof(double)), *tl = malloc(lines * sizeof(double));
    double *vs = malloc(lines * sizeof(double)), *vl = malloc(lines * sizeof(double));
    int nt = 0, nv = 0;
    for (char *line = text; ts && tl && vs && vl && line && *line;) {
        char *nl = strchr(line, '\n');
        if (nl) *nl = 0;
        cJSON *j = cJSON_Parse(line);
        const cJSON *st = cJSON_GetObjectItemCaseSensitive(j, "step"),
                    *l = cJSON_GetObjectItemCaseSensitive(j, "loss"),
                    *v = cJSON_GetObjectItemCaseSensitive(j, "val_loss");
        if (cJSON_IsNumber(st) && cJSON_IsNumber(l)) { ts[nt] = st->valuedouble; tl[nt++] = l->valuedouble; }
        if (cJSON_IsNumber(st) && cJSON_IsNumber(v)) { vs[nv] = st->valuedouble; vl[nv++] = v->valuedouble; }
        cJSON_Delete(j);
        line = nl ? nl + 1 : NULL;
    }
    free(text);
    if (!ts || !tl || !vs || !vl) rc = lssar_fail(LSSAR_E_NOMEM, "out of memory reading %s", p);
    else if (!nt) rc = lssar_fail(LSSAR_E_FORMAT, "%s holds no training loss to plot", p);
    else {
        plot_series s[2] = {{"train", nt, ts, tl, NULL}, {"validation", nv, vs, vl, NULL}};
        snprintf(p, sizeof p, "%s/loss.png", dir);
        rc = plot_lines(p, dir, "step", "loss (nats/token)", 0, s, nv ? 2 : 1);
    }
    free(ts); free(tl); free(vs); free(vl);
    return rc;
}
