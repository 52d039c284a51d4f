/* Perseus settings from the environment: ZEUS_PFO_<NAME>, with the original's PERSEUS_<NAME>
 * accepted as an alias (ZEUS_PFO_ wins). The server's and the client's settings both go through
 * here, so the rule is written once. */
#include <stdio.h>

#include "pfo/pfo_internal.h"

const char *zeus__pfo_env(const char *name, char *var, size_t len) {
  snprintf(var, len, "ZEUS_PFO_%s", name);
  const char *v = zeus__env_str(var);
  if (v) return v;
  snprintf(var, len, "PERSEUS_%s", name);
  if ((v = zeus__env_str(var))) return v;
  snprintf(var, len, "ZEUS_PFO_%s", name);
  return NULL;
}
