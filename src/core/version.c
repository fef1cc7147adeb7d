// version.c - the version of the library linked at run time (lssar.h: lssar_version).
#include "lssar.h"

const char *lssar_version(void) { return LSSAR_VERSION; }
