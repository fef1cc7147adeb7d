// expr.c - postfix expressions: the operator table, vectorised evaluation and losses,
// simplification, printing for SymPy and parsing back. See sr.h.
#include <ctype.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "core/dispatch.h"
#include "symreg/sr.h"

// glibc's vector math library (libmvec, linked with -lmvec) has SIMD versions of these, accurate
// to 4 ulp; declaring them "simd" lets the `omp simd` loops below call 4 or 8 rows at a time
// instead of one (glibc declares them so itself only under -ffast-math). The evaluation entry
// points (sr_loss, sr_eval, sr_loss_of) are LSSAR_HOT (core/dispatch.h) with the block loops
// forced inline, so the AVX-512 clone calls the 8-lane variants (_ZGVeN8v_exp), the AVX2 clone
// the 4-lane ones (_ZGVdN4v_exp) and the baseline the SSE2 2-lane ones (_ZGVbN2v_exp).
#pragma omp declare simd notinbranch
double exp(double);
#pragma omp declare simd notinbranch
double log(double);
#pragma omp declare simd notinbranch
double sin(double);
#pragma omp declare simd notinbranch
double cos(double);

const char *const sr_op_names[SR_NOPS] = {
    "const", "var", "+", "-", "*", "/", "pow", "neg", "sin", "cos", "exp", "log", "inv", "sqrt",
    "square", "cube", "abs"};

int sr_arity(int op) {
    if (op <= SR_VAR) return 0;
    if (op <= SR_POW) return 2;
    return 1;
}

int sr_op_parse(const char *name) {
    static const struct { const char *alias; int op; } aliases[] = {
        {"add", SR_ADD}, {"sub", SR_SUB}, {"mul", SR_MUL}, {"div", SR_DIV}, {"**", SR_POW},
        {"^", SR_POW}, {"-x", SR_NEG}};
    for (int op = SR_ADD; op < SR_NOPS; op++) if (!strcmp(name, sr_op_names[op])) return op;
    for (size_t i = 0; i < sizeof aliases / sizeof aliases[0]; i++)
        if (!strcmp(name, aliases[i].alias)) return aliases[i].op;
    return -1;
}

int sr_subtree_start(const sr_prog *p, int i) {
    int need = 1;  // values still to be produced, walking backwards from the root
    while (need > 0) { need += sr_arity(p->n[i].op) - 1; i--; }
    return i + 1;
}

int sr_valid(const sr_prog *p) {
    if (p->len < 1 || p->len > SR_MAXLEN) return 0;
    int sp = 0;
    for (int k = 0; k < p->len; k++) {
        int op = p->n[k].op;
        if (op >= SR_NOPS) return 0;
        int a = sr_arity(op);
        if (sp < a) return 0;
        sp += 1 - a;
    }
    return sp == 1;
}

int sr_depth(const sr_prog *p) {
    int sp = 0, mx = 0;
    for (int k = 0; k < p->len; k++) { sp += 1 - sr_arity(p->n[k].op); if (sp > mx) mx = sp; }
    return mx;
}

int sr_splice(sr_prog *p, int s, int e, const sr_node *seq, int m) {
    int newlen = p->len - (e - s + 1) + m;
    if (newlen > SR_MAXLEN || newlen < 1) return 0;
    sr_node tail[SR_MAXLEN];
    int ntail = p->len - e - 1;
    memcpy(tail, p->n + e + 1, ntail * sizeof(sr_node));
    memmove(p->n + s, seq, m * sizeof(sr_node));  // seq may live inside p (callers copy first)
    memcpy(p->n + s + m, tail, ntail * sizeof(sr_node));
    p->len = newlen;
    return 1;
}

/* ------------------------------------------------------------------ evaluation */
// Scalar op, shared by constant folding and the parser.
static double apply_op(int op, double a, double b) {
    switch (op) {
    case SR_ADD: return a + b;
    case SR_SUB: return a - b;
    case SR_MUL: return a * b;
    case SR_DIV: return a / b;
    case SR_POW: return pow(a, b);
    case SR_NEG: return -a;
    case SR_SIN: return sin(a);
    case SR_COS: return cos(a);
    case SR_EXP: return exp(a);
    case SR_LOG: return log(a);
    case SR_INV: return 1.0 / a;
    case SR_SQRT: return sqrt(a);
    case SR_SQUARE: return a * a;
    case SR_CUBE: return a * a * a;
    case SR_ABS: return fabs(a);
    }
    return NAN;
}

