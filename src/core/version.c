#include "zeus/version.h"

#ifndef ZEUS_VERSION_STRING
#define ZEUS_VERSION_STRING "0.0.0"
#endif

const char *zeus_version(void) { return ZEUS_VERSION_STRING; }
unsigned zeus_version_hex(void) { return ZEUS_VERSION_HEX; }
