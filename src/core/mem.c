/* Memory helpers every module uses: string copies and growable arrays. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/core.h"

char *zeus__strdup(const char *s) {
  size_t n = strlen(s) + 1;
  char *d = malloc(n);
  if (d) memcpy(d, s, n);
  return d;
}

int zeus__grow(void *arrayp, size_t *cap, size_t need, size_t size, const char *what) {
  if (need <= *cap) return ZEUS_OK;
  size_t n = *cap ? *cap : 16;
  while (n < need) {
    if (n > SIZE_MAX / 2) return zeus__oom(what);
    n *= 2;
  }
  if (size && n > SIZE_MAX / size) return zeus__oom(what);
  void *old;
  memcpy(&old, arrayp, sizeof old); /* arrayp is a T **: read the T * it holds */
  char *p = realloc(old, n * size);
  if (!p) return zeus__oom(what);
  memset(p + *cap * size, 0, (n - *cap) * size);
  memcpy(arrayp, &p, sizeof p);
  *cap = n;
  return ZEUS_OK;
}
