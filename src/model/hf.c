// hf.c - transformers' GPT-2 folder (config.json + model.safetensors); see hf.h.
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cJSON.h>
#include "core/json.h"
#include "core/util.h"
#include "model/checkpoint.h"
#include "model/hf.h"
#include "model/safetensors.h"

// How a tensor is laid out in the transformers file: as lssar's, transposed (GPT-2's Conv1D:
// (in, out)), or with the fused q, k, v rows grouped per head (GPT-NeoX: qkv_rows).
enum { AS_IS = 0, TRANSPOSED = 1, QKV_BY_HEAD = 2 };
typedef struct { const char *hf, *ours; int per_layer, layout; } hf_tensor;

// transformers' name (after "transformer.", %d: the layer), lssar's, one per layer, the layout.
static const hf_tensor MAP[] = {
    {"wte.weight", "wte.0", 0, 0}, {"wpe.weight", "wpe", 0, 0},
    {"h.%d.ln_1.weight", "h.%d.ln_1.weight", 1, 0}, {"h.%d.ln_1.bias", "h.%d.ln_1.bias", 1, 0},
    {"h.%d.attn.c_attn.weight", "h.%d.attn.c_attn.weight", 1, TRANSPOSED},
    {"h.%d.attn.c_attn.bias", "h.%d.attn.c_attn.bias", 1, 0},
    {"h.%d.attn.c_proj.weight", "h.%d.attn.c_proj.weight", 1, TRANSPOSED},
    {"h.%d.attn.c_proj.bias", "h.%d.attn.c_proj.bias", 1, 0},
    {"h.%d.ln_2.weight", "h.%d.ln_2.weight", 1, 0}, {"h.%d.ln_2.bias", "h.%d.ln_2.bias", 1, 0},
    {"h.%d.mlp.c_fc.weight", "h.%d.mlp.c_fc.weight", 1, TRANSPOSED},
    {"h.%d.mlp.c_fc.bias", "h.%d.mlp.c_fc.bias", 1, 0},
    {"h.%d.mlp.c_proj.weight", "h.%d.mlp.c_proj.weight", 1, TRANSPOSED},
    {"h.%d.mlp.c_proj.bias", "h.%d.mlp.c_proj.bias", 1, 0},
    {"ln_f.weight", "ln_f.weight", 0, 0}, {"ln_f.bias", "ln_f.bias", 0, 0}};
enum { NMAP = sizeof MAP / sizeof MAP[0] };

// GPT-NeoX (RoPE models): nn.Linear weights, (out, in) as lssar's; the fused q, k, v rows are
// grouped per head (head h: its q, k, v rows), reordered on the way (qkv_rows). embed_out is
// written as a copy of the embedding (lssar's head is tied).
static const hf_tensor NEOX[] = {
    {"gpt_neox.embed_in.weight", "wte.0", 0, 0},
    {"gpt_neox.layers.%d.input_layernorm.weight", "h.%d.ln_1.weight", 1, 0},
    {"gpt_neox.layers.%d.input_layernorm.bias", "h.%d.ln_1.bias", 1, 0},
    {"gpt_neox.layers.%d.attention.query_key_value.weight", "h.%d.attn.c_attn.weight", 1, QKV_BY_HEAD},
    {"gpt_neox.layers.%d.attention.query_key_value.bias", "h.%d.attn.c_attn.bias", 1, QKV_BY_HEAD},
    {"gpt_neox.layers.%d.attention.dense.weight", "h.%d.attn.c_proj.weight", 1, 0},
    {"gpt_neox.layers.%d.attention.dense.bias", "h.%d.attn.c_proj.bias", 1, 0},
    {"gpt_neox.layers.%d.post_attention_layernorm.weight", "h.%d.ln_2.weight", 1, 0},
    {"gpt_neox.layers.%d.post_attention_layernorm.bias", "h.%d.ln_2.bias", 1, 0},
    {"gpt_neox.layers.%d.mlp.dense_h_to_4h.weight", "h.%d.mlp.c_fc.weight", 1, 0},
    {"gpt_neox.layers.%d.mlp.dense_h_to_4h.bias", "h.%d.mlp.c_fc.bias", 1, 0},
    {"gpt_neox.layers.%d.mlp.dense_4h_to_h.weight", "h.%d.mlp.c_proj.weight", 1, 0},
    {"gpt_neox.layers.%d.mlp.dense_4h_to_h.bias", "h.%d.mlp.c_proj.bias", 1, 0},
    {"gpt_neox.final_layer_norm.weight", "ln_f.weight", 0, 0},
    {"gpt_neox.final_layer_norm.bias", "ln_f.bias", 0, 0},
    {"embed_out.weight", "wte.0", 0, 0}};
