/* zeus/version.h: compile-time and run-time version. */
#ifndef ZEUS_VERSION_H
#define ZEUS_VERSION_H

#include "zeus/common.h"

#define ZEUS_VERSION_MAJOR 0
#define ZEUS_VERSION_MINOR 1
#define ZEUS_VERSION_PATCH 0
/* 0xMMmmpp: compare with >= in #if. */
#define ZEUS_VERSION_HEX \
  ((ZEUS_VERSION_MAJOR << 16) | (ZEUS_VERSION_MINOR << 8) | ZEUS_VERSION_PATCH)

ZEUS_BEGIN_DECLS

/* The version of the library actually loaded, "MAJOR.MINOR.PATCH". */
ZEUS_EXTERN const char *zeus_version(void);
/* The same as ZEUS_VERSION_HEX, of the loaded library. */
ZEUS_EXTERN unsigned zeus_version_hex(void);

ZEUS_END_DECLS
#endif
