/* Memory helpers every module uses: string copies. */
#include <stdlib.h>
#include <string.h>

#include "core/core.h"

char *zeus__strdup(const char *s) {
  size_t n = strlen(s) + 1;
  char *d = malloc(n);
  if (d) memcpy(d, s, n);
  return d;
}
