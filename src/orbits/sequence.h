/*
 * sequence.h - one system -> one training sequence of 1000 rows, and the position binning.
 *
 * Row 0 is the dt token (7000 = 1 week, 7001 = 6 months, in both channels). Rows 1..999 are
 * positions, time-major and body-minor: planet_1(t0) .. planet_K(t0), star(t0), planet_1(t1), ...
 * truncated to 999 position rows, i.e. steps 0 .. ceil(999 / (K+1)) - 1 (at most 500).
 * Each position row has two channels, x and y, each binned into 7000 uniform bins over [-50, 50] AU.
 */
#ifndef LSSAR_ORBITS_SEQUENCE_H
#define LSSAR_ORBITS_SEQUENCE_H

#include <stdint.h>
#include "orbits/sample.h"

#define ORB_ROWS 1000               // rows per sequence, the dt row included
#define ORB_BODY_ROWS (ORB_ROWS - 1)
#define ORB_BINS 7000
#define ORB_VOCAB 7003              // 7000 bins, 2 dt tokens, 1 spare
#define ORB_LO (-50.0)
#define ORB_HI 50.0

/* Physical state of one position row (double precision). */
typedef struct {
    int body;        // 0 = the star, 1..K = planets (the CSV's numbering)
    int step;        // time step; t = step * dt
    double x, y;     // absolute position (AU)
    double vx, vy;   // absolute velocity (AU/yr)
    double dx, dy;   // position relative to the star, body - star (0 for the star)
    double dvx, dvy; // velocity relative to the star (0 for the star)
    double mass;     // the body's mass (Msun)
    double r;        // distance to the star (0 for the star)
    double F;        // |F|: planet G m M / r^2; star: |sum of the planets' pulls| on it
} orb_row;

/* Bin a coordinate as the released code does: clip to [lo + 1e-12, hi - 1e-12], then
   floor((v - lo) / width), width = 100 / 7000, clipped to [0, 6999]. NaN maps to bin 0. */
int orb_bin(double v);
/* The bin's midpoint lo + (b + 0.5) width. */
double orb_unbin(int b);

/* Number of time steps a K-planet sequence covers: ceil(999 / (K + 1)). */
int orb_seq_steps(int K);

/* The 999 position rows of system s (rows[i] is sequence row i + 1). */
void orb_sequence_rows(const orb_system *s, orb_row *rows /* (999) */);
/* Tokens of the sequence: (1000, 2) uint16, row 0 the dt token. */
void orb_sequence_tokens(const orb_system *s, const orb_row *rows, uint16_t *tok /* (1000, 2) */);

#endif
