// sequence.c - system -> sequence rows -> tokens; see sequence.h.
#include <math.h>
#include "orbits/kepler.h"
#include "orbits/sequence.h"

int orb_bin(double v) {
    const double width = (ORB_HI - ORB_LO) / ORB_BINS;   // as the released code computes it
    const double lo = ORB_LO + 1e-12, hi = ORB_HI - 1e-12;
    v = v > lo ? v : lo;                                  // NaN maps to the low end
    v = v < hi ? v : hi;
    double b = floor((v - ORB_LO) / width);
    b = b > 0.0 ? b : 0.0;
    b = b < ORB_BINS - 1.0 ? b : ORB_BINS - 1.0;
    return (int)b;
}

double orb_unbin(int b) { return ORB_LO + (b + 0.5) * ((ORB_HI - ORB_LO) / ORB_BINS); }

int orb_seq_steps(int K) { return (ORB_BODY_ROWS + K) / (K + 1); }

void orb_sequence_rows(const orb_system *s, orb_row *rows) {
    const int K = s->K;
    const double M = s->star_mass;
    const int fixed = K >= 2;
    // Solve Kepler's equation for all of a planet's steps at once (vectorised): planet k appears at
    // steps j with j (K+1) + k < 999. sE/cE of planet k, step j at [k * steps + j].
    const int steps = orb_seq_steps(K);
    orb_orbit orbit[ORB_MAX_PLANETS];
    double Mj[ORB_STEPS], sE[ORB_BODY_ROWS + ORB_MAX_PLANETS], cE[ORB_BODY_ROWS + ORB_MAX_PLANETS];
    for (int k = 0; k < K; k++) {
        orb_orbit_init(&orbit[k], &s->p[k], M);
        int nk = (ORB_BODY_ROWS - k + K) / (K + 1);  // steps in which planet k has a row
        for (int j = 0; j < nk; j++) Mj[j] = orbit[k].n * (j * s->dt + orbit[k].tau);
        orb_kepler_solve_n(Mj, orbit[k].e, nk, NULL, sE + k * steps, cE + k * steps);
    }
    int i = 0;
    for (int j = 0; i < ORB_BODY_ROWS; j++) {
        double sx = s->star_x, sy = s->star_y, svx = 0, svy = 0;  // the star (fixed when K >= 2)
        double fx = 0, fy = 0;                                      // planets' pull on the star
        for (int k = 0; k < K && i < ORB_BODY_ROWS; k++, i++) {
            const orb_planet *p = &s->p[k];
            double rel[2], vrel[2];  // star - planet
            orb_orbit_from_E(&orbit[k], sE[k * steps + j], cE[k * steps + j], rel, vrel);
            orb_row *o = &rows[i];
            o->body = k + 1;
            o->step = j;
            if (fixed) {
                o->x = sx - rel[0];  o->y = sy - rel[1];
                o->vx = -vrel[0];    o->vy = -vrel[1];
            } else {  // K = 1: both bodies move about c
                double wp = M / (M + p->m), ws = p->m / (M + p->m);
                o->x = s->cx - rel[0] * wp;  o->y = s->cy - rel[1] * wp;
                o->vx = -vrel[0] * wp;       o->vy = -vrel[1] * wp;
                sx = s->cx + rel[0] * ws;    sy = s->cy + rel[1] * ws;
                svx = vrel[0] * ws;          svy = vrel[1] * ws;
            }
            o->dx = -rel[0];   o->dy = -rel[1];
            o->dvx = -vrel[0]; o->dvy = -vrel[1];
            o->mass = p->m;
            double r2 = rel[0] * rel[0] + rel[1] * rel[1];
            o->r = sqrt(r2);
            o->F = ORB_G * p->m * M / r2;
            fx += o->F * o->dx / o->r;  // the pull on the star points to the planet (along d)
            fy += o->F * o->dy / o->r;
        }
        if (i == ORB_BODY_ROWS) break;
        orb_row *o = &rows[i++];
        o->body = 0;
        o->step = j;
        o->x = sx;   o->y = sy;
        o->vx = svx; o->vy = svy;
        o->dx = o->dy = o->dvx = o->dvy = 0;
        o->mass = M;
        o->r = 0;
        o->F = sqrt(fx * fx + fy * fy);
    }
}

void orb_sequence_tokens(const orb_system *s, const orb_row *rows, uint16_t *tok) {
    tok[0] = tok[1] = (uint16_t)s->dt_token;
    for (int i = 0; i < ORB_BODY_ROWS; i++) {
        tok[2 * (i + 1) + 0] = (uint16_t)orb_bin(rows[i].x);
        tok[2 * (i + 1) + 1] = (uint16_t)orb_bin(rows[i].y);
    }
}
