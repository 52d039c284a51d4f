/* A growable NUL-terminated string buffer. */
#include <stdlib.h>
#include <string.h>

#include "core/core.h"

static int buf_reserve(zeus__buf *b, size_t extra) {
  size_t need = b->len + extra + 1;
  if (need <= b->cap) return ZEUS_OK;
  size_t cap = b->cap ? b->cap : 64;
  while (cap < need) cap *= 2;
  char *p = realloc(b->data, cap);
  if (!p) return zeus__oom("growing a string buffer");
  b->data = p;
  b->cap = cap;
  return ZEUS_OK;
}

int zeus__buf_append(zeus__buf *b, const char *s, size_t n) {
  int rc = buf_reserve(b, n);
  if (rc) return rc;
  memcpy(b->data + b->len, s, n);
  b->len += n;
  b->data[b->len] = '\0';
  return ZEUS_OK;
}

int zeus__buf_puts(zeus__buf *b, const char *s) { return zeus__buf_append(b, s, strlen(s)); }

int zeus__buf_printf(zeus__buf *b, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  char small[256];
  int n = vsnprintf(small, sizeof small, fmt, ap);
  va_end(ap);
  if (n < 0) return zeus__error(ZEUS_EINTERNAL, "formatting failed");
  if ((size_t)n < sizeof small) return zeus__buf_append(b, small, (size_t)n);
  int rc = buf_reserve(b, (size_t)n);
  if (rc) return rc;
  va_start(ap, fmt);
  vsnprintf(b->data + b->len, (size_t)n + 1, fmt, ap);
  va_end(ap);
  b->len += (size_t)n;
  return ZEUS_OK;
}

void zeus__buf_free(zeus__buf *b) {
  free(b->data);
  b->data = NULL;
  b->len = b->cap = 0;
}