enum { NNEOX = sizeof NEOX / sizeof NEOX[0] };

// Rows of lssar's fused q, k, v (part p of 3, head h of H, dim d of D: row p C + h D + d) into
// NeoX's order (row h 3D + p D + d), each row `cols` floats (1 for the bias); back with to_ours.
static void qkv_rows(const float *src, float *dst, int H, int D, size_t cols, int to_ours) {
    int C = H * D;
    for (int p = 0; p < 3; p++)
        for (int h = 0; h < H; h++)
            for (int d = 0; d < D; d++) {
                size_t ours = (size_t)p * C + (size_t)h * D + d, neox = (size_t)h * 3 * D + (size_t)p * D + d;
                memcpy(dst + (to_ours ? ours : neox) * cols, src + (to_ours ? neox : ours) * cols,
                       cols * sizeof(float));
            }
}

// (r, c) row-major -> (c, r)
static void transpose(const float *src, float *dst, int r, int c) {
    for (int i = 0; i < r; i++)
        for (int j = 0; j < c; j++) dst[(size_t)j * r + i] = src[(size_t)i * c + j];
}

static size_t max_numel(const gpt *m) {
    size_t mx = 0;
    for (int i = 0; i < gpt_num_tensors(m); i++) if (gpt_tensor_numel(m, i) > mx) mx = gpt_tensor_numel(m, i);
    return mx;
}

// config.json's keys after the model type and the vocabulary, for a GPT-NeoX (RoPE) folder.
static void config_neox(const gpt_config *c, cJSON *j) {
    cJSON_AddNumberToObject(j, "hidden_size", c->dim);
    cJSON_AddNumberToObject(j, "num_hidden_layers", c->layers);
    cJSON_AddNumberToObject(j, "num_attention_heads", c->heads);
    cJSON_AddNumberToObject(j, "intermediate_size", 4 * c->dim);
    cJSON_AddStringToObject(j, "hidden_act", "gelu_new");
    cJSON_AddNumberToObject(j, "rotary_pct", 1.0);
    cJSON_AddNumberToObject(j, "rotary_emb_base", c->rope_base);
    cJSON_AddNumberToObject(j, "max_position_embeddings", c->max_seq);   // RoPE: the training length
    cJSON_AddNumberToObject(j, "layer_norm_eps", 1e-5);
    cJSON_AddBoolToObject(j, "use_parallel_residual", 0);   // lssar's blocks are sequential, as GPT-2's
    cJSON_AddBoolToObject(j, "attention_bias", 1);
    cJSON_AddBoolToObject(j, "tie_word_embeddings", 0);    // embed_out is written as the embedding's copy
    cJSON_AddNumberToObject(j, "attention_dropout", 0);
    cJSON_AddNumberToObject(j, "hidden_dropout", 0);
}

// The same for a GPT-2 (learned positions) folder.
static void config_gpt2(const gpt_config *c, cJSON *j) {
    cJSON_AddNumberToObject(j, "n_positions", c->max_seq);
    cJSON_AddNumberToObject(j, "n_ctx", c->max_seq);
    cJSON_AddNumberToObject(j, "n_embd", c->dim);
    cJSON_AddNumberToObject(j, "n_layer", c->layers);
    cJSON_AddNumberToObject(j, "n_head", c->heads);
    cJSON_AddStringToObject(j, "activation_function", "gelu_new");   // GELU, tanh approximation
    cJSON_AddNumberToObject(j, "layer_norm_epsilon", 1e-5);
    cJSON_AddNumberToObject(j, "resid_pdrop", 0);
    cJSON_AddNumberToObject(j, "embd_pdrop", 0);
    cJSON_AddNumberToObject(j, "attn_pdrop", 0);
    cJSON_AddBoolToObject(j, "tie_word_embeddings", 1);
    cJSON_AddBoolToObject(j, "scale_attn_weights", 1);
    if (c->vocab > 50256) {   // GPT-2's tokenizer: end-of-text
        cJSON_AddNumberToObject(j, "bos_token_id", 50256);
        cJSON_AddNumberToObject(j, "eos_token_id", 50256);
    }
}

