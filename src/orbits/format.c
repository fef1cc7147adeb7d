// format.c - the orbit metadata and state files: fill, map, name; see format.h.
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include "orbits/format.h"

_Static_assert(sizeof(orb_meta_header) == 64, "orb_meta_header must be 64 bytes");
_Static_assert(sizeof(orb_state_header) == 64, "orb_state_header must be 64 bytes");

void orb_state_fill(const orb_system *s, const orb_row *rows, float *out) {
    memset(out, 0, sizeof(float) * ORB_S_FIELDS);  // row 0: the dt row
    for (int i = 0; i < ORB_BODY_ROWS; i++) {
        const orb_row *r = &rows[i];
        float *o = out + (size_t)(i + 1) * ORB_S_FIELDS;
        o[ORB_S_X] = (float)r->x;     o[ORB_S_Y] = (float)r->y;
        o[ORB_S_VX] = (float)r->vx;   o[ORB_S_VY] = (float)r->vy;
        o[ORB_S_DX] = (float)r->dx;   o[ORB_S_DY] = (float)r->dy;
        o[ORB_S_DVX] = (float)r->dvx; o[ORB_S_DVY] = (float)r->dvy;
        o[ORB_S_R] = (float)r->r;
        o[ORB_S_MASS] = (float)r->mass;
        o[ORB_S_STAR_MASS] = (float)s->star_mass;
        o[ORB_S_F] = (float)r->F;
    }
}

// Map a whole file read-only; *len its size.
static int map_file(const char *path, void **map, size_t *len) {
    int fd = open(path, O_RDONLY);
    if (fd < 0)
        return lssar_fail(LSSAR_E_IO, "cannot open %s: %s (run `lssar orbits simulate` to create it)", path,
                          strerror(errno));
    struct stat st;
    if (fstat(fd, &st) != 0) {
        close(fd);
        return lssar_fail(LSSAR_E_IO, "cannot stat %s: %s", path, strerror(errno));
    }
    *len = (size_t)st.st_size;
    if (*len < 64) {
        close(fd);
        return lssar_fail(LSSAR_E_FORMAT, "%s is %zu bytes, shorter than its 64-byte header: truncated or "
                          "not an orbits file", path, *len);
    }
    *map = mmap(NULL, *len, PROT_READ, MAP_PRIVATE, fd, 0);
    close(fd);
    if (*map == MAP_FAILED) return lssar_fail(LSSAR_E_IO, "cannot map %s: %s", path, strerror(errno));
    return 0;
}

int orb_meta_open(orb_meta *m, const char *path) {
    memset(m, 0, sizeof *m);
    int rc = map_file(path, &m->map, &m->len);
    if (rc) return rc;
    const orb_meta_header *h = m->map;
    if (memcmp(h->magic, ORB_META_MAGIC, 8) != 0)
        rc = lssar_fail(LSSAR_E_FORMAT, "%s: bad magic (expected %s): not an orbits systems file", path,
                        ORB_META_MAGIC);
    else if (h->version != ORB_FORMAT_VERSION || h->record_size != (int32_t)sizeof(orb_system))
        rc = lssar_fail(LSSAR_E_FORMAT, "%s: version %d / record size %d not supported (expected %d / "
                        "%zu); regenerate it", path, h->version, h->record_size, ORB_FORMAT_VERSION,
                        sizeof(orb_system));
    else if (h->systems < 0 || (uint64_t)h->systems > (m->len - 64) / sizeof(orb_system) ||
             m->len != 64 + (size_t)h->systems * sizeof(orb_system))
        rc = lssar_fail(LSSAR_E_FORMAT, "%s: header says %lld systems but the file is %zu bytes: truncated "
                        "or damaged; regenerate it", path, (long long)h->systems, m->len);
    // Every record must be one the simulator can write: the readers index planets by K and turn
    // dt_token into a token, so a damaged record is refused here rather than read out of bounds.
    const orb_system *sys = (const orb_system *)((const char *)m->map + 64);
    for (int64_t i = 0; !rc && i < h->systems; i++) {
        orb_system s;
        memcpy(&s, &sys[i], sizeof s);   // the mapping need not be aligned for doubles
        if (s.K < 1 || s.K > ORB_MAX_PLANETS || (s.dt_token != ORB_BINS && s.dt_token != ORB_BINS + 1) ||
            !(s.dt > 0 && isfinite(s.dt)) || !(s.star_mass > 0 && isfinite(s.star_mass)) ||
            !isfinite(s.cx) || !isfinite(s.cy) || !isfinite(s.star_x) || !isfinite(s.star_y) ||
            (s.K >= 2 && (s.fix_planet < 0 || s.fix_planet >= s.K || s.fix_step < 0 ||
                          s.fix_step >= ORB_STEPS)))
            rc = lssar_fail(LSSAR_E_FORMAT, "%s: system %lld is damaged (K = %d, dt token %d, dt %g, star "
                            "mass %g, fixed planet %d at step %d): regenerate the file with `lssar orbits "
                            "simulate`", path, (long long)i, s.K, s.dt_token, s.dt, s.star_mass, s.fix_planet,
                            s.fix_step);
        for (int k = 0; !rc && k < s.K; k++) {
            const orb_planet *p = &s.p[k];
            if (!(p->m > 0 && isfinite(p->m)) || !(p->a > 0 && isfinite(p->a)) || !(p->e >= 0 && p->e < 1) ||
                !isfinite(p->theta) || !isfinite(p->tau))
                rc = lssar_fail(LSSAR_E_FORMAT, "%s: system %lld, planet %d is damaged (m %g, a %g, e %g): "
                                "regenerate the file with `lssar orbits simulate`",
                                path, (long long)i, k + 1, p->m, p->a, p->e);
        }
    }
    if (rc) { munmap(m->map, m->len); memset(m, 0, sizeof *m); return rc; }
    m->h = h;
    m->sys = (const orb_system *)((const char *)m->map + 64);
    m->n = h->systems;
    return 0;
}

