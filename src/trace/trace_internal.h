/* src/trace/trace_internal.h: the loaded NSDI '23 traces (not API). */
#ifndef ZEUS_TRACE_INTERNAL_H
#define ZEUS_TRACE_INTERNAL_H

#include "core/core.h"
#include "zeus/trace.h"

typedef struct zeus__train_row {
  int dataset, network, optimizer; /* interned name indices */
  long bs;
  double target;
  double epoch; /* NAN: never reached */
} zeus__train_row;

typedef struct zeus__power_row {
  int dataset, network, optimizer;
  long bs;
  double pl_w;
  double time_per_epoch;
  double power_w;
} zeus__power_row;

struct zeus_trace {
  char **names;
  size_t nnames, names_cap;
  /* An open-addressing index of names (slots hold index + 1; 0: empty; a power of two, at most
   * half full): interning by a linear search made a trace of 100,000 names load in minutes. */
  size_t *name_slots;
  size_t name_slots_cap;
  zeus__train_row *train;
  size_t ntrain;
  zeus__power_row *power;
  size_t npower;
  double max_power_w; /* the largest limit of the power trace */
};

/* Index of an interned name, or -1. */
int zeus__trace_name(const zeus_trace *t, const char *name);

#endif
