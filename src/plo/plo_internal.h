/* src/plo/plo_internal.h: pieces of the power-limit optimizer shared between its files (not API). */
#ifndef ZEUS_PLO_INTERNAL_H
#define ZEUS_PLO_INTERNAL_H

#include "zeus/plo.h"

/* Validates a selector's parameters; ZEUS_EINVAL names the parameter, its value and the range. */
int zeus__selector_check(const zeus_selector *s);
/* "Energy", "Time", "ZeusCost", "MaxSlowdownConstraint", "custom". */
const char *zeus__selector_name(const zeus_selector *s);


#endif