// 0 if every x[i] is finite, NaN otherwise (inf*0 = NaN). Used on the inputs of the operators that
// can map a non-finite value to a finite one (x/inf = 0, exp(-inf) = 0, pow), so an overflow inside
// an expression can never hide behind them.
#define SR_INLINE static inline __attribute__((always_inline))
SR_INLINE double nonfinite_probe(const double *x, int m) {
    double s = 0;
#pragma omp simd reduction(+ : s)
    for (int i = 0; i < m; i++) s += x[i] * 0.0;
    return s;
}

// Evaluate rows [r0, r0 + m) of p. Stack slot k writes into buf[k]; a feature leaf points straight
// into X (no copy). Returns the row-vector of results; adds NaN to *chk on a hidden overflow.
SR_INLINE const double *eval_block(const sr_prog *p, const sr_data *d, int r0, int m,
                                double (*buf)[SR_BLK], double *chk) {
    const double *st[SR_MAXLEN];
    int sp = 0;
    for (int k = 0; k < p->len; k++) {
        const sr_node *nd = &p->n[k];
        int op = nd->op;
        if (op == SR_CONST) {
            double *o = buf[sp], c = nd->c;
            for (int i = 0; i < m; i++) o[i] = c;
            st[sp++] = o;
            continue;
        }
        if (op == SR_VAR) { st[sp++] = d->X + (size_t)nd->feat * d->n + r0; continue; }
        if (sr_arity(op) == 2) {
            const double *a = st[sp - 2], *b = st[sp - 1];
            double *o = buf[sp - 2];  // may alias a (same index): safe elementwise
            switch (op) {
            case SR_ADD: for (int i = 0; i < m; i++) o[i] = a[i] + b[i]; break;
            case SR_SUB: for (int i = 0; i < m; i++) o[i] = a[i] - b[i]; break;
            case SR_MUL: for (int i = 0; i < m; i++) o[i] = a[i] * b[i]; break;
            case SR_DIV:
                *chk += nonfinite_probe(b, m);
                for (int i = 0; i < m; i++) o[i] = a[i] / b[i];
                break;
            case SR_POW:
                *chk += nonfinite_probe(a, m) + nonfinite_probe(b, m);
                for (int i = 0; i < m; i++) o[i] = pow(a[i], b[i]);
                break;
            }
            st[sp - 2] = o;
            sp--;
        } else {
            const double *a = st[sp - 1];
            double *o = buf[sp - 1];
            switch (op) {
            case SR_NEG: for (int i = 0; i < m; i++) o[i] = -a[i]; break;
            case SR_SIN:
#pragma omp simd
                for (int i = 0; i < m; i++) o[i] = sin(a[i]);
                break;
            case SR_COS:
#pragma omp simd
                for (int i = 0; i < m; i++) o[i] = cos(a[i]);
                break;
            case SR_EXP:
                *chk += nonfinite_probe(a, m);
#pragma omp simd
                for (int i = 0; i < m; i++) o[i] = exp(a[i]);
                break;
            case SR_LOG:
#pragma omp simd
                for (int i = 0; i < m; i++) o[i] = log(a[i]);
                break;
            case SR_INV:
                *chk += nonfinite_probe(a, m);
                for (int i = 0; i < m; i++) o[i] = 1.0 / a[i];
                break;
            case SR_SQRT: for (int i = 0; i < m; i++) o[i] = sqrt(a[i]); break;
            case SR_SQUARE: for (int i = 0; i < m; i++) o[i] = a[i] * a[i]; break;
            case SR_CUBE: for (int i = 0; i < m; i++) o[i] = a[i] * a[i] * a[i]; break;
            case SR_ABS: for (int i = 0; i < m; i++) o[i] = fabs(a[i]); break;
            }
            st[sp - 1] = o;
        }
    }
    return st[0];
}

#define SR_STACK (SR_MAXLEN / 2 + 2)

