/*
 * json.h - write a cJSON document to a file atomically (util.h's lssar_afile), pretty-printed
 * with a final newline: the one way every command writes its --json output; and read one back.
 */
#ifndef LSSAR_JSON_H
#define LSSAR_JSON_H

#include <cJSON.h>

int lssar_write_json(const char *path, const cJSON *root);
/* The document in path, or NULL when it cannot be read or parsed (nothing printed). */
cJSON *lssar_read_json(const char *path);
/* A number, or null when it is not finite (JSON has no NaN: an interval of one seed, a missing value). */
cJSON *lssar_json_number(double v);

#endif
