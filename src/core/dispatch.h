/*
 * dispatch.h - runtime CPU dispatch for the hot loops (internal).
 *
 * The library is built for the x86-64-v2 baseline so that it runs on any x86-64 CPU. A function
 * marked LSSAR_HOT is compiled three times, for AVX-512 (x86-64-v4), AVX2 + FMA (x86-64-v3) and
 * the baseline, and the dynamic loader picks the best clone for the CPU it runs on (GCC
 * target_clones, an ifunc). static inline helpers called from it are inlined into each clone and
 * compiled for that clone's target, so one source serves all three. The files holding hot loops
 * are built with -ffp-contract=fast (Makefile), so a * b + c becomes one FMA in the clones that
 * have it. With `make NATIVE=1` everything is built for the build machine and LSSAR_HOT is empty.
 */
#ifndef LSSAR_DISPATCH_H
#define LSSAR_DISPATCH_H

#if defined(LSSAR_NATIVE) || !defined(__x86_64__) || !defined(__GNUC__) || defined(__clang__)
#define LSSAR_HOT
#else
#define LSSAR_HOT __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#endif

#endif