// Sum of the per-row loss over one block.
SR_INLINE double block_loss(int loss, const double *pr, const double *y, int m) {
    double s = 0;
    switch (loss) {
    case LSSAR_SR_L1:
#pragma omp simd reduction(+ : s)
        for (int i = 0; i < m; i++) s += fabs(pr[i] - y[i]);
        break;
    case LSSAR_SR_L1DZ:
#pragma omp simd reduction(+ : s)
        for (int i = 0; i < m; i++) s += fmax(fabs(pr[i] - y[i]), 1e-8) - 1e-8;
        break;
    case LSSAR_SR_REL:
#pragma omp simd reduction(+ : s)
        for (int i = 0; i < m; i++) s += fabs(pr[i] - y[i]) / fabs(y[i]);
        break;
    default:
#pragma omp simd reduction(+ : s)
        for (int i = 0; i < m; i++) { double e = pr[i] - y[i]; s += e * e; }
    }
    return s;
}

LSSAR_HOT double sr_loss(const sr_prog *p, const sr_data *d) {
    double buf[SR_STACK][SR_BLK];
    double sum = 0, chk = 0;
    for (int r0 = 0; r0 < d->n; r0 += SR_BLK) {
        int m = d->n - r0 < SR_BLK ? d->n - r0 : SR_BLK;
        const double *pr = eval_block(p, d, r0, m, buf, &chk);
        sum += block_loss(d->loss, pr, d->y + r0, m);
        if (!isfinite(sum + chk)) return INFINITY;  // already rejected: skip the remaining rows
    }
    sum += chk;
    return isfinite(sum) ? sum / d->n : INFINITY;
}

LSSAR_HOT int sr_eval(const sr_prog *p, const sr_data *d, double *pred) {
    double buf[SR_STACK][SR_BLK];
    double chk = 0, s = 0;
    for (int r0 = 0; r0 < d->n; r0 += SR_BLK) {
        int m = d->n - r0 < SR_BLK ? d->n - r0 : SR_BLK;
        const double *pr = eval_block(p, d, r0, m, buf, &chk);
        memcpy(pred + r0, pr, m * sizeof(double));
        s += nonfinite_probe(pr, m);
    }
    return isfinite(s + chk) ? 0 : -1;
}

LSSAR_HOT double sr_loss_of(const double *pred, const sr_data *d) {
    double s = block_loss(d->loss, pred, d->y, d->n);
    return isfinite(s) ? s / d->n : INFINITY;
}

/* ------------------------------------------------------------------ simplification */
static int same_range(const sr_node *a, const sr_node *b, int m) {
    for (int i = 0; i < m; i++)
        if (a[i].op != b[i].op || (a[i].op == SR_VAR && a[i].feat != b[i].feat) ||
            (a[i].op == SR_CONST && a[i].c != b[i].c))
            return 0;
    return 1;
}

static sr_node mkconst(double c) { sr_node n = {SR_CONST, 0, 0, c}; return n; }