static int write_config(const gpt_config *c, const char *path) {
    const int neox = c->pos == LSSAR_POS_ROPE;
    cJSON *j = cJSON_CreateObject();
    cJSON_AddItemToArray(cJSON_AddArrayToObject(j, "architectures"),
                         cJSON_CreateString(neox ? "GPTNeoXForCausalLM" : "GPT2LMHeadModel"));
    cJSON_AddStringToObject(j, "model_type", neox ? "gpt_neox" : "gpt2");
    cJSON_AddNumberToObject(j, "vocab_size", c->vocab);
    if (neox) config_neox(c, j);
    else config_gpt2(c, j);
    cJSON_AddStringToObject(j, "torch_dtype", "float32");
    int rc = lssar_write_json(path, j);
    cJSON_Delete(j);
    return rc;
}

// Any other single-channel model: lssar's own checkpoint (its tensor names, with format "pt"),
// config.json naming the modelling file over lssar.attention (python/lssar/modeling_lssar.py),
// and a copy of that file, found beside the library (PREFIX/share/lssar, or python/lssar in a
// clone's build).
static int lssar_save(const gpt *m, const char *dir) {
    const gpt_config *c = gpt_get_config(m);
    if (c->channels != 1)
        return lssar_fail(LSSAR_E_UNSUPPORTED,
                          "a transformers folder holds text models: this one has %d token channels",
                          c->channels);
    char prefix[4096], src[4300], path[4200];
    const char *cands[2] = {"share/lssar/modeling_lssar.py", "python/lssar/modeling_lssar.py"};
    char *code = NULL;
    size_t len = 0;
    for (int k = 0; k < 2 && !code; k++)
        if (lssar_prefix_dir(prefix, sizeof prefix)) {
            snprintf(src, sizeof src, "%s/%s", prefix, cands[k]);
            if (lssar_read_file(src, &code, &len)) code = NULL;
        }
    if (!code)
        return lssar_fail(LSSAR_E_IO, "modeling_lssar.py (the transformers model over lssar.attention) is "
                                      "neither in PREFIX/share/lssar nor in python/lssar beside this build: "
                                      "reinstall with `make install`");
    int rc = lssar_mkdirs(dir);
    snprintf(path, sizeof path, "%s/modeling_lssar.py", dir);
    if (!rc) {
        lssar_afile a;
        if (!(rc = lssar_afile_open(&a, path))) {
            if (fwrite(code, 1, len, a.f) != len) {
                lssar_afile_abort(&a);
                rc = lssar_fail(LSSAR_E_IO, "writing %s failed", path);
            } else rc = lssar_afile_commit(&a);
        }
    }
    free(code);
    snprintf(path, sizeof path, "%s/model.safetensors", dir);
    if (!rc) rc = ckpt_save_model(m, path, 0);
    if (rc) return rc;
    cJSON *j = cJSON_CreateObject();
    cJSON_AddItemToArray(cJSON_AddArrayToObject(j, "architectures"), cJSON_CreateString("LssarForCausalLM"));
    cJSON_AddStringToObject(j, "model_type", "lssar");
    cJSON *am = cJSON_AddObjectToObject(j, "auto_map");
    cJSON_AddStringToObject(am, "AutoConfig", "modeling_lssar.LssarConfig");
    cJSON_AddStringToObject(am, "AutoModelForCausalLM", "modeling_lssar.LssarForCausalLM");
    cJSON_AddNumberToObject(j, "vocab_size", c->vocab);
    cJSON_AddNumberToObject(j, "n_embd", c->dim);
    cJSON_AddNumberToObject(j, "n_layer", c->layers);
    cJSON_AddNumberToObject(j, "n_head", c->heads);
    cJSON_AddNumberToObject(j, "max_seq", c->max_seq);
    cJSON_AddStringToObject(j, "pos", lssar_pos_name(c->pos));
    cJSON_AddStringToObject(j, "attn", lssar_attn_name(c->attn));
    cJSON_AddNumberToObject(j, "p", c->p);
    cJSON_AddNumberToObject(j, "rope_base", c->rope_base);
    cJSON_AddStringToObject(j, "len_norm", lssar_len_norm_name(c->len_norm));
    cJSON_AddNumberToObject(j, "temp_d", c->temp_d);
    cJSON_AddBoolToObject(j, "tied", c->tied);
    cJSON_AddStringToObject(j, "torch_dtype", "float32");
    snprintf(path, sizeof path, "%s/config.json", dir);
    rc = lssar_write_json(path, j);
    cJSON_Delete(j);
    return rc;
}

