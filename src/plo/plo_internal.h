/* src/plo/plo_internal.h: pieces of the power-limit optimizer shared between its files (not API). */
#ifndef ZEUS_PLO_INTERNAL_H
#define ZEUS_PLO_INTERNAL_H

#include "zeus/plo.h"

/* Validates a selector's parameters; ZEUS_EINVAL names the parameter, its value and the range. */
int zeus__selector_check(const zeus_selector *s);
/* "Energy", "Time", "ZeusCost", "MaxSlowdownConstraint", "custom". */
const char *zeus__selector_name(const zeus_selector *s);

/* SIGINT/SIGTERM handlers that restore every GPU (zeus_devices_restore_all()), then chain to the
 * handler that was there before or, if that was the default, re-raise the signal. Reference
 * counted: installed by the first acquire, the previous handlers put back by the last release.
 * A signal that was ignored stays ignored. */
int zeus__plo_signals_acquire(void);
void zeus__plo_signals_release(void);

#endif