// One left-to-right pass rebuilding p: each finished subtree sits at the end of `out`, so folding
// it means truncating `out` and appending the replacement.
static int simplify_impl(sr_prog *p, int full) {
    sr_prog out = {0};
    int start[SR_MAXLEN], sp = 0;  // start of each finished subtree in out
    for (int k = 0; k < p->len; k++) {
        sr_node nd = p->n[k];
        int a = sr_arity(nd.op);
        if (a == 0) { start[sp++] = out.len; out.n[out.len++] = nd; continue; }
        if (a == 1) {
            int s = start[sp - 1];
            if (out.len - s == 1 && out.n[s].op == SR_CONST) {  // f(c) -> c'
                double v = apply_op(nd.op, out.n[s].c, 0);
                if (isfinite(v)) { out.n[s].c = v; continue; }
            }
            // log(exp(x)) -> x
            if (full && nd.op == SR_LOG && out.n[out.len - 1].op == SR_EXP) { out.len--; continue; }
            // exp(log(x)) -> x: equal wherever log(x) is finite, which the search guarantees on the data.
            if (full && nd.op == SR_EXP && out.n[out.len - 1].op == SR_LOG) { out.len--; continue; }
            // -(-x) -> x
            if (full && nd.op == SR_NEG && out.n[out.len - 1].op == SR_NEG) { out.len--; continue; }
            out.n[out.len++] = nd;
            continue;
        }
        int sa = start[sp - 2], sb = start[sp - 1], e = out.len;  // A = [sa, sb), B = [sb, e)
        int la = sb - sa, lb = e - sb;
        int ca = la == 1 && out.n[sa].op == SR_CONST, cb = lb == 1 && out.n[sb].op == SR_CONST;
        sp--;
        if (ca && cb) {  // c1 op c2 -> c
            double v = apply_op(nd.op, out.n[sa].c, out.n[sb].c);
            if (isfinite(v)) { out.n[sa] = mkconst(v); out.len = sa + 1; continue; }
        }
        // x - c -> x + (-c), so that constants in chains of sums fold together below.
        if (full && nd.op == SR_SUB && cb && !ca) { out.n[sb].c = -out.n[sb].c; nd.op = SR_ADD; }
        // x*(-1), (-1)*x, x/(-1) -> -x
        if (full && ((cb && (nd.op == SR_MUL || nd.op == SR_DIV) && out.n[sb].c == -1.0) ||
                     (ca && nd.op == SR_MUL && out.n[sa].c == -1.0))) {
            if (ca) memmove(out.n + sa, out.n + sb, lb * sizeof(sr_node));
            out.len = sa + (ca ? lb : la);
            if (out.n[out.len - 1].op == SR_NEG) out.len--;  // -(-x) -> x
            else { sr_node neg = {SR_NEG, 0, 0, 0}; out.n[out.len++] = neg; }
            continue;
        }
        // c*(-x), (-x)*c, c/(-x), (-x)/c -> the sign moves into the constant
        if (full && (nd.op == SR_MUL || nd.op == SR_DIV) && (ca != cb) &&
            out.n[ca ? e - 1 : sb - 1].op == SR_NEG) {
            int xe = ca ? e - 1 : sb - 1;           // the NEG node ending the non-constant operand
            int ci = ca ? sa : sb;
            out.n[ci].c = -out.n[ci].c;
            memmove(out.n + xe, out.n + xe + 1, (e - xe - 1) * sizeof(sr_node));
            out.len = e - 1;
            out.n[out.len++] = nd;
            continue;
        }
        // c1 - (Y + c2) -> (c1 - c2) - Y: the search often splits one constant in two this way.
        if (full && nd.op == SR_SUB && ca && !cb && out.n[e - 1].op == SR_ADD && lb >= 3) {
            int rs = sr_subtree_start(&out, e - 2), ys = -1, ye = -1;
            double c2 = 0;
            if (rs == sb + 1 && out.n[sb].op == SR_CONST) { c2 = out.n[sb].c; ys = sb + 1; ye = e - 1; }
            else if (out.n[e - 2].op == SR_CONST) { c2 = out.n[e - 2].c; ys = sb; ye = e - 2; }
            if (ys >= 0) {
                sr_node y[SR_MAXLEN];
                int ly = ye - ys;
                memcpy(y, out.n + ys, ly * sizeof(sr_node));
                out.n[sa] = mkconst(out.n[sa].c - c2);
                memcpy(out.n + sa + 1, y, ly * sizeof(sr_node));
                out.len = sa + 1 + ly;
                out.n[out.len++] = nd;
                continue;
            }
        }
        // Identities that drop an operand: x*1, 1*x, x+0, 0+x, x-0, x/1.
        if ((cb && ((nd.op == SR_MUL || nd.op == SR_DIV) && out.n[sb].c == 1.0)) ||
            (cb && ((nd.op == SR_ADD || nd.op == SR_SUB) && out.n[sb].c == 0.0))) {
            out.len = sb;
            continue;
        }
        if (full && ca && nd.op == SR_SUB && out.n[sa].c == 0.0) {  // 0 - x -> -x
            memmove(out.n + sa, out.n + sb, lb * sizeof(sr_node));
            out.len = sa + lb;
            sr_node neg = {SR_NEG, 0, 0, 0};
            out.n[out.len++] = neg;
            continue;
        }
        if (ca && ((nd.op == SR_MUL && out.n[sa].c == 1.0) || (nd.op == SR_ADD && out.n[sa].c == 0.0))) {
            memmove(out.n + sa, out.n + sb, lb * sizeof(sr_node));
            out.len = sa + lb;
            continue;
        }
        // x - x -> 0, x / x -> 1 (structurally equal operands).
        if ((nd.op == SR_SUB || nd.op == SR_DIV) && la == lb && same_range(out.n + sa, out.n + sb, la)) {
            out.n[sa] = mkconst(nd.op == SR_SUB ? 0.0 : 1.0);
            out.len = sa + 1;
            continue;
        }
        // x + x -> 2 * x
        if (nd.op == SR_ADD && la == lb && same_range(out.n + sa, out.n + sb, la)) {
            memmove(out.n + sa + 1, out.n + sa, la * sizeof(sr_node));
            out.n[sa] = mkconst(2.0);
            out.len = sa + 1 + la;
            sr_node mul = {SR_MUL, 0, 0, 0};
            out.n[out.len++] = mul;
            continue;
        }
        // c1 * (c2 * Y) -> (c1 c2) * Y, and the same for +: keeps one constant per product/sum.
        if ((nd.op == SR_MUL || nd.op == SR_ADD) && (ca || cb)) {
            int xs = ca ? sb : sa, xe = ca ? e : sb;  // the non-constant operand X = [xs, xe)
            double c1 = ca ? out.n[sa].c : out.n[sb].c;
            if (out.n[xe - 1].op == nd.op && xe - xs >= 3) {
                int ys = -1, ye = -1;
                double c2 = 0;
                // X = op(L, R): R ends at xe - 2, L is [xs, start of R). Either may be the constant.
                int rs = sr_subtree_start(&out, xe - 2);
                if (rs == xs + 1 && out.n[xs].op == SR_CONST) { c2 = out.n[xs].c; ys = xs + 1; ye = xe - 1; }
                else if (out.n[xe - 2].op == SR_CONST) { c2 = out.n[xe - 2].c; ys = xs; ye = xe - 2; }
                if (ys >= 0) {
                    double v = nd.op == SR_MUL ? c1 * c2 : c1 + c2;
                    sr_node y[SR_MAXLEN];
                    int ly = ye - ys;
                    memcpy(y, out.n + ys, ly * sizeof(sr_node));
                    out.len = sa;
                    int identity = full && (nd.op == SR_MUL ? v == 1.0 : v == 0.0);  // (x + c) - c -> x
                    if (!identity) out.n[out.len++] = mkconst(v);
                    memcpy(out.n + out.len, y, ly * sizeof(sr_node));
                    out.len += ly;
                    if (!identity) out.n[out.len++] = nd;
                    continue;
                }
            }
        }
        out.n[out.len++] = nd;
    }
    int changed = out.len != p->len || !same_range(out.n, p->n, out.len);
    if (changed && !sr_valid(&out)) return 0;  // defensive: never hand back a malformed program
    if (changed) *p = out;
    return changed;
}

