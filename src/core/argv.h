/*
 * argv.h - a command line built argument by argument: the steps of a plan (src/exp/plan.h) and
 * the commands that pipelines print are lssar command lines held this way.
 */
#ifndef LSSAR_CORE_ARGV_H
#define LSSAR_CORE_ARGV_H

/* A command line built flag by flag, for pipelines that run commands in-process (lssar recipe,
   orbits run): v[0..n-1] then NULL, as argv. args_add formats one argument (at most ARGS_VEC_MAX
   of them; a longer line is cut off); args_clear frees them for the next command. */
#define ARGS_VEC_MAX 79
typedef struct { int n; char *v[ARGS_VEC_MAX + 1]; } args_vec;
void args_add(args_vec *a, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void args_clear(args_vec *a);
/* The command as one shell line: prefix (e.g. "lssar orbits"), then the arguments, each quoted
   when a shell would split or expand it. Malloc'd (NULL when out of memory). */
char *args_line(const args_vec *a, const char *prefix);

#endif