// dir/model.safetensors from the table (names prefixed with `prefix`), then dir/config.json.
static int save_tensors(const gpt *m, const char *dir, const hf_tensor *tab, int n, const char *prefix) {
    const gpt_config *c = gpt_get_config(m);
    int rc = lssar_mkdirs(dir);
    if (rc) return rc;
    char path[4200], ours[96], hf[80], nm[96];
    st_writer w;
    st_writer_init(&w);
    st_writer_meta(&w, "format", "pt");   // what transformers' safetensors loader expects
    for (int k = 0; k < n; k++)
        for (int l = 0; l < (tab[k].per_layer ? c->layers : 1); l++) {
            snprintf(ours, sizeof ours, tab[k].ours, l);
            int i = gpt_tensor_index(m, ours);
            const int *sh = gpt_tensor_shape(m, i);
            int64_t shape[2] = {sh[0], gpt_tensor_ndim(m, i) > 1 ? sh[1] : 0};
            if (tab[k].layout == TRANSPOSED) { int64_t t = shape[0]; shape[0] = shape[1]; shape[1] = t; }
            snprintf(hf, sizeof hf, tab[k].hf, l);
            snprintf(nm, sizeof nm, "%s%s", prefix, hf);
            st_writer_add(&w, nm, "F32", gpt_tensor_ndim(m, i), shape);
        }
    size_t half = max_numel(m);
    float *buf = malloc(2 * half * sizeof(float));
    if (!buf) { st_writer_abort(&w); return lssar_fail(LSSAR_E_NOMEM, "out of memory writing %s", dir); }
    snprintf(path, sizeof path, "%s/model.safetensors", dir);
    rc = st_writer_begin(&w, path);
    for (int k = 0; k < n && !rc; k++)
        for (int l = 0; l < (tab[k].per_layer ? c->layers : 1) && !rc; l++) {
            snprintf(ours, sizeof ours, tab[k].ours, l);
            int i = gpt_tensor_index(m, ours);
            const int *sh = gpt_tensor_shape(m, i);
            if ((rc = gpt_read_tensor(m, GPT_BUF_PARAM, i, buf))) break;
            const float *out = buf;
            if (tab[k].layout == TRANSPOSED) transpose(buf, buf + half, sh[0], sh[1]);
            if (tab[k].layout == QKV_BY_HEAD)
                qkv_rows(buf, buf + half, c->heads, c->dim / c->heads,
                         gpt_tensor_ndim(m, i) > 1 ? (size_t)c->dim : 1, 0);
            if (tab[k].layout != AS_IS) out = buf + half;
            rc = st_writer_write(&w, out, gpt_tensor_numel(m, i) * sizeof(float));
        }
    free(buf);
    if (rc) { st_writer_abort(&w); return rc; }
    if ((rc = st_writer_commit(&w))) return rc;
    snprintf(path, sizeof path, "%s/config.json", dir);
    return write_config(c, path);
}

int hf_save(const gpt *m, const char *dir) {
    const gpt_config *c = gpt_get_config(m);
    int softmax_tied = c->attn == LSSAR_ATTN_SOFTMAX && c->tied && c->channels == 1;
    if (softmax_tied && c->pos == LSSAR_POS_ROPE) return save_tensors(m, dir, NEOX, NNEOX, "");
    if (gpt_not_gpt2(c)) return lssar_save(m, dir);   // no transformers architecture: lssar's own model
    return save_tensors(m, dir, MAP, NMAP, "transformer.");
}