int sr_simplify(sr_prog *p) { return simplify_impl(p, 0); }
int sr_simplify_full(sr_prog *p) { return simplify_impl(p, 1); }

/* ------------------------------------------------------------------ printing */
// Every non-leaf prints as "(...)" or "f(...)" so no precedence rule of SymPy can regroup it.
char *sr_to_string(const sr_prog *p, const char *const *names) {
    char *st[SR_MAXLEN];
    int sp = 0;
    for (int k = 0; k < p->len; k++) {
        const sr_node *nd = &p->n[k];
        char *s = NULL;
        int a = sr_arity(nd->op);
        if (nd->op == SR_CONST) {
            char num[40];
            snprintf(num, sizeof num, "%.10g", nd->c);
            if (nd->c < 0) { if (asprintf(&s, "(%s)", num) < 0) s = NULL; }
            else s = strdup(num);
        } else if (nd->op == SR_VAR) {
            s = strdup(names[nd->feat]);
        } else if (a == 2) {
            const char *sym = nd->op == SR_ADD ? " + " : nd->op == SR_SUB ? " - " : nd->op == SR_MUL ? "*"
                            : nd->op == SR_DIV ? "/" : "**";
            const sr_node *rhs = &p->n[k - 1];
            if (nd->op == SR_ADD && rhs->op == SR_CONST && rhs->c < 0) {  // x + (-c) reads x - c
                char num[40];
                snprintf(num, sizeof num, "%.10g", -rhs->c);
                if (asprintf(&s, "(%s - %s)", st[sp - 2], num) < 0) s = NULL;
            } else if (asprintf(&s, "(%s%s%s)", st[sp - 2], sym, st[sp - 1]) < 0) s = NULL;
            free(st[sp - 2]); free(st[sp - 1]);
            sp -= 2;
        } else {
            const char *x = st[sp - 1];
            int r;
            switch (nd->op) {
            case SR_NEG: r = asprintf(&s, "(-%s)", x); break;
            case SR_INV: r = asprintf(&s, "(1/%s)", x); break;
            case SR_SQUARE: r = asprintf(&s, "(%s**2)", x); break;
            case SR_CUBE: r = asprintf(&s, "(%s**3)", x); break;
            default: r = asprintf(&s, "%s(%s)", sr_op_names[nd->op], x); break;
            }
            if (r < 0) s = NULL;
            free(st[sp - 1]);
            sp--;
        }
        if (!s) { for (int i = 0; i < sp; i++) free(st[i]); return NULL; }
        st[sp++] = s;
    }
    if (sp != 1) { for (int i = 0; i < sp; i++) free(st[i]); return NULL; }
    // Drop one pair of outer parentheses when they enclose the whole string.
    char *s = st[0];
    size_t n = strlen(s);
    if (n >= 2 && s[0] == '(' && s[n - 1] == ')') {
        int depth = 0, whole = 1;
        for (size_t i = 0; i < n - 1; i++) {
            depth += s[i] == '(' ? 1 : s[i] == ')' ? -1 : 0;
            if (depth == 0) { whole = 0; break; }
        }
        if (whole) { memmove(s, s + 1, n - 2); s[n - 2] = 0; }
    }
    return s;
}

