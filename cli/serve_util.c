/* Serving until SIGINT or SIGTERM: the wait shared by the commands that run a server. */
#include <pthread.h>
#include <signal.h>

#include "cli.h"

static sigset_t stop_set(void) {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  return set;
}

void cli_serve_block_signals(void) {
  signal(SIGPIPE, SIG_IGN);
  sigset_t set = stop_set();
  pthread_sigmask(SIG_BLOCK, &set, NULL);
}

int cli_serve_wait(void) {
  sigset_t set = stop_set();
  int sig = 0;
  while (sigwait(&set, &sig) != 0) {
  }
  return sig;
}
