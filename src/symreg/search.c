// search.c - the evolutionary search (PySR's design): islands of age-regularised evolution run
// in parallel threads, synchronised once per iteration for the hall of fame and migration.
//
// Determinism: island i always uses rng stream (seed, restart, i) and, during an iteration, reads
// only state frozen at the last synchronisation; merging and migration run on one thread in island
// order. So results depend on the seed, not on the thread count (unless time_limit cuts a run).
#include <math.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>
#include "core/dist.h"
#include "symreg/sr.h"

/* ------------------------------------------------------------------ configuration */
typedef struct {
    int una[SR_NOPS], nuna, bin[SR_NOPS], nbin;  // enabled operators
    int cost[SR_NOPS];                           // complexity of each node kind
    int maxsize;
    double parsimony, adapt_scale, alpha, p_tourn, frac_hof, frac_pop, crossover;
    int tourn_n;
} sr_config;

typedef struct {
    sr_prog p;
    double loss, score;  // score: loss / baseline + parsimony * complexity
    int cplx;
    uint64_t birth;
} member;

typedef struct {  // best seen at each complexity
    member m[SR_MAXLEN + 1];
    int has[SR_MAXLEN + 1];
} hall;

typedef struct {
    member *pop;
    int n;
    lssar_rng rng;
    uint64_t clock;       // births, for "replace the oldest"
    hall hof;             // this island's best per complexity (merged at synchronisation)
    double *work;         // constant-optimiser scratch
    double evals, node_evals;
    double counts[SR_MAXLEN + 1];  // complexities created this iteration (adaptive parsimony)
} island;

typedef struct {
    const sr_config *cfg;
    const sr_data *d;
    const lssar_sr_options *o;
    double baseline;              // loss of the best constant
    const double *freq;           // complexity frequencies, frozen for the iteration
    const hall *ghof;             // global hall of fame, frozen for the iteration
    const sr_data *dsub;          // a strided subset of the rows, for quick constant refits
} ctx;