/* ------------------------------------------------------------------ parsing */
// Recursive descent emitting postfix directly (Python precedence: ** binds tighter than unary -).
typedef struct {
    const char *s, *pos;
    const char *const *names;
    int nf;
    sr_prog *p;
    int err;
    char msg[200];
} parser;

static void skip(parser *ps) { while (isspace((unsigned char)*ps->pos)) ps->pos++; }

static void emit(parser *ps, sr_node nd) {
    if (ps->err) return;
    if (ps->p->len >= SR_MAXLEN) {
        ps->err = 1;
        snprintf(ps->msg, sizeof ps->msg, "expression longer than %d nodes", SR_MAXLEN);
        return;
    }
    ps->p->n[ps->p->len++] = nd;
}

static void perr(parser *ps, const char *what) {
    if (ps->err) return;
    ps->err = 1;
    snprintf(ps->msg, sizeof ps->msg, "%s at offset %d of '%s'", what, (int)(ps->pos - ps->s), ps->s);
}

static void parse_expr(parser *ps);
static void parse_unary(parser *ps);

static void parse_atom(parser *ps) {
    skip(ps);
    const char *c = ps->pos;
    if (*c == '(') {
        ps->pos++;
        parse_expr(ps);
        skip(ps);
        if (*ps->pos != ')') { perr(ps, "expected ')'"); return; }
        ps->pos++;
        return;
    }
    if (isdigit((unsigned char)*c) || *c == '.') {
        char *end;
        double v = strtod(c, &end);
        if (end == c) { perr(ps, "bad number"); return; }
        ps->pos = end;
        emit(ps, mkconst(v));
        return;
    }
    if (isalpha((unsigned char)*c) || *c == '_') {
        const char *e = c;
        while (isalnum((unsigned char)*e) || *e == '_') e++;
        int len = (int)(e - c);
        ps->pos = e;
        skip(ps);
        if (*ps->pos == '(') {  // function call
            char fn[16] = {0};
            if (len < (int)sizeof fn) memcpy(fn, c, len);
            int op = sr_op_parse(fn);
            if (!strcmp(fn, "Abs")) op = SR_ABS;
            if (op < 0 || sr_arity(op) != 1) { perr(ps, "unknown function"); return; }
            ps->pos++;
            parse_expr(ps);
            skip(ps);
            if (*ps->pos != ')') { perr(ps, "expected ')' after function argument"); return; }
            ps->pos++;
            sr_node nd = {(uint8_t)op, 0, 0, 0};
            emit(ps, nd);
            return;
        }
        for (int f = 0; f < ps->nf; f++)
            if ((int)strlen(ps->names[f]) == len && !strncmp(ps->names[f], c, len)) {
                sr_node nd = {SR_VAR, 0, (uint16_t)f, 0};
                emit(ps, nd);
                return;
            }
        if (len == 2 && !strncmp(c, "pi", 2)) { emit(ps, mkconst(M_PI)); return; }
        ps->pos = c;
        perr(ps, "unknown name (not a feature)");
        return;
    }
    perr(ps, *c ? "unexpected character" : "unexpected end");
}

