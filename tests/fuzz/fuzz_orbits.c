// fuzz_orbits.c - the orbit files (src/orbits/format.c): NAME_systems.bin (orb_meta_open) and
// NAME_state.bin (orb_state_open); every system record that the reader accepts is then turned
// into its sequence (orb_sequence_rows, orb_sequence_tokens, orb_state_fill), as the evaluators do.
// The sequences' token shards (channels = 2) are fuzz_shard's.
#include "fuzz_common.h"
#include "orbits/format.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    char path[64];
    int fd = fuzz_memfile(data, size, path);
    orb_meta m;
    if (orb_meta_open(&m, path) == 0) {
        orb_row *rows = malloc(sizeof *rows * ORB_BODY_ROWS);
        uint16_t *tok = malloc(sizeof *tok * ORB_ROWS * 2);
        float *st = malloc(sizeof *st * ORB_ROWS * ORB_S_FIELDS);
        for (int64_t i = 0; i < m.n && i < 4; i++) {
            orb_system s;
            memcpy(&s, &m.sys[i], sizeof s);
            orb_sequence_rows(&s, rows);
            orb_sequence_tokens(&s, rows, tok);
            orb_state_fill(&s, rows, st);
            for (int r = 0; r < ORB_ROWS * 2; r++) if (tok[r] >= ORB_VOCAB) abort();
        }
        free(rows); free(tok); free(st);
        orb_meta_close(&m);
    }
    orb_state s;
    if (orb_state_open(&s, path) == 0) {
        fuzz_touch(s.rows, (size_t)s.n * ORB_ROWS * ORB_S_FIELDS * sizeof(float));
        orb_state_close(&s);
    }
    close(fd);
    return 0;
}
