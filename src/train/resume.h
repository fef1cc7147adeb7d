/*
 * resume.h - what `lssar train --resume` does before it compares its flags with the run: lock the
 * run directory and complete a checkpoint that a kill left half moved (rank 0 under mpirun, the
 * others waiting for it), then read the stored model config and trainer state.
 */
#ifndef LSSAR_TRAIN_RESUME_H
#define LSSAR_TRAIN_RESUME_H

#include "model/checkpoint.h"

/* Rank 0 locks an existing dir and recovers its checkpoint; every rank learns the outcome. 0 with
   *locked set when this rank holds the lock (train_dir_unlock it), or LSSAR_E_IO (nothing held). */
int train_resume_lock(const char *dir, int quiet, int *locked);

/* The config of dir's model file and the state of its trainer file. A missing file: LSSAR_E_IO
   with a message saying to train without --resume first. */
int train_read_checkpoint(const char *dir, gpt_config *c, train_state *s);

#endif