static void parse_power(parser *ps) {
    parse_atom(ps);
    skip(ps);
    if (ps->pos[0] == '*' && ps->pos[1] == '*') {
        ps->pos += 2;
        int at = ps->p->len;
        parse_unary(ps);  // right-associative, and 2**-1 is allowed
        if (ps->err) return;
        // x**2, x**3, x**0.5 map to the cheaper unary operators.
        if (ps->p->len == at + 1 && ps->p->n[at].op == SR_CONST) {
            double e = ps->p->n[at].c;
            int op = e == 2 ? SR_SQUARE : e == 3 ? SR_CUBE : e == 0.5 ? SR_SQRT : e == -1 ? SR_INV : -1;
            if (op >= 0) { ps->p->len = at; sr_node nd = {(uint8_t)op, 0, 0, 0}; emit(ps, nd); return; }
        }
        sr_node nd = {SR_POW, 0, 0, 0};
        emit(ps, nd);
    }
}

static void parse_unary(parser *ps) {
    skip(ps);
    if (*ps->pos == '-' || *ps->pos == '+') {
        int neg = *ps->pos == '-';
        ps->pos++;
        int at = ps->p->len;
        parse_unary(ps);
        if (!neg || ps->err) return;
        if (ps->p->len == at + 1 && ps->p->n[at].op == SR_CONST) { ps->p->n[at].c = -ps->p->n[at].c; return; }
        sr_node nd = {SR_NEG, 0, 0, 0};
        emit(ps, nd);
        return;
    }
    parse_power(ps);
}

static void parse_term(parser *ps) {
    parse_unary(ps);
    for (;;) {
        skip(ps);
        char c = *ps->pos;
        if (c == '*' && ps->pos[1] != '*') {
            ps->pos++;
            parse_unary(ps);
            sr_node nd = {SR_MUL, 0, 0, 0};
            emit(ps, nd);
        }
        else if (c == '/') { ps->pos++; parse_unary(ps); sr_node nd = {SR_DIV, 0, 0, 0}; emit(ps, nd); }
        else return;
        if (ps->err) return;
    }
}

static void parse_expr(parser *ps) {
    parse_term(ps);
    for (;;) {
        skip(ps);
        char c = *ps->pos;
        if (c != '+' && c != '-') return;
        ps->pos++;
        parse_term(ps);
        sr_node nd = {(uint8_t)(c == '+' ? SR_ADD : SR_SUB), 0, 0, 0};
        emit(ps, nd);
        if (ps->err) return;
    }
}

int sr_parse(const char *s, const char *const *names, int nf, sr_prog *p) {
    if (!s || !p) return lssar_fail(LSSAR_E_NULL, "sr_parse: NULL argument");
    parser ps = {s, s, names, nf, p, 0, {0}};
    p->len = 0;
    parse_expr(&ps);
    skip(&ps);
    if (!ps.err && *ps.pos) perr(&ps, "unexpected text after the expression");
    if (!ps.err && !sr_valid(p)) perr(&ps, "incomplete expression");
    if (ps.err) return lssar_fail(LSSAR_E_ARG, "cannot parse equation: %s", ps.msg);
    return 0;
}
