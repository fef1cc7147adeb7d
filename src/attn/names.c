// names.c - the attention kinds: their stages, their names for the CLI, checkpoints and reports,
// and the length-normalisation names. The one table of kinds: adding a kind is adding a row.
#include <string.h>
#include "lssar.h"
#include "core/util.h"
#include "attn/attn.h"

// Indexed by lssar_attn_kind (the values are the public enum: append only). A name is the nearest
// preset and the stages that differ from it, so that lssar_attn_parse reads it back.
static const struct { const char *name; lssar_attn_stages st; } KINDS[LSSAR_ATTN_NKINDS] = {
    {"softmax", {LSSAR_SCORE_DOT, LSSAR_PHI_EXP, LSSAR_NORM_L1, 0}},
    {"ssmax", {LSSAR_SCORE_SSMAX, LSSAR_PHI_EXP, LSSAR_NORM_L1, 0}},
    {"lssa", {LSSAR_SCORE_COS, LSSAR_PHI_SOFTPLUS, LSSAR_NORM_L1, 0}},
    {"lssar", {LSSAR_SCORE_COS, LSSAR_PHI_SOFTPLUS, LSSAR_NORM_L1, 1}},
    {"sigmoid", {LSSAR_SCORE_DOT, LSSAR_PHI_SIGMOID, LSSAR_NORM_LEN, 0}},
    {"relu", {LSSAR_SCORE_DOT, LSSAR_PHI_RELU, LSSAR_NORM_LEN, 0}},
    {"softmax+rw", {LSSAR_SCORE_DOT, LSSAR_PHI_EXP, LSSAR_NORM_L1, 1}},
    {"ssmax+rw", {LSSAR_SCORE_SSMAX, LSSAR_PHI_EXP, LSSAR_NORM_L1, 1}},
    {"softmax+cos", {LSSAR_SCORE_COS, LSSAR_PHI_EXP, LSSAR_NORM_L1, 0}},
    {"softmax+cos+rw", {LSSAR_SCORE_COS, LSSAR_PHI_EXP, LSSAR_NORM_L1, 1}},
    {"lssa+dot", {LSSAR_SCORE_DOT, LSSAR_PHI_SOFTPLUS, LSSAR_NORM_L1, 0}},
    {"lssar+dot", {LSSAR_SCORE_DOT, LSSAR_PHI_SOFTPLUS, LSSAR_NORM_L1, 1}},
    {"lssa+ssmax", {LSSAR_SCORE_SSMAX, LSSAR_PHI_SOFTPLUS, LSSAR_NORM_L1, 0}},
    {"lssar+ssmax", {LSSAR_SCORE_SSMAX, LSSAR_PHI_SOFTPLUS, LSSAR_NORM_L1, 1}},
};
#define N_PRESETS 6  // the named kinds, the only bases a spelling may start from

static const char VALID[] =
    "score dot, ssmax or cos with phi exp or softplus, l1 normalisation and re-weighting on or off; or "
    "sigmoid or relu (score dot, length normalisation, no re-weighting)";
static const char SPELLING[] =
    "use softmax, ssmax, lssa, lssar, sigmoid or relu, followed by any of +dot, +ssmax, +cos, +exp, "
    "+softplus, +rw, +norw (e.g. softmax+cos+rw)";

int attn_kind_check(lssar_attn_kind k, const char *what) {
    if (attn_kind_ok(k)) return LSSAR_OK;
    return lssar_fail(LSSAR_E_KIND, "%s = %d is not an lssar_attn_kind (0..%d)", what, (int)k,
                      LSSAR_ATTN_NKINDS - 1);
}

const char *lssar_attn_name(lssar_attn_kind kind) {
    return attn_kind_ok(kind) ? KINDS[kind].name : "unknown";
}

int lssar_attn_stages_of(lssar_attn_kind kind, lssar_attn_stages *out) {
    if (!out) return lssar_fail(LSSAR_E_NULL, "lssar_attn_stages_of: NULL argument");
    int rc = attn_kind_check(kind, "attention kind");
    if (!rc) *out = KINDS[kind].st;
    return rc;
}

static const char *const SCORE[] = {"dot", "ssmax", "cos"};
static const char *const PHI[] = {"exp", "softplus", "sigmoid", "relu"};
static const char *const NORM[] = {"l1", "len"};
#define NAMES(a) (sizeof a / sizeof a[0])