// A number field of config.json, or dflt when absent; -1e300 when present but not a number.
static double num(const cJSON *j, const char *key, double dflt) {
    const cJSON *x = cJSON_GetObjectItemCaseSensitive(j, key);
    return !x ? dflt : cJSON_IsNumber(x) ? x->valuedouble : -1e300;
}

// The model a transformers GPT-2 or GPT-NeoX folder describes (sizes checked by the caller): softmax,
// tied, one token channel, on the CPU; rope_base 0 for gpt_create's default.
static gpt_config text_config(double L, double H, double C, double V, double T, lssar_pos pos,
                              float rope_base) {
    return (gpt_config){.layers = (int)L, .heads = (int)H, .dim = (int)C, .vocab = (int)V, .channels = 1,
                        .max_seq = (int)T, .pos = pos, .attn = LSSAR_ATTN_SOFTMAX, .p = 15.0f, .tied = 1,
                        .device = LSSAR_DEVICE_CPU, .rope_base = rope_base};
}

// A model.safetensors being read into an empty model of its config (buf: 2 x the largest tensor,
// the tensor read and its conversion).
typedef struct {
    st_file f;
    gpt *m;
    float *buf;
    size_t half;
} hf_reader;

// Cleans up itself when it fails.
static int reader_open(hf_reader *r, const char *path, const gpt_config *cfg) {
    r->m = NULL;
    r->buf = NULL;
    int rc = st_open(&r->f, path);
    if (rc) return rc;
    if ((rc = gpt_create_empty(cfg, &r->m))) { st_close(&r->f); return rc; }
    r->half = max_numel(r->m);
    r->buf = malloc(2 * r->half * sizeof(float));
    if (r->buf) return 0;
    st_close(&r->f);
    gpt_free(r->m);
    return lssar_fail(LSSAR_E_NOMEM, "out of memory reading %s", path);
}

// The model to *out when rc is 0, else freed; returns rc.
static int reader_close(hf_reader *r, int rc, gpt **out) {
    free(r->buf);
    st_close(&r->f);
    if (rc) { gpt_free(r->m); return rc; }
    *out = r->m;
    return 0;
}