static int parse_ops(const char *ops, sr_config *c) {
    c->nuna = c->nbin = 0;
    char *s = strdup(ops ? ops : ""), *save = NULL;
    if (!s) return lssar_fail(LSSAR_E_NOMEM, "out of memory");
    int seen[SR_NOPS] = {0};
    for (char *t = strtok_r(s, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
        while (*t == ' ') t++;
        char *e = t + strlen(t);
        while (e > t && e[-1] == ' ') *--e = 0;
        if (!*t) continue;
        int op = sr_op_parse(t);
        if (op < 0) {
            int rc = lssar_fail(LSSAR_E_ARG, "unknown operator '%s' in ops; known: + - * / pow neg sin cos "
                                "exp log inv sqrt square cube abs", t);
            free(s);
            return rc;
        }
        if (seen[op]++) continue;
        if (sr_arity(op) == 2) c->bin[c->nbin++] = op; else c->una[c->nuna++] = op;
    }
    free(s);
    if (c->nbin == 0)
        return lssar_fail(LSSAR_E_ARG, "ops '%s' has no binary operator: add at least one of + - * /",
                          ops ? ops : "");
    return 0;
}

static int parse_costs(const char *spec, sr_config *c) {
    for (int op = 0; op < SR_NOPS; op++) c->cost[op] = 1;
    if (!spec || !*spec) return 0;
    char *s = strdup(spec), *save = NULL;
    if (!s) return lssar_fail(LSSAR_E_NOMEM, "out of memory");
    for (char *t = strtok_r(s, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
        char *eq = strchr(t, '=');
        int op = -1, v = 0;
        if (eq) {
            *eq = 0;
            op = !strcmp(t, "const") ? SR_CONST : !strcmp(t, "var") ? SR_VAR : sr_op_parse(t);
            v = atoi(eq + 1);
        }
        if (op < 0 || v < 1 || v > 10) {
            int rc = lssar_fail(LSSAR_E_ARG, "complexity '%s': expected NAME=N with N in 1..10, e.g. "
                                "\"pow=2,exp=2\"", spec);
            free(s);
            return rc;
        }
        c->cost[op] = v;
    }
    free(s);
    return 0;
}

static int complexity(const sr_config *c, const sr_prog *p) {
    int s = 0;
    for (int i = 0; i < p->len; i++) s += c->cost[p->n[i].op];
    return s;
}

/* ------------------------------------------------------------------ random pieces */
static sr_node random_leaf(lssar_rng *r, const sr_data *d) {
    sr_node n = {SR_CONST, 0, 0, 0};
    if (lssar_rng_uniform(r) < 0.5) n.c = lssar_rng_normal(r);
    else { n.op = SR_VAR; n.feat = (uint16_t)lssar_rng_below(r, d->nf); }
    return n;
}

static int random_op(lssar_rng *r, const sr_config *c, int arity) {
    if (arity == 0) arity = (int)lssar_rng_below(r, c->nuna + c->nbin) < c->nuna ? 1 : 2;
    if (arity == 1 && c->nuna == 0) arity = 2;
    return arity == 1 ? c->una[lssar_rng_below(r, c->nuna)] : c->bin[lssar_rng_below(r, c->nbin)];
}

// Random node index whose kind passes `want` (0 any, 1 leaves, 2 operators, 3 binary, 4 constants).
static int pick_node(lssar_rng *r, const sr_prog *p, int want) {
    int idx[SR_MAXLEN], k = 0;
    for (int i = 0; i < p->len; i++) {
        int a = sr_arity(p->n[i].op);
        if (want == 0 || (want == 1 && a == 0) || (want == 2 && a > 0) || (want == 3 && a == 2) ||
            (want == 4 && p->n[i].op == SR_CONST))
            idx[k++] = i;
    }
    return k ? idx[lssar_rng_below(r, k)] : -1;
}

// Wrap the subtree [s, e] in a new random operator: u(S), b(S, leaf) or b(leaf, S).
static int wrap_subtree(lssar_rng *r, const sr_config *c, const sr_data *d, sr_prog *p, int s, int e) {
    sr_node seq[SR_MAXLEN + 2];
    int len = e - s + 1, op = random_op(r, c, 0), m = 0;
    if (len + 2 > SR_MAXLEN) return 0;
    sr_node opn = {(uint8_t)op, 0, 0, 0};
    if (sr_arity(op) == 1) {
        memcpy(seq, p->n + s, len * sizeof(sr_node)); m = len; seq[m++] = opn;
    } else if (lssar_rng_uniform(r) < 0.5) {
        memcpy(seq, p->n + s, len * sizeof(sr_node)); m = len; seq[m++] = random_leaf(r, d); seq[m++] = opn;
    } else {
        seq[m++] = random_leaf(r, d);
        memcpy(seq + m, p->n + s, len * sizeof(sr_node));
        m += len;
        seq[m++] = opn;
    }
    return sr_splice(p, s, e, seq, m);
}

static void random_tree(lssar_rng *r, const sr_config *c, const sr_data *d, sr_prog *p, int nops) {
    p->len = 1;
    p->n[0] = random_leaf(r, d);
    for (int k = 0; k < nops; k++) {  // grow by replacing a random leaf with op(leaf, leaf) / u(leaf)
        int i = pick_node(r, p, 1);
        if (!wrap_subtree(r, c, d, p, i, i)) break;
        if (complexity(c, p) > c->maxsize) { // undo by regrowing smaller
            p->len = 1; p->n[0] = random_leaf(r, d);
            break;
        }
    }
}

/* ------------------------------------------------------------------ mutations */
enum { MUT_CONST, MUT_OP, MUT_SWAP, MUT_ROTATE, MUT_ADD, MUT_INSERT, MUT_DELETE, MUT_SIMPLIFY,
       MUT_RANDOM, MUT_NOTHING, MUT_OPTIMIZE, MUT_LEAF, NMUT };

static int mutate_const(lssar_rng *r, sr_prog *p, double temp) {
    int i = pick_node(r, p, 4);
    if (i < 0) return 0;
    double maxchange = 1.0 * temp + 1.1;  // PySR: perturbation_factor * T + 1 + 0.1
    double f = pow(maxchange, lssar_rng_uniform(r));
    double c = p->n[i].c;
    c = lssar_rng_uniform(r) < 0.5 ? c * f : c / f;
    if (lssar_rng_uniform(r) < 0.05) c = -c;
    if (lssar_rng_uniform(r) < 0.05) c += 0.1 * lssar_rng_normal(r);  // escape from exactly 0
    p->n[i].c = c;
    return 1;
}

// A leaf becomes another leaf: a constant turns into a feature (or back), a feature into another.
// Without it a constant standing in for a missing variable, like the -3.09 in r1 + k sqrt(m2)
// (r1 - r2) / (-3.09 - m1) on the way to the centre of mass, can only leave through deletions.
static int mutate_leaf(lssar_rng *r, const sr_data *d, sr_prog *p) {
    int i = pick_node(r, p, 1);
    if (i < 0) return 0;
    sr_node old = p->n[i];
    p->n[i] = random_leaf(r, d);
    if (p->n[i].op == SR_CONST && old.op == SR_CONST) p->n[i].c = old.c;  // const -> const: no-op
    return !(p->n[i].op == old.op && (old.op == SR_CONST || p->n[i].feat == old.feat));
}

static int mutate_op(lssar_rng *r, const sr_config *c, sr_prog *p) {
    int i = pick_node(r, p, 2);
    if (i < 0) return 0;
    p->n[i].op = (uint8_t)random_op(r, c, sr_arity(p->n[i].op));
    return 1;
}

static int mutate_swap(lssar_rng *r, sr_prog *p) {  // b(A, B) -> b(B, A)
    int i = pick_node(r, p, 3);
    if (i < 0) return 0;
    int sb = sr_subtree_start(p, i - 1), sa = sr_subtree_start(p, sb - 1);
    sr_node seq[SR_MAXLEN];
    int lb = i - sb, la = sb - sa;
    memcpy(seq, p->n + sb, lb * sizeof(sr_node));
    memcpy(seq + lb, p->n + sa, la * sizeof(sr_node));
    memcpy(p->n + sa, seq, (la + lb) * sizeof(sr_node));
    return 1;
}

// Rotation: op1(op2(A, B), C) -> op2(A, op1(B, C)), or the mirror op1(A, op2(B, C)) -> op2(op1(A, B), C).
static int mutate_rotate(lssar_rng *r, sr_prog *p) {
    int i = pick_node(r, p, 3);
    if (i < 0) return 0;
    int sc = sr_subtree_start(p, i - 1), sl = sr_subtree_start(p, sc - 1);
    int left_bin = sr_arity(p->n[sc - 1].op) == 2, right_bin = sr_arity(p->n[i - 1].op) == 2;
    if (!left_bin && !right_bin) return 0;
    sr_node seq[SR_MAXLEN], op1 = p->n[i];
    int m = 0;
    if (left_bin && (!right_bin || lssar_rng_uniform(r) < 0.5)) {
        int e2 = sc - 1;                          // op2 = left child root
        int sB = sr_subtree_start(p, e2 - 1), sA = sl;
        sr_node op2 = p->n[e2];
        // postfix A B op2 C op1 -> A B C op1 op2
        memcpy(seq, p->n + sA, (sB - sA) * sizeof(sr_node)); m = sB - sA;
        memcpy(seq + m, p->n + sB, (e2 - sB) * sizeof(sr_node)); m += e2 - sB;
        memcpy(seq + m, p->n + sc, (i - sc) * sizeof(sr_node)); m += i - sc;
        seq[m++] = op1; seq[m++] = op2;
    } else {
        int e2 = i - 1;                           // op2 = right child root
        int sC = sr_subtree_start(p, e2 - 1), sB = sc;
        sr_node op2 = p->n[e2];
        // postfix A B C op2 op1 -> A B op1 C op2
        memcpy(seq, p->n + sl, (sc - sl) * sizeof(sr_node)); m = sc - sl;
        memcpy(seq + m, p->n + sB, (sC - sB) * sizeof(sr_node)); m += sC - sB;
        seq[m++] = op1;
        memcpy(seq + m, p->n + sC, (e2 - sC) * sizeof(sr_node)); m += e2 - sC;
        seq[m++] = op2;
    }
    memcpy(p->n + sl, seq, m * sizeof(sr_node));
    return 1;
}

static int mutate_add(lssar_rng *r, const sr_config *c, const sr_data *d, sr_prog *p) {
    if (lssar_rng_uniform(r) < 0.5) return wrap_subtree(r, c, d, p, 0, p->len - 1);  // prepend at the root
    int i = pick_node(r, p, 1);                                                      // append at a leaf
    return wrap_subtree(r, c, d, p, i, i);
}

static int mutate_insert(lssar_rng *r, const sr_config *c, const sr_data *d, sr_prog *p) {
    int i = pick_node(r, p, 0);
    return wrap_subtree(r, c, d, p, sr_subtree_start(p, i), i);
}

static int mutate_delete(lssar_rng *r, const sr_data *d, sr_prog *p) {  // node -> one of its children
    int i = pick_node(r, p, 2);
    if (i < 0) return 0;
    int s = sr_subtree_start(p, i), cs = i - 1, ce = i - 1;
    if (sr_arity(p->n[i].op) == 2) {
        int sb = sr_subtree_start(p, i - 1);
        if (lssar_rng_uniform(r) < 0.5) { cs = sb; ce = i - 1; }
        else { cs = s; ce = sb - 1; }
    } else cs = s;
    sr_node seq[SR_MAXLEN];
    int m = ce - cs + 1;
    memcpy(seq, p->n + cs, m * sizeof(sr_node));
    return sr_splice(p, s, i, seq, m);
}

// Swap random subtrees of a and b (each child stays within the maximum size, else fails).
static int crossover(lssar_rng *r, const sr_config *c, sr_prog *a, sr_prog *b) {
    sr_prog x = *a, y = *b;
    int ia = pick_node(r, a, 0), ib = pick_node(r, b, 0);
    int sa = sr_subtree_start(a, ia), sb = sr_subtree_start(b, ib);
    if (!sr_splice(&x, sa, ia, b->n + sb, ib - sb + 1)) return 0;
    if (!sr_splice(&y, sb, ib, a->n + sa, ia - sa + 1)) return 0;
    if (complexity(c, &x) > c->maxsize || complexity(c, &y) > c->maxsize) return 0;
    *a = x; *b = y;
    return 1;
}

/* ------------------------------------------------------------------ members */
static void evaluate(const ctx *x, island *is, member *m) {
    m->loss = sr_loss(&m->p, x->d);
    m->cplx = complexity(x->cfg, &m->p);
    m->score = m->loss / x->baseline + x->cfg->parsimony * m->cplx;
    is->evals += 1;
    is->node_evals += (double)m->p.len * x->d->n;
}

static void hall_offer(hall *h, const member *m) {
    if (!isfinite(m->loss) || m->cplx > SR_MAXLEN) return;
    if (!h->has[m->cplx] || m->loss < h->m[m->cplx].loss) { h->m[m->cplx] = *m; h->has[m->cplx] = 1; }
}

static int num_consts(const sr_prog *p) {
    int n = 0;
    for (int i = 0; i < p->len; i++) n += p->n[i].op == SR_CONST;
    return n;
}

static void optimize_member(const ctx *x, island *is, member *m) {
    double before = is->evals;
    int ncon = num_consts(&m->p);
    if (!ncon) return;
    double l = sr_optimize_constants(&m->p, x->d, m->loss, x->o->opt_iterations, x->o->opt_restarts,
                                     &is->rng, is->work);
    // The optimiser evaluates about (constants + 2) x iterations x starts times; count it roughly.
    double n_ev = (double)(ncon + 2) * x->o->opt_iterations * (x->o->opt_restarts + 1);
    is->evals = before + n_ev;
    is->node_evals += n_ev * m->p.len * x->d->n;
    m->loss = l;
    m->score = l / x->baseline + x->cfg->parsimony * m->cplx;
}

// A new structure judged with its parent's constants usually looks worse than it is: m0/sqrt(1 - k
// (v/c)^2) grown from m0 / (1 - 0.5 (v/c)^2) is a poor fit until k moves to 1, and annealing then
// drops it. So a share of structurally mutated children get their constants re-fitted first, on a
// strided subset of the rows (cheap: 1/8 of the work of a full fit at 1000 rows), keeping the new
// constants only if the loss on ALL rows drops. What it bought on the public laws: docs/symreg.md.
static void refit_quick(const ctx *x, island *is, member *m) {
    int ncon = num_consts(&m->p);
    if (!ncon) return;
    sr_prog q = m->p;
    double l0 = sr_loss(&q, x->dsub);
    if (!isfinite(l0)) return;
    sr_optimize_constants(&q, x->dsub, l0, x->o->opt_iterations, x->o->opt_restarts, &is->rng, is->work);
    double n_ev = (double)(ncon + 2) * x->o->opt_iterations * (x->o->opt_restarts + 1) * x->dsub->n / x->d->n;
    is->evals += n_ev + 1;
    is->node_evals += (n_ev + 1) * m->p.len * x->d->n;
    double l = sr_loss(&q, x->d);
    if (l < m->loss) { m->p = q; m->loss = l; m->score = l / x->baseline + x->cfg->parsimony * m->cplx; }
}

static double adjusted(const ctx *x, const member *m) {
    return m->score * exp(x->cfg->adapt_scale * x->freq[m->cplx]);
}

static int tournament(const ctx *x, island *is) {
    int best[32], k = x->cfg->tourn_n < 32 ? x->cfg->tourn_n : 32;
    if (k < 1) k = 1;  // (a tournament of 0 once read best[-1]: selection was silently random)
    double fit[32];
    for (int j = 0; j < k; j++) {
        best[j] = (int)lssar_rng_below(&is->rng, is->n);
        fit[j] = adjusted(x, &is->pop[best[j]]);
    }
    for (int a = 1; a < k; a++)  // insertion sort by adjusted fitness (small k)
        for (int b = a; b > 0 && fit[b] < fit[b - 1]; b--) {
            double tf = fit[b]; fit[b] = fit[b - 1]; fit[b - 1] = tf;
            int ti = best[b]; best[b] = best[b - 1]; best[b - 1] = ti;
        }
    for (int j = 0; j < k - 1; j++) if (lssar_rng_uniform(&is->rng) < x->cfg->p_tourn) return best[j];
    return best[k - 1];
}

static int oldest(const island *is, int avoid) {
    int o = avoid == 0 ? 1 : 0;
    for (int i = 0; i < is->n; i++) if (i != avoid && is->pop[i].birth < is->pop[o].birth) o = i;
    return o;
}

static void place(island *is, int slot, const member *m) {
    is->pop[slot] = *m;
    is->pop[slot].birth = is->clock++;
}

// One mutation of a tournament winner; the child (or, if annealing rejects it, a copy of the parent)
// replaces the oldest member.
static void evolve_step(const ctx *x, island *is, double temp) {
    const sr_config *c = x->cfg;
    lssar_rng *r = &is->rng;
    if (lssar_rng_uniform(r) < c->crossover) {
        int ia = tournament(x, is), ib = tournament(x, is);
        member a = is->pop[ia], b = is->pop[ib];
        if (!crossover(r, c, &a.p, &b.p)) return;
        evaluate(x, is, &a); evaluate(x, is, &b);
        hall_offer(&is->hof, &a); hall_offer(&is->hof, &b);
        int oa = oldest(is, -1);
        place(is, oa, &a);
        place(is, oldest(is, oa), &b);
        is->counts[a.cplx] += 1; is->counts[b.cplx] += 1;
        return;
    }
    int ip = tournament(x, is);
    const member *parent = &is->pop[ip];
    // Mutation weights (const, operator, swap, rotate, add, insert, delete, simplify, randomize,
    // nothing, optimize, leaf). PySR's own (0.048, 0.47, 0.1, 0, 0.79, 5.1, 1.7, 0.002, 0.00023, 0.21,
    // 0) with annealing off (its default) did no better on the public laws (docs/PERF.md).
    static const double weights[NMUT] = {0.3, 0.47, 0.1, 0.3, 0.79, 2.0, 1.7, 0.02, 0.002, 0.21, 0.02, 0.5};
    member child;
    int ok = 0, kind = MUT_NOTHING;
    for (int attempt = 0; attempt < 10 && !ok; attempt++) {
        child = *parent;
        double w[NMUT], tot = 0;
        memcpy(w, weights, sizeof w);
        if (parent->cplx >= c->maxsize) w[MUT_ADD] = w[MUT_INSERT] = 0;
        if (parent->p.len == 1) w[MUT_DELETE] = w[MUT_SWAP] = w[MUT_ROTATE] = w[MUT_OP] = 0;
        for (int k = 0; k < NMUT; k++) tot += w[k];
        double u = lssar_rng_uniform(r) * tot;
        kind = 0;
        while (kind < NMUT - 1 && u >= w[kind]) u -= w[kind++];
        switch (kind) {
        case MUT_CONST: ok = mutate_const(r, &child.p, temp); break;
        case MUT_OP: ok = mutate_op(r, c, &child.p); break;
        case MUT_SWAP: ok = mutate_swap(r, &child.p); break;
        case MUT_ROTATE: ok = mutate_rotate(r, &child.p); break;
        case MUT_ADD: ok = mutate_add(r, c, x->d, &child.p); break;
        case MUT_INSERT: ok = mutate_insert(r, c, x->d, &child.p); break;
        case MUT_DELETE: ok = mutate_delete(r, x->d, &child.p); break;
        case MUT_SIMPLIFY: sr_simplify(&child.p); ok = 1; break;
        case MUT_RANDOM: random_tree(r, c, x->d, &child.p, 1 + (int)lssar_rng_below(r, 6)); ok = 1; break;
        case MUT_OPTIMIZE: ok = 1; break;
        case MUT_LEAF: ok = mutate_leaf(r, x->d, &child.p); break;
        default: ok = 1; break;
        }
        if (ok && complexity(c, &child.p) > c->maxsize) ok = 0;
    }
    if (!ok) child = *parent;
    if (kind == MUT_NOTHING || !ok) {
        // unchanged: no evaluation needed
    } else {
        evaluate(x, is, &child);
        if (kind == MUT_OPTIMIZE) optimize_member(x, is, &child);
        else if (kind != MUT_CONST && kind != MUT_SIMPLIFY && lssar_rng_uniform(r) < x->o->opt_child)
            refit_quick(x, is, &child);
        // Simulated annealing on the (non-adaptive) score, corrected by complexity frequencies.
        double delta = child.score - parent->score;
        double pacc = temp > 0 ? exp(-delta / (temp * c->alpha)) : (delta <= 0);
        double fo = x->freq[parent->cplx], fn = x->freq[child.cplx];
        if (fn > 0) pacc *= fo / fn;
        if (!(pacc >= lssar_rng_uniform(r))) child = *parent;
        else {
            // A promising structure (near the island's best at its complexity) gets its constants
            // tuned now rather than waiting for the random end-of-iteration optimisation.
            const hall *h = &is->hof;
            if (kind != MUT_OPTIMIZE && child.cplx <= SR_MAXLEN && isfinite(child.loss) &&
                (!h->has[child.cplx] || child.loss < x->o->opt_promising * h->m[child.cplx].loss))
                optimize_member(x, is, &child);
            hall_offer(&is->hof, &child);
        }
    }
    place(is, oldest(is, -1), &child);
    is->counts[child.cplx] += 1;
}

// One iteration of one island: `cycles` mutations with the temperature falling from 1 to 0, then
// constant optimisation on a fraction of members and occasional simplification.
static void evolve_island(const ctx *x, island *is) {
    int cycles = x->o->cycles;
    memset(&is->hof, 0, sizeof is->hof);
    memset(is->counts, 0, sizeof is->counts);
    for (int i = 0; i < is->n; i++) hall_offer(&is->hof, &is->pop[i]);
    for (int k = 0; k < cycles; k++) {
        double temp = cycles > 1 ? 1.0 - (double)k / (cycles - 1) : 0;
        evolve_step(x, is, temp);
    }
    for (int i = 0; i < is->n; i++) {
        member *m = &is->pop[i];
        if (lssar_rng_uniform(&is->rng) < 0.5 && sr_simplify(&m->p)) evaluate(x, is, m);
        if (lssar_rng_uniform(&is->rng) < x->o->opt_probability) optimize_member(x, is, m);
        hall_offer(&is->hof, m);
    }
}

/* ------------------------------------------------------------------ hall of fame -> front */
// The error measure used for stopping and the loss floor: relative to the best constant,
// on the RMS scale for L2 (so 1e-10 means "10 digits right" for every loss).
static double rel_err(int loss, double l, double baseline) {
    double q = l / baseline;
    return loss == LSSAR_SR_L2 ? sqrt(q) : q;
}

typedef struct { int c; double loss, eff; const sr_prog *p; } front_item;

// Pareto front of a hall of fame: complexity increasing, effective loss strictly decreasing.
// Losses below the floor (10 digits right) count as equal, so rounding noise cannot make a bigger
// formula "better" than the exact one.
static int build_front(const hall *h, int maxc, int loss, double baseline, front_item *out) {
    double floor_l = loss == LSSAR_SR_L2 ? 1e-20 * baseline : 1e-10 * baseline;
    int n = 0;
    for (int c = 1; c <= maxc; c++) {
        if (!h->has[c]) continue;
        double eff = fmax(h->m[c].loss, floor_l);
        if (n > 0 && !(eff < out[n - 1].eff)) continue;
        out[n].c = c; out[n].loss = h->m[c].loss; out[n].eff = eff; out[n].p = &h->m[c].p;
        n++;
    }
    return n;
}

static double constant_loss(const sr_data *d, double c) {
    sr_prog p = {1, {{SR_CONST, 0, 0, c}}};
    return sr_loss(&p, d);
}

/* ------------------------------------------------------------------ one search */
typedef struct { double evals, node_evals, seconds; int iterations; } run_stats;

// Restart `restart` of a search: its whole hall of fame is offered to `final` (an empty hall: the
// caller merges restarts, see sr_search_jobs), its work added to st.
static int run_search(const lssar_sr_options *o, const sr_config *cfg, const sr_data *d, double baseline,
                      uint64_t seed, hall *final, run_stats *st, double t_start, int restart, int nrestarts,
                      const char *what) {
    int P = o->populations, N = o->population_size;
    island *isl = calloc(P, sizeof(island));
    hall *ghof = calloc(1, sizeof(hall));
    double freq[SR_MAXLEN + 1];
    if (!isl || !ghof) {
        free(isl);
        free(ghof);
        return lssar_fail(LSSAR_E_NOMEM, "out of memory for %d islands", P);
    }
    int rc = 0;
    // Every stride-th row, for the quick refits of new children (refit_quick).
    int nsub = d->n < SR_REFIT_ROWS ? d->n : SR_REFIT_ROWS, stride = d->n / nsub;
    double *subX = malloc(sizeof(double) * (size_t)nsub * (d->nf + 1)),
           *suby = subX ? subX + (size_t)nsub * d->nf : NULL;
    if (!subX) { free(isl); free(ghof); return lssar_fail(LSSAR_E_NOMEM, "out of memory"); }
    for (int i = 0; i < nsub; i++) {
        for (int f = 0; f < d->nf; f++)
            subX[(size_t)f * nsub + i] = d->X[(size_t)f * d->n + (size_t)i * stride];
        suby[i] = d->y[(size_t)i * stride];
    }
    sr_data dsub = {subX, suby, nsub, d->nf, d->loss};
    for (int i = 0; i < P; i++) {
        isl[i].pop = calloc(N, sizeof(member));
        isl[i].work = malloc(sizeof(double) * (SR_MAXC + 3) * (size_t)d->n);
        if (!isl[i].pop || !isl[i].work) {
            rc = lssar_fail(LSSAR_E_NOMEM, "out of memory for the populations");
            goto done;
        }
        isl[i].n = N;
        lssar_rng_stream(&isl[i].rng, seed, (uint64_t)i);
    }
    for (int c = 0; c <= SR_MAXLEN; c++) freq[c] = c >= 1 && c <= cfg->maxsize ? 1.0 / cfg->maxsize : 0;
    ctx x = {cfg, d, o, baseline, freq, ghof, &dsub};
    lssar_rng master;
    lssar_rng_stream(&master, seed, 0x6d6967ULL);  // migration stream

    // Initial populations: small random trees (PySR starts at 3 nodes).
    for (int i = 0; i < P; i++)
        for (int j = 0; j < N; j++) {
            member *m = &isl[i].pop[j];
            random_tree(&isl[i].rng, cfg, d, &m->p, (int)lssar_rng_below(&isl[i].rng, 3));
            evaluate(&x, &isl[i], m);
            m->birth = isl[i].clock++;
        }

    lssar_progress prog;
    char label[64];
    if (nrestarts > 1) snprintf(label, sizeof label, "%s run %d/%d iteration", what, restart + 1, nrestarts);
    else snprintf(label, sizeof label, "%s iteration", what);
    lssar_progress_start(&prog, label, "it", o->iterations);
    double t0 = lssar_now();
    int threads = o->threads > 0 ? o->threads : omp_get_max_threads();
    int it, stop_at = -1;
    for (it = 0; it < o->iterations; it++) {
#pragma omp parallel for schedule(dynamic, 1) num_threads(threads)
        for (int i = 0; i < P; i++) evolve_island(&x, &isl[i]);

        // Synchronisation, in island order: hall of fame, frequencies, migration.
        for (int i = 0; i < P; i++)
            for (int c = 1; c <= cfg->maxsize; c++) if (isl[i].hof.has[c]) hall_offer(ghof, &isl[i].hof.m[c]);
        double cnt[SR_MAXLEN + 1] = {0}, tot = 0;
        for (int i = 0; i < P; i++)
            for (int c = 0; c <= cfg->maxsize; c++) { cnt[c] += isl[i].counts[c]; tot += isl[i].counts[c]; }
        if (tot > 0) for (int c = 0; c <= cfg->maxsize; c++) freq[c] = 0.5 * freq[c] + 0.5 * cnt[c] / tot;

        front_item fr[SR_MAXLEN + 1];
        int nf = build_front(ghof, cfg->maxsize, d->loss, baseline, fr);
        // Migration pool: each island's best few (by score), snapshotted before anyone changes.
        enum { TOPN = 12 };
        member *pool = malloc(sizeof(member) * P * TOPN);
        int npool = 0;
        if (pool)
            for (int i = 0; i < P; i++) {
                int used[64] = {0}, take = TOPN < N ? TOPN : N;
                for (int t = 0; t < take; t++) {
                    int b = -1;
                    for (int j = 0; j < N && j < 64; j++)
                        if (!used[j] && (b < 0 || isl[i].pop[j].score < isl[i].pop[b].score)) b = j;
                    if (b < 0) break;
                    used[b] = 1;
                    pool[npool++] = isl[i].pop[b];
                }
            }
        for (int i = 0; i < P; i++)
            for (int j = 0; j < N; j++) {
                double u = lssar_rng_uniform(&master);
                if (u < cfg->frac_hof && nf > 0) {
                    const front_item *f = &fr[lssar_rng_below(&master, nf)];
                    member *m = &isl[i].pop[j];
                    m->p = *f->p; m->loss = f->loss; m->cplx = f->c;
                    m->score = m->loss / baseline + cfg->parsimony * m->cplx;
                    m->birth = isl[i].clock++;
                } else if (u < cfg->frac_hof + cfg->frac_pop && npool > 0) {
                    isl[i].pop[j] = pool[lssar_rng_below(&master, npool)];
                    isl[i].pop[j].birth = isl[i].clock++;
                }
            }
        free(pool);

        double ev = 0, nev = 0;
        for (int i = 0; i < P; i++) { ev += isl[i].evals; nev += isl[i].node_evals; }
        double best = nf > 0 ? fr[nf - 1].loss : INFINITY, el = lssar_now() - t0;
        if (o->verbose) {
            char extra[160];
            snprintf(extra, sizeof extra, "best loss %.4g (complexity %d) | %.3g evals/s | %.3g node-evals/s",
                     best, nf > 0 ? fr[nf - 1].c : 0, el > 0 ? ev / el : 0, el > 0 ? nev / el : 0);
            lssar_progress_update(&prog, it + 1, extra);
        }
        // Exact fit: run a few more iterations so simpler equivalent forms can reach the front.
        if (stop_at < 0 && o->early_stop > 0 && nf > 0 && rel_err(d->loss, best, baseline) <= o->early_stop)
            stop_at = it + 5;
        if (it == stop_at) { it++; break; }
        if (o->time_limit > 0 && lssar_now() - t_start >= o->time_limit) { it++; break; }
    }
    for (int i = 0; i < P; i++) { st->evals += isl[i].evals; st->node_evals += isl[i].node_evals; }
    st->iterations += it;
    for (int c = 1; c <= cfg->maxsize; c++) if (ghof->has[c]) hall_offer(final, &ghof->m[c]);
done:
    for (int i = 0; i < P; i++) { free(isl[i].pop); free(isl[i].work); }
    free(isl);
    free(ghof);
    free(subX);
    return rc;
}

/* ------------------------------------------------------------------ final pruning */
// Remove constants the equation does not need: X*c, c*X, X/c, X+c, c+X, X-c become X, the other
// constants are re-fitted, and the shorter form is kept if its loss is no worse (within 1e-9, or
// both below the floor). Found exact laws often carry two multiplicative constants whose product
// is the one true constant, e.g. (-0.00066)*(-q1/((0.0083*r*eps)*r/q2)) for Coulomb's law.
// Returns 1 if m changed.
static int prune_constants(const sr_config *cfg, const sr_data *d, member *m, double floor_l,
                           lssar_rng *rng, double *work) {
    int changed = 0;
    for (int again = 1; again;) {
        again = 0;
        for (int j = 0; j < m->p.len && !again; j++) {
            int op = m->p.n[j].op;
            if (op != SR_ADD && op != SR_SUB && op != SR_MUL && op != SR_DIV) continue;
            int sb = sr_subtree_start(&m->p, j - 1), sa = sr_subtree_start(&m->p, sb - 1);
            for (int side = 0; side < 2 && !again; side++) {
                int ks, ke;  // the operand kept
                if (side == 0 && sb == j - 1 && m->p.n[j - 1].op == SR_CONST) { ks = sa; ke = sb - 1; }
                else if (side == 1 && sa == sb - 1 && m->p.n[sa].op == SR_CONST &&
                         (op == SR_MUL || op == SR_ADD)) {
                    ks = sb;
                    ke = j - 1;
                }
                else continue;
                sr_prog q = m->p;
                sr_node seq[SR_MAXLEN];
                memcpy(seq, m->p.n + ks, (ke - ks + 1) * sizeof(sr_node));
                if (!sr_splice(&q, sa, j, seq, ke - ks + 1)) continue;
                double l = sr_loss(&q, d);
                if (num_consts(&q)) l = sr_optimize_constants(&q, d, l, 30, 2, rng, work);
                if (l <= fmax(m->loss * (1 + 1e-9), floor_l)) {
                    sr_simplify_full(&q);
                    double l2 = sr_loss(&q, d);
                    if (l2 <= fmax(m->loss * (1 + 1e-9), floor_l)) l = l2; else continue;
                    m->p = q; m->loss = l; m->cplx = complexity(cfg, &q);
                    m->score = 0;
                    changed = again = 1;
                }
            }
        }
    }
    return changed;
}

/* ------------------------------------------------------------------ public API */
void lssar_sr_defaults(lssar_sr_options *o) {
    memset(o, 0, sizeof *o);
    o->ops = "+,-,*,/,square,sqrt,exp,log,sin,cos";
    o->maxsize = 20;
    o->loss = LSSAR_SR_L2;
    o->select = LSSAR_SR_BEST;
    o->populations = 12;
    o->population_size = 40;
    o->iterations = 100;
    o->cycles = 300;
    o->restarts = 6;   // whole searches; the later ones run only if no exact fit was found
    o->opt_iterations = 8;
    o->opt_restarts = 2;
    o->opt_probability = 0.14;
    o->opt_promising = 1;
    o->opt_child = 0.3;
    o->early_stop = 1e-10;
}

static int check_options(const lssar_sr_options *o) {
    if (o->maxsize < 1 || o->maxsize > SR_MAXLEN - 4)
        return lssar_fail(LSSAR_E_SIZE, "maxsize %d: must be in 1..%d", o->maxsize, SR_MAXLEN - 4);
    if ((unsigned)o->loss > LSSAR_SR_REL)
        return lssar_fail(LSSAR_E_KIND, "loss %d: use LSSAR_SR_L2, _L1, _L1DZ or _REL", o->loss);
    if ((unsigned)o->select > LSSAR_SR_ACCURACY)
        return lssar_fail(LSSAR_E_KIND, "select %d: use score, best or accuracy", o->select);
    if (o->populations < 1 || o->populations > 4096)
        return lssar_fail(LSSAR_E_SIZE, "populations %d: must be in 1..4096", o->populations);
    if (o->population_size < 4 || o->population_size > 64)
        return lssar_fail(LSSAR_E_SIZE, "population size %d: must be in 4..64", o->population_size);
    if (o->iterations < 1 || o->cycles < 1 || o->restarts < 1)
        return lssar_fail(LSSAR_E_SIZE, "iterations, cycles and restarts must be >= 1");
    if (o->opt_iterations < 0 || o->opt_restarts < 0 || !(o->opt_probability >= 0 &&
                                                          o->opt_probability <= 1) ||
        !(o->opt_child >= 0 && o->opt_child <= 1))
        return lssar_fail(LSSAR_E_ARG, "constant optimiser settings out of range (iterations >= 0, restarts "
                          ">= 0, probabilities in [0, 1])");
    if (!(o->early_stop >= 0) || !(o->time_limit >= 0))
        return lssar_fail(LSSAR_E_ARG, "early_stop and time_limit must be >= 0");
    return 0;
}

static int valid_name(const char *s) {
    if (!s || !(*s == '_' || (*s >= 'A' && *s <= 'Z') || (*s >= 'a' && *s <= 'z'))) return 0;
    for (; *s; s++)
        if (!(*s == '_' || (*s >= 'A' && *s <= 'Z') || (*s >= 'a' && *s <= 'z') || (*s >= '0' && *s <= '9')))
            return 0;
    return 1;
}

/* ------------------------------------------------------------------ searches over the ranks */
// The restarts of a search are independent: restart r draws only from the streams of its own
// seed (seed + r x golden ratio), so any rank can run it. What is sequential is their merge (in
// restart order, into one hall of fame) and the early stop (restarts after the first that reaches
// an exact fit are skipped). sr_search_jobs keeps both exactly: it runs the pending restarts in
// rounds of one per rank, gathers their halls of fame in rank order (= restart order), and every
// rank replays the merge as one process does, restart by restart, dropping the restarts of a round
// that come after an early stop. One process is the case of rounds of one restart.

typedef struct {
    const sr_job *job;
    sr_config cfg;
    sr_data d;
    double baseline;
    hall *final;         // the merged restarts
    run_stats st;        // of the merged restarts only (so N ranks report what one process does)
    int next, done;      // restarts merged so far; no more to run
} job_state;

// A restart's outcome as bytes that round-trip exactly: fixed-width integers and the doubles'
// bits in the host's byte order (every rank runs the same build), the programs node by node.
static unsigned char *put(unsigned char *b, const void *v, size_t n) { memcpy(b, v, n); return b + n; }
static size_t pack_outcome(unsigned char *b, const hall *h, int maxsize, const run_stats *st) {
    unsigned char *p = b;
    int32_t it = st->iterations, cnt = 0;
    p = put(p, &st->evals, 8);
    p = put(p, &st->node_evals, 8);
    p = put(p, &st->seconds, 8);
    p = put(p, &it, 4);
    for (int c = 1; c <= maxsize; c++) cnt += h->has[c];
    p = put(p, &cnt, 4);
    for (int c = 1; c <= maxsize; c++) {
        if (!h->has[c]) continue;
        const member *m = &h->m[c];
        int32_t cc = c, cp = m->cplx, len = m->p.len;
        p = put(p, &cc, 4); p = put(p, &cp, 4); p = put(p, &len, 4);
        p = put(p, &m->loss, 8); p = put(p, &m->score, 8); p = put(p, &m->birth, 8);
        for (int i = 0; i < len; i++) {
            const sr_node *nd = &m->p.n[i];
            p = put(p, &nd->op, 1); p = put(p, &nd->feat, 2); p = put(p, &nd->c, 8);
        }
    }
    return (size_t)(p - b);
}
#define PACK_MAX (32 + (size_t)(SR_MAXLEN + 1) * (36 + SR_MAXLEN * 11))

static int unpack_outcome(const unsigned char *b, size_t n, hall *h, run_stats *st) {
    const unsigned char *p = b, *end = b + n;
#define GET(v, k) do { if ((size_t)(end - p) < (k)) goto bad; memcpy((v), p, (k)); p += (k); } while (0)
    int32_t it, cnt;
    memset(h, 0, sizeof *h);
    GET(&st->evals, 8); GET(&st->node_evals, 8); GET(&st->seconds, 8); GET(&it, 4); GET(&cnt, 4);
    st->iterations = it;
    for (int k = 0; k < cnt; k++) {
        int32_t c, cp, len;
        GET(&c, 4); GET(&cp, 4); GET(&len, 4);
        if (c < 1 || c > SR_MAXLEN || len < 1 || len > SR_MAXLEN) goto bad;
        member *m = &h->m[c];
        m->cplx = cp; m->p.len = len;
        GET(&m->loss, 8); GET(&m->score, 8); GET(&m->birth, 8);
        for (int i = 0; i < len; i++) {
            sr_node *nd = &m->p.n[i];
            nd->pad = 0;
            GET(&nd->op, 1); GET(&nd->feat, 2); GET(&nd->c, 8);
        }
        h->has[c] = 1;
    }
#undef GET
    if (p == end) return 0;
bad:
    return lssar_fail(LSSAR_E_FORMAT, "symreg: a restart's result arrived malformed (%zu bytes)", n);
}

// The options of a search (the operators): an error here is one that every rank meets by itself.
static int job_options(const sr_job *j, job_state *s) {
    const lssar_sr_options *o = j->o;
    memset(s, 0, sizeof *s);
    if (!o || !j->X || !j->y || !j->names || !j->res)
        return lssar_fail(LSSAR_E_NULL, "lssar_symreg: NULL argument");
    memset(j->res, 0, sizeof *j->res);
    s->job = j;  // (from here on the result is ours to free on failure)
    int rc = check_options(o);
    sr_config *cfg = &s->cfg;
    if (rc || (rc = parse_ops(o->ops, cfg)) || (rc = parse_costs(o->complexity, cfg))) return rc;
    cfg->maxsize = o->maxsize;
    // Adaptive parsimony as in SymbolicRegression.jl >= 0.22 (1040; 20 before): the tournament
    // fitness is multiplied by exp(1000 x frequency of the complexity), which keeps every size
    // represented; it recovered more laws here than 20 did (docs/PERF.md).
    cfg->parsimony = 0.0032; cfg->adapt_scale = 1000;
    cfg->alpha = 0.1;                       // simulated-annealing temperature scale
    cfg->p_tourn = 0.86; cfg->tourn_n = 12; // tournament: 12 sampled, the fittest taken with p 0.86
    cfg->frac_hof = 0.035; cfg->frac_pop = 0.001; cfg->crossover = 0.066;
    return 0;
}

// The data of a search and what every restart shares (the baseline).
static int job_data(const sr_job *j, job_state *s) {
    const lssar_sr_options *o = j->o;
    const double *X = j->X, *y = j->y;
    int rows = j->rows, nfeat = j->nfeat;
    const char *const *names = j->names;
    if (rows < 1 || nfeat < 1 || nfeat > 65535)
        return lssar_fail(LSSAR_E_SIZE, "lssar_symreg: %d rows, %d features: need >= 1 of each", rows, nfeat);
    for (int f = 0; f < nfeat; f++)
        if (!valid_name(names[f]))
            return lssar_fail(LSSAR_E_ARG, "feature name '%s' is not an identifier (letters, digits, _): "
                              "rename it so SymPy can parse the equations", names[f] ? names[f] : "(null)");
    for (int i = 0; i < rows; i++) {
        if (!isfinite(y[i])) return lssar_fail(LSSAR_E_NAN, "target row %d is not finite", i);
        if (o->loss == LSSAR_SR_REL && y[i] == 0)
            return lssar_fail(LSSAR_E_ARG, "relative loss needs a non-zero target; row %d is 0", i);
        for (int f = 0; f < nfeat; f++)
            if (!isfinite(X[(size_t)f * rows + i]))
                return lssar_fail(LSSAR_E_NAN, "feature %s row %d is not finite", names[f], i);
    }
    s->d = (sr_data){X, y, rows, nfeat, o->loss};

    // Baseline: the better of the mean and the median as a constant prediction.
    double mean = 0;
    for (int i = 0; i < rows; i++) mean += y[i];
    mean /= rows;
    double *tmp = malloc(sizeof(double) * rows);
    if (!tmp) return lssar_fail(LSSAR_E_NOMEM, "out of memory");
    memcpy(tmp, y, sizeof(double) * rows);
    for (int i = 1; i < rows; i++) {
        double v = tmp[i];
        int k = i;
        while (k > 0 && tmp[k - 1] > v) { tmp[k] = tmp[k - 1]; k--; } tmp[k] = v;
    }
    double med = tmp[rows / 2];
    free(tmp);
    s->baseline = fmin(constant_loss(&s->d, mean), constant_loss(&s->d, med));
    if (!(s->baseline > 0) || !isfinite(s->baseline)) s->baseline = 1;
    if (!(s->final = calloc(1, sizeof(hall)))) return lssar_fail(LSSAR_E_NOMEM, "out of memory");
    return 0;
}

// Restart r's outcome joins the merge (restarts arrive in order): its hall of fame, its work, and
// the early stop of the one-process loop.
static void job_merge(job_state *s, const hall *h, const run_stats *st) {
    const lssar_sr_options *o = s->job->o;
    for (int c = 1; c <= s->cfg.maxsize; c++) if (h->has[c]) hall_offer(s->final, &h->m[c]);
    s->st.evals += st->evals; s->st.node_evals += st->node_evals; s->st.seconds += st->seconds;
    s->st.iterations += st->iterations;
    s->next++;
    // An exact fit already found (the early-stop criterion): further whole searches could only
    // add equivalent forms, so skip them (deterministic: depends on the fronts only).
    double bestl = INFINITY;
    for (int c = 1; c <= s->cfg.maxsize; c++) if (s->final->has[c]) bestl = fmin(bestl, s->final->m[c].loss);
    if (s->next >= o->restarts || (o->early_stop > 0 && rel_err(o->loss, bestl,
                                                                s->baseline) <= o->early_stop))
        s->done = 1;
}

// Final polish of the merged front: simplify for printing (keeping the simplified form only if its
// loss is no worse), then build the front and select.
static int job_finish(job_state *s) {
    const lssar_sr_options *o = s->job->o;
    const sr_config *cfg = &s->cfg;
    const sr_data *d = &s->d;
    lssar_sr_result *res = s->job->res;
    hall *final = s->final;
    double t0 = lssar_now();
    double floor_l = o->loss == LSSAR_SR_L2 ? 1e-20 * s->baseline : 1e-10 * s->baseline;  // as in build_front
    lssar_rng prune_rng;
    lssar_rng_stream(&prune_rng, o->seed, 0x7072756eULL);
    double *prune_work = malloc(sizeof(double) * (SR_MAXC + 3) * (size_t)d->n);
    if (!prune_work) return lssar_fail(LSSAR_E_NOMEM, "out of memory");
    for (int c = 1; c <= cfg->maxsize; c++) {
        if (!final->has[c]) continue;
        member m = final->m[c];
        int snapped = 0;
        // Constants that are rounding noise (|c| < 1e-12) become 0 when that costs no accuracy.
        for (int i = 0; i < m.p.len; i++) {
            if (m.p.n[i].op != SR_CONST || m.p.n[i].c == 0 || fabs(m.p.n[i].c) >= 1e-12) continue;
            double keep = m.p.n[i].c;
            m.p.n[i].c = 0;
            if (!(sr_loss(&m.p, d) <= fmax(final->m[c].loss * (1 + 1e-9), floor_l))) m.p.n[i].c = keep;
            else snapped = 1;
        }
        if (sr_simplify_full(&m.p) || snapped) {
            double l = sr_loss(&m.p, d);
            int cc = complexity(cfg, &m.p);
            int as_good = l <= fmax(final->m[c].loss * (1 + 1e-12), floor_l);
            if (as_good && cc <= c) { m.loss = l; m.cplx = cc; final->m[c] = m; }
            // a shorter simplified form may also be offered at its own complexity
            if (cc < c && as_good) hall_offer(final, &m);
        }
        m = final->m[c];
        if (prune_constants(cfg, d, &m, floor_l, &prune_rng, prune_work) && m.cplx < c) hall_offer(final, &m);
    }
    free(prune_work);
    front_item fr[SR_MAXLEN + 1];
    int nf = build_front(final, cfg->maxsize, o->loss, s->baseline, fr);
    // seconds: the searches' own time (on whichever ranks ran them) and this polish; for one
    // process and one search, its wall time
    res->seconds = s->st.seconds + (lssar_now() - t0);
    res->evaluations = s->st.evals;
    res->node_evals_per_s = res->seconds > 0 ? s->st.node_evals / res->seconds : 0;
    res->iterations = s->st.iterations;
    res->front = calloc(nf > 0 ? nf : 1, sizeof(lssar_sr_equation));
    if (!res->front) return lssar_fail(LSSAR_E_NOMEM, "out of memory");
    res->n = nf;
    double minloss = INFINITY;
    for (int k = 0; k < nf; k++) minloss = fmin(minloss, fr[k].eff);
    int sel_score = 0, sel_best = -1, sel_acc = nf - 1;
    for (int k = 0; k < nf; k++) {
        lssar_sr_equation *e = &res->front[k];
        e->equation = sr_to_string(fr[k].p, s->job->names);
        e->complexity = fr[k].c;
        e->loss = fr[k].loss;
        e->score = k == 0 ? 0 : -(log(fr[k].eff) - log(fr[k - 1].eff)) / (fr[k].c - fr[k - 1].c);
        if (!e->equation) { lssar_sr_result_free(res); return lssar_fail(LSSAR_E_NOMEM, "out of memory"); }
        if (e->score > res->front[sel_score].score) sel_score = k;
        if (fr[k].eff <= 1.5 * minloss && (sel_best < 0 || e->score > res->front[sel_best].score))
            sel_best = k;
    }
    res->selected = nf == 0 ? -1
                  : o->select == LSSAR_SR_SCORE ? sel_score
                  : o->select == LSSAR_SR_BEST ? sel_best
                  : sel_acc;
    if (nf == 0) {
        lssar_sr_result_free(res);
        return lssar_fail(LSSAR_E_NAN, "no expression with a finite loss was found (check the data)");
    }
    return 0;
}

typedef struct { int job, restart; } sr_task;

int sr_search_jobs(const sr_job *jobs, int njobs, int *failed) {
    int nr = lssar_dist_size(), me = lssar_dist_rank(), rc = 0, maxr = 0;
    if (failed) *failed = -1;
    job_state *js = calloc(njobs > 0 ? njobs : 1, sizeof *js);
    sr_task *round = malloc(sizeof(sr_task) * nr);
    size_t *counts = malloc(sizeof(size_t) * nr);
    unsigned char *mine = malloc(PACK_MAX), *up = malloc(njobs > 0 ? njobs : 1);
    hall *h = malloc(sizeof(hall));
    if (!js || !round || !counts || !mine || !up || !h) rc = lssar_fail(LSSAR_E_NOMEM, "out of memory");
    int bad = -1;
    // Every rank has the same options (the same command line) and so meets the same errors in
    // them, without a word to the others.
    for (int g = 0; g < njobs && !rc; g++)
        if ((rc = job_options(&jobs[g], &js[g]))) {
            if (failed) *failed = g;
            lssar_dist_error_is_shared();
            goto out;
        } else if (jobs[g].o->restarts > maxr) maxr = jobs[g].o->restarts;
    // But a rank may have other data (its own copy of a file): it must not leave the rest waiting
    // in the rounds below.
    for (int g = 0; g < njobs && !rc; g++)
        if ((rc = job_data(&jobs[g], &js[g]))) bad = g;
    if ((rc = lssar_dist_agree(rc))) {
        if (failed) *failed = bad;  // (-1 on the ranks where every job was fine)
        goto out;
    }
    double t0 = lssar_now();
    for (;;) {
        // The round: the next pending restarts, restart-major (restart r of every search before
        // r + 1 of any), so that few of them can fall after an early stop.
        int nt = 0;
        for (int r = 0; r < maxr && nt < nr; r++)
            for (int g = 0; g < njobs && nt < nr; g++)
                if (!js[g].done && r >= js[g].next && r < jobs[g].o->restarts) round[nt++] = (sr_task){g, r};
        if (nt == 0) break;
        size_t len = 0;
        if (me < nt) {
            job_state *s = &js[round[me].job];
            const lssar_sr_options *o = s->job->o;
            int r = round[me].restart;
            run_stats st = {0};
            memset(h, 0, sizeof *h);
            double ts = lssar_now();
            rc = run_search(o, &s->cfg, &s->d, s->baseline, o->seed + (uint64_t)r * 0x9e3779b97f4a7c15ULL, h,
                            &st, t0, r, o->restarts, s->job->label ? s->job->label : "symreg");
            st.seconds = lssar_now() - ts;
            if (!rc) len = pack_outcome(mine, h, s->cfg.maxsize, &st);
            else if (failed) *failed = round[me].job;
        }
        if ((rc = lssar_dist_agree(rc))) goto out;
        char *all = NULL;
        size_t total = 0;
        if ((rc = lssar_dist_allgather_bytes(mine, len, &all, &total, counts))) goto out;
        size_t off = 0;
        for (int k = 0; k < nt && !rc; k++) {
            run_stats st;
            if (!(rc = unpack_outcome((const unsigned char *)all + off, counts[k], h, &st)) &&
                !js[round[k].job].done)
                job_merge(&js[round[k].job], h, &st);  // (a restart past an early stop is dropped)
            off += counts[k];
        }
        free(all);
        if (rc) goto out;
        // time_limit, between restarts as in one process: rank 0's clock decides for everyone.
        for (int g = 0; g < njobs; g++)
            up[g] = jobs[g].o->time_limit > 0 && lssar_now() - t0 >= jobs[g].o->time_limit;
        if ((rc = lssar_dist_bcast(up, (size_t)njobs, 0))) goto out;
        for (int g = 0; g < njobs; g++) if (up[g]) js[g].done = 1;
    }
    for (int g = 0; g < njobs && !rc; g++)
        if ((rc = job_finish(&js[g])) && failed) *failed = g;
out:
    if (rc)
        for (int g = 0; g < njobs && js; g++) if (jobs[g].res && js[g].job) lssar_sr_result_free(jobs[g].res);
    for (int g = 0; g < njobs && js; g++) free(js[g].final);
    free(js); free(round); free(counts); free(mine); free(up); free(h);
    return rc;
}

int lssar_symreg(const lssar_sr_options *o, const double *X, const double *y, int rows, int nfeat,
                 const char *const *names, lssar_sr_result *res) {
    sr_job j = {o, X, y, rows, nfeat, names, NULL, res};
    return sr_search_jobs(&j, 1, NULL);
}

void lssar_sr_result_free(lssar_sr_result *res) {
    if (!res) return;
    for (int k = 0; k < res->n; k++) free(res->front[k].equation);
    free(res->front);
    memset(res, 0, sizeof *res);
}

int lssar_sr_eval(const char *equation, const double *X, int rows, int nfeat, const char *const *names,
                  double *pred) {
    if (!equation || !X || !names || !pred) return lssar_fail(LSSAR_E_NULL, "lssar_sr_eval: NULL argument");
    if (rows < 1 || nfeat < 0) return lssar_fail(LSSAR_E_SIZE, "lssar_sr_eval: %d rows", rows);
    sr_prog p;
    int rc = sr_parse(equation, names, nfeat, &p);
    if (rc) return rc;
    sr_data d = {X, NULL, rows, nfeat, 0};
    if (sr_eval(&p, &d, pred))
        return lssar_fail(LSSAR_E_NAN, "equation '%s' is not finite on some rows", equation);
    return 0;
}
