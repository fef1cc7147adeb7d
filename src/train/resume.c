// resume.c - the opening of a resumed run: its lock, recovery and stored checkpoint; see resume.h.
#include <stdio.h>
#include <sys/stat.h>
#include "core/dist.h"
#include "core/util.h"
#include "model/safetensors.h"
#include "train/resume.h"
#include "train/rundir.h"

int train_resume_lock(const char *dir, int quiet, int *locked) {
    *locked = 0;
    struct stat st;
    int rc = 0;
    // rank 0 alone under mpirun: the others read the checkpoint once it has done so
    if (lssar_dist_rank() == 0 && stat(dir, &st) == 0 && S_ISDIR(st.st_mode))
        rc = train_dir_lock(dir) || (*locked = 1, train_recover(dir, quiet));
    if (rc) rc = LSSAR_E_IO;
    if ((rc = lssar_dist_agree(rc)) && *locked) {
        train_dir_unlock(dir);
        *locked = 0;
    }
    return rc;
}

int train_read_checkpoint(const char *dir, gpt_config *c, train_state *s) {
    char tp[4096], mp[4096];
    snprintf(tp, sizeof tp, "%s/%s", dir, CKPT_TRAINER_FILE);
    snprintf(mp, sizeof mp, "%s/%s", dir, CKPT_MODEL_FILE);
    st_file f;
    int rc = ckpt_read_train_state(tp, s);
    if (!rc) rc = st_open(&f, mp);
    if (rc == LSSAR_E_IO)
        return lssar_fail(rc, "%s (train without --resume first, or point --out at an existing run)",
                          lssar_errmsg());
    if (rc) return rc;
    rc = ckpt_config_from_meta(&f, c, NULL);
    st_close(&f);
    return rc;
}