// A GPT-NeoX folder (config j, already read): RoPE, sequential residual, tied head.
static int neox_load(const char *dir, cJSON *j, gpt **out) {
    char path[4200];
    snprintf(path, sizeof path, "%s/config.json", dir);
    const cJSON *act = cJSON_GetObjectItemCaseSensitive(j, "hidden_act");
    const cJSON *rs = cJSON_GetObjectItemCaseSensitive(j, "rope_scaling");
    double V = num(j, "vocab_size", 50432), C = num(j, "hidden_size", 6144),
           L = num(j, "num_hidden_layers", 44);
    double H = num(j, "num_attention_heads", 64), I = num(j, "intermediate_size", 24576),
           T = num(j, "max_position_embeddings", 2048);
    double base = num(j, "rotary_emb_base", 10000);
    const char *bad = NULL;
    if (!cJSON_IsString(act) || (strcmp(act->valuestring, "gelu_new") && strcmp(act->valuestring, "gelu_"
                                                                                                  "pytorch_"
                                                                                                  "tanh")))
        bad = "hidden_act is not GELU's tanh approximation (gelu_new)";
    else if (num(j, "rotary_pct", 0.25) != 1.0)
        bad = "rotary_pct is not 1 (lssar rotates every pair of a head)";
    else if (fabs(num(j, "layer_norm_eps", 1e-5) - 1e-5) > 1e-12) bad = "layer_norm_eps is not 1e-5";
    else if (!cJSON_IsFalse(cJSON_GetObjectItemCaseSensitive(j, "use_parallel_residual")))
        bad = "use_parallel_residual is not false (lssar's blocks are sequential)";
    else if (cJSON_IsFalse(cJSON_GetObjectItemCaseSensitive(j, "attention_bias")))
        bad = "attention_bias is false";
    else if (rs && !cJSON_IsNull(rs)) bad = "rope_scaling is set";
    else if (I != 4 * C) bad = "intermediate_size is not 4 x hidden_size";
    else if (!(base > 1)) bad = "rotary_emb_base is not a base > 1";
    int tied = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(j, "tie_word_embeddings"));
    cJSON_Delete(j);
    if (bad) return lssar_fail(LSSAR_E_UNSUPPORTED, "%s: %s", path, bad);
    if (!(V >= 1 && V <= 65536 && T >= 1 && T <= 1 << 20 && C >= 2 && C <= 65536 && L >= 1 && L <= 4096 &&
          H >= 1 && fmod(C, H) == 0 && fmod(C / H, 2) == 0 && V == floor(V) && T == floor(T) &&
          C == floor(C) && L == floor(L) && H == floor(H)))
        return lssar_fail(LSSAR_E_FORMAT,
                          "%s: vocab_size %g, hidden_size %g, num_hidden_layers %g, num_attention_heads %g, "
                          "max_position_embeddings %g are not a model",
                          path, V, C, L, H, T);
    gpt_config cfg = text_config(L, H, C, V, T, LSSAR_POS_ROPE, (float)base);
    snprintf(path, sizeof path, "%s/model.safetensors", dir);
    hf_reader r;
    int rc = reader_open(&r, path, &cfg);
    if (rc) return rc;
    char ours[96], nm[96];
    for (int k = 0; k < NNEOX && !rc; k++)
        for (int l = 0; l < (NEOX[k].per_layer ? cfg.layers : 1) && !rc; l++) {
            snprintf(ours, sizeof ours, NEOX[k].ours, l);
            snprintf(nm, sizeof nm, NEOX[k].hf, l);
            int i = gpt_tensor_index(r.m, ours);
            size_t n = gpt_tensor_numel(r.m, i);
            const st_tensor *t = st_find(&r.f, nm);
            if (!t && k == NNEOX - 1 && tied) continue;   // a tied head need not be stored
            if (!t) { rc = lssar_fail(LSSAR_E_FORMAT, "%s: tensor %s is missing", path, nm); break; }
            if (t->numel != n) {
                rc = lssar_fail(LSSAR_E_FORMAT, "%s: tensor %s has another shape than config.json implies",
                                path, nm);
                break;
            }
            if ((rc = st_read(&r.f, nm, "F32", r.buf, n))) break;
            if (k == NNEOX - 1) {   // embed_out: lssar's head is the embedding itself
                gpt_read_tensor(r.m, GPT_BUF_PARAM, i, r.buf + r.half);
                if (memcmp(r.buf, r.buf + r.half, n * sizeof(float)))
                    rc = lssar_fail(LSSAR_E_UNSUPPORTED,
                                    "%s: embed_out differs from embed_in: lssar's models tie the head to the "
                                    "embedding",
                                    path);
                continue;
            }
            const float *src = r.buf;
            if (NEOX[k].layout == QKV_BY_HEAD) {
                qkv_rows(r.buf, r.buf + r.half, cfg.heads, cfg.dim / cfg.heads,
                         t->ndim > 1 ? (size_t)cfg.dim : 1, 1);
                src = r.buf + r.half;
            }
            rc = gpt_write_tensor(r.m, GPT_BUF_PARAM, i, src);
        }
    return reader_close(&r, rc, out);
}

