/* The fork generation: how many times this process's ancestry forked since libzeus was loaded. */
#include <pthread.h>
#include <stdatomic.h>

#include "core/core.h"

static atomic_uint fork_gen;
static pthread_once_t fork_once = PTHREAD_ONCE_INIT;

static void on_fork_child(void) { atomic_fetch_add_explicit(&fork_gen, 1, memory_order_relaxed); }
static void register_handler(void) { pthread_atfork(NULL, NULL, on_fork_child); }

unsigned zeus__fork_generation(void) {
  pthread_once(&fork_once, register_handler);
  return atomic_load_explicit(&fork_gen, memory_order_relaxed);
}