// The kind of these stages, or -1.
static int find_kind(const lssar_attn_stages *st) {
    for (int k = 0; k < LSSAR_ATTN_NKINDS; k++) {
        const lssar_attn_stages *t = &KINDS[k].st;
        if (t->score == st->score && t->phi == st->phi && t->norm == st->norm &&
            t->reweight == !!st->reweight)
            return k;
    }
    return -1;
}

int lssar_attn_from_stages(const lssar_attn_stages *st, lssar_attn_kind *out) {
    if (!st || !out) return lssar_fail(LSSAR_E_NULL, "lssar_attn_from_stages: NULL argument");
    int k = find_kind(st);
    if (k >= 0) { *out = (lssar_attn_kind)k; return LSSAR_OK; }
    int ok = (unsigned)st->score < NAMES(SCORE) && (unsigned)st->phi < NAMES(PHI) &&
             (unsigned)st->norm < NAMES(NORM);
    return lssar_fail(LSSAR_E_KIND, "attention stages score %s, phi %s, norm %s, re-weighting %s are not "
                      "a valid combination; valid: %s", ok ? SCORE[st->score] : "?", ok ? PHI[st->phi] : "?",
                      ok ? NORM[st->norm] : "?", st->reweight ? "on" : "off", VALID);
}

int lssar_attn_parse(const char *name, lssar_attn_kind *out) {
    if (!name || !out) return lssar_fail(LSSAR_E_NULL, "lssar_attn_parse: NULL argument");
    size_t n = strcspn(name, "+");
    int base = -1;
    for (int i = 0; i < N_PRESETS && base < 0; i++)
        if (strlen(KINDS[i].name) == n && !strncmp(name, KINDS[i].name, n)) base = i;
    if (base < 0) return lssar_fail(LSSAR_E_KIND, "attention kind '%s' is unknown: %s", name, SPELLING);
    lssar_attn_stages st = KINDS[base].st;
    for (const char *m = name + n; *m == '+';) {
        m++;
        size_t len = strcspn(m, "+");
#define IS(s) (len == strlen(s) && !strncmp(m, s, len))
        if (IS("dot")) st.score = LSSAR_SCORE_DOT;
        else if (IS("ssmax")) st.score = LSSAR_SCORE_SSMAX;
        else if (IS("cos")) st.score = LSSAR_SCORE_COS;
        else if (IS("exp")) st.phi = LSSAR_PHI_EXP;
        else if (IS("softplus")) st.phi = LSSAR_PHI_SOFTPLUS;
        else if (IS("rw")) st.reweight = 1;
        else if (IS("norw")) st.reweight = 0;
        else return lssar_fail(LSSAR_E_KIND, "attention kind '%s': unknown stage '+%.*s'; %s", name,
                               (int)len, m, SPELLING);
#undef IS
        m += len;
    }
    int k = find_kind(&st);
    if (k < 0)
        return lssar_fail(LSSAR_E_KIND, "attention kind '%s' combines stages that do not go together; "
                          "valid: %s", name, VALID);
    *out = (lssar_attn_kind)k;
    return LSSAR_OK;
}

static const char *const len_norm_names[] = {"train", "row"};   // indexed by lssar_len_norm

int attn_len_norm_check(lssar_len_norm ln, const char *what) {
    if (attn_len_norm_ok(ln)) return LSSAR_OK;
    return lssar_fail(LSSAR_E_ARG, "%s = %d is not an lssar_len_norm (train or row)", what, (int)ln);
}

const char *lssar_len_norm_name(lssar_len_norm ln) {
    return attn_len_norm_ok(ln) ? len_norm_names[ln] : "unknown";
}

int lssar_len_norm_parse(const char *name, lssar_len_norm *out) {
    if (!name || !out) return lssar_fail(LSSAR_E_NULL, "lssar_len_norm_parse: NULL argument");
    for (int i = 0; i <= LSSAR_LEN_NORM_ROW; i++)
        if (!strcmp(name, len_norm_names[i])) { *out = (lssar_len_norm)i; return 0; }
    return lssar_fail(LSSAR_E_ARG, "length normalisation '%s': use train or row", name);
}