int hf_load(const char *dir, gpt **out) {
    *out = NULL;
    char path[4200];
    snprintf(path, sizeof path, "%s/config.json", dir);
    cJSON *j = lssar_read_json(path);
    if (!j)
        return lssar_fail(LSSAR_E_FORMAT,
                          "%s is missing or not JSON: a transformers model folder has config.json", path);
    const cJSON *mt = cJSON_GetObjectItemCaseSensitive(j, "model_type");
    if (cJSON_IsString(mt) && !strcmp(mt->valuestring, "gpt_neox")) return neox_load(dir, j, out);
    if (cJSON_IsString(mt) && !strcmp(mt->valuestring, "lssar")) {   // lssar's own checkpoint inside
        cJSON_Delete(j);
        snprintf(path, sizeof path, "%s/model.safetensors", dir);
        return ckpt_load_model(path, &(ckpt_load_opts){.device = LSSAR_DEVICE_CPU}, out, NULL);
    }
    const cJSON *act = cJSON_GetObjectItemCaseSensitive(j, "activation_function");
    const char *bad = NULL;
    if (!cJSON_IsString(mt) || strcmp(mt->valuestring, "gpt2"))
        bad = "model_type is none of \"gpt2\", \"gpt_neox\" and \"lssar\"";
    else if (act && (!cJSON_IsString(act) ||
                     (strcmp(act->valuestring, "gelu_new") && strcmp(act->valuestring, "gelu_pytorch_tanh"))))
        bad = "activation_function is not GELU's tanh approximation (gelu_new)";
    else if (fabs(num(j, "layer_norm_epsilon", 1e-5) - 1e-5) > 1e-12) bad = "layer_norm_epsilon is not 1e-5";
    else if (cJSON_IsFalse(cJSON_GetObjectItemCaseSensitive(j, "tie_word_embeddings")))
        bad = "the head is not tied to the embedding";
    else if (cJSON_IsFalse(cJSON_GetObjectItemCaseSensitive(j, "scale_attn_weights")) ||
             cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(j, "scale_attn_by_inverse_layer_idx")) ||
             cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(j, "reorder_and_upcast_attn")))
        bad = "its attention is scaled otherwise than by 1/sqrt(D)";
    double V = num(j, "vocab_size", 50257), T = num(j, "n_positions", 1024), C = num(j, "n_embd", 768);
    double L = num(j, "n_layer", 12), H = num(j, "n_head", 12);
    cJSON_Delete(j);
    if (bad) return lssar_fail(LSSAR_E_UNSUPPORTED, "%s: %s", path, bad);
    if (!(V >= 1 && V <= 65536 && T >= 1 && T <= 1 << 20 && C >= 1 && C <= 65536 && L >= 1 && L <= 4096 &&
          H >= 1 && fmod(C, H) == 0 && V == floor(V) && T == floor(T) && C == floor(C) && L == floor(L) &&
          H == floor(H)))
        return lssar_fail(LSSAR_E_FORMAT,
                          "%s: vocab_size %g, n_positions %g, n_embd %g, n_layer %g, n_head %g are not a "
                          "model (n_head must divide n_embd)",
                          path, V, T, C, L, H);
    gpt_config cfg = text_config(L, H, C, V, T, LSSAR_POS_LEARNED, 0.0f);
    snprintf(path, sizeof path, "%s/model.safetensors", dir);
    hf_reader r;
    int rc = reader_open(&r, path, &cfg);
    if (rc) return rc;
    char ours[96], hf[80], full[96];
    for (int k = 0; k < NMAP && !rc; k++)
        for (int l = 0; l < (MAP[k].per_layer ? cfg.layers : 1) && !rc; l++) {
            snprintf(ours, sizeof ours, MAP[k].ours, l);
            snprintf(hf, sizeof hf, MAP[k].hf, l);
            snprintf(full, sizeof full, "transformer.%s", hf);
            const char *name = st_find(&r.f, full) ? full : hf;   // the Hub's gpt2 has no prefix
            int i = gpt_tensor_index(r.m, ours);
            const int *sh = gpt_tensor_shape(r.m, i);
            const st_tensor *t = st_find(&r.f, name);
            int64_t want0 = MAP[k].layout == TRANSPOSED ? sh[1] : sh[0],
                    want1 = MAP[k].layout == TRANSPOSED ? sh[0] : sh[1];
            if (!t) { rc = lssar_fail(LSSAR_E_FORMAT, "%s: tensor %s is missing", path, full); break; }
            if (t->ndim != gpt_tensor_ndim(r.m, i) || t->shape[0] != want0 ||
                (t->ndim > 1 && t->shape[1] != want1)) {
                rc = lssar_fail(LSSAR_E_FORMAT, "%s: tensor %s has another shape than config.json implies",
                                path, name);
                break;
            }
            // the error names the dtype
            if ((rc = st_read(&r.f, name, "F32", r.buf, gpt_tensor_numel(r.m, i)))) break;
            const float *src = r.buf;
            if (MAP[k].layout == TRANSPOSED) {
                transpose(r.buf, r.buf + r.half, (int)want0, (int)want1);
                src = r.buf + r.half;
            }
            rc = gpt_write_tensor(r.m, GPT_BUF_PARAM, i, src);
        }
    return reader_close(&r, rc, out);
}
