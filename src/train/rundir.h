/*
 * rundir.h - what makes a run directory (--out) safe against kills and full disks: its lock
 * (run_lock.c), its checkpoint pair (ckpt_pair.c) and its log (run_log.c). train_run does all of
 * this itself; `lssar train` takes the lock earlier too. Internal to the trainer (train.h).
 *
 *   - train_dir_lock takes an exclusive flock on DIR/.lock (DIR must exist), held until
 *     train_dir_unlock; a second process gets LSSAR_E_IO with a message naming the holder's pid.
 *     The kernel releases it when the holder dies, so a killed run never blocks its resume. Counted
 *     per process: taking it again in the same process succeeds.
 *   - Checkpoints are written as a pair into DIR/.ckpt-next/, marked whole (COMPLETE), then renamed
 *     into DIR; train_recover (call it holding the lock, before reading DIR) completes a move that
 *     a kill interrupted and removes what killed writers left (temporary files, an unmarked pair).
 *     So after a kill at any moment, DIR holds the last checkpoint whole, both files at one step.
 *   - On resume, log.jsonl loses the lines of steps after the checkpoint (they are run again).
 *   - A failed write (disk full: ENOSPC; a file size limit: EFBIG) is LSSAR_E_IO naming the file
 *     and the fix; the previous checkpoint stays as it was.
 */
#ifndef LSSAR_RUNDIR_H
#define LSSAR_RUNDIR_H

#include <stdint.h>
#include <stdio.h>
#include "../model/gpt.h"
#include "../model/checkpoint.h"

struct cJSON;   // <cJSON.h>: only its users include it

int train_dir_lock(const char *dir);
void train_dir_unlock(const char *dir);

/* Completes or discards an interrupted checkpoint in dir (quiet: no note on stderr). */
int train_recover(const char *dir, int quiet);
/* Writes the model and trainer state of s as dir's checkpoint, both files or neither. */
int train_ckpt_save(const char *dir, const gpt *m, const train_state *s);

/* Appends o (a cJSON object, freed here) to the log f as one line, flushed; f NULL: nothing. path
   names f in the error. */
int train_log_line(FILE *f, const char *path, struct cJSON *o);
/* Drops the lines of steps after `step`, and a line cut short, from the log at path (no log:
   nothing to do). */
int train_log_trim(const char *path, int64_t step);

#endif
