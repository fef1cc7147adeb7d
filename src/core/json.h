/*
 * json.h - write a cJSON document to a file atomically (util.h's lssar_afile), pretty-printed
 * with a final newline: the one way every command writes its --json output.
 */
#ifndef LSSAR_JSON_H
#define LSSAR_JSON_H

#include <cJSON.h>

int lssar_write_json(const char *path, const cJSON *root);

#endif