void orb_meta_close(orb_meta *m) {
    if (m->map) munmap(m->map, m->len);
    memset(m, 0, sizeof *m);
}

int orb_state_open(orb_state *s, const char *path) {
    memset(s, 0, sizeof *s);
    int rc = map_file(path, &s->map, &s->len);
    if (rc) return rc;
    const orb_state_header *h = s->map;
    size_t per = (size_t)ORB_ROWS * ORB_S_FIELDS * sizeof(float);
    if (memcmp(h->magic, ORB_STATE_MAGIC, 8) != 0)
        rc = lssar_fail(LSSAR_E_FORMAT, "%s: bad magic (expected %s): not an orbits state file", path,
                        ORB_STATE_MAGIC);
    else if (h->version != ORB_FORMAT_VERSION || h->fields != ORB_S_FIELDS || h->rows != ORB_ROWS)
        rc = lssar_fail(LSSAR_E_FORMAT, "%s: version %d, %d fields, %d rows not supported (expected %d, %d, "
                        "%d); regenerate it", path, h->version, h->fields, h->rows, ORB_FORMAT_VERSION,
                        ORB_S_FIELDS, ORB_ROWS);
    else if (h->systems < 0 || (uint64_t)h->systems > (s->len - 64) / per ||
             s->len != 64 + (size_t)h->systems * per)
        rc = lssar_fail(LSSAR_E_FORMAT, "%s: header says %lld systems but the file is %zu bytes: truncated "
                        "or damaged; regenerate it", path, (long long)h->systems, s->len);
    if (rc) { munmap(s->map, s->len); memset(s, 0, sizeof *s); return rc; }
    s->h = h;
    s->rows = (const float *)((const char *)s->map + 64);
    s->n = h->systems;
    return 0;
}

void orb_state_close(orb_state *s) {
    if (s->map) munmap(s->map, s->len);
    memset(s, 0, sizeof *s);
}

int orb_path(char *buf, size_t n, const char *dir, const char *split, const char *kind, int64_t i) {
    int w;
    if (!strcmp(kind, "shard")) w = snprintf(buf, n, "%s/%s_%06lld.bin", dir, split, (long long)i);
    else if (!strcmp(kind, "json")) w = snprintf(buf, n, "%s/%s.json", dir, split);
    else w = snprintf(buf, n, "%s/%s_%s.bin", dir, split, kind);
    if (w < 0 || (size_t)w >= n) return lssar_fail(LSSAR_E_ARG, "output path too long: %s/%s...", dir, split);
    return 0;
}
