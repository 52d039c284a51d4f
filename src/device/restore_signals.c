/* Signal handling shared by everything that changes GPU settings (the power-limit
 * optimizer, the Perseus frequency controller): a process stopped by Ctrl-C or by a job
 * scheduler must not leave its GPUs at a profiling limit or a locked clock. Reference-counted:
 * installed by the first user, put back by the last. The handler restores every open device
 * handle (zeus_devices_restore_all(), which takes no lock it could wait on forever), then lets
 * the signal do what it did before: the previous handler runs, or, when the disposition was the
 * default, the signal is raised again so that the process ends with it as it would have.
 *
 * SIGINT and SIGTERM are always handled (unless ignored). SIGHUP (an SSH session that drops),
 * SIGQUIT and SIGUSR1 end a process by default too and once left the GPUs at a profiling limit
 * with persistence mode on: they are handled only while their disposition is the default, since
 * a program with its own handler for one of them goes on running after it. */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <string.h>

#include "core/core.h"
#include "device/restore_signals.h"
#include "zeus/device.h"

static const int handled[] = {SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1};
static const char *const handled_name[] = {"SIGINT", "SIGTERM", "SIGHUP", "SIGQUIT", "SIGUSR1"};
/* handled[i] for i >= ALWAYS_HANDLED only when its disposition is the default. */
#define ALWAYS_HANDLED 2
#define NSIG_HANDLED (sizeof handled / sizeof handled[0])

static pthread_mutex_t sig_mu = PTHREAD_MUTEX_INITIALIZER;
static int sig_users;
static bool sig_installed[NSIG_HANDLED];
static struct sigaction sig_prev[NSIG_HANDLED];

static void on_signal(int sig, siginfo_t *info, void *uctx) {
  int saved_errno = errno;
  zeus_devices_restore_all();
  for (size_t i = 0; i < NSIG_HANDLED; i++) {
    if (handled[i] != sig) continue;
    const struct sigaction *prev = &sig_prev[i];
    if (prev->sa_flags & SA_SIGINFO) {
      if (prev->sa_sigaction) prev->sa_sigaction(sig, info, uctx);
    } else if (prev->sa_handler == SIG_DFL) {
      /* Default action (terminate): put it back and raise again; the signal is blocked while
       * this handler runs, so it is delivered, with its default action, when we return. */
      struct sigaction dfl;
      memset(&dfl, 0, sizeof dfl);
      dfl.sa_handler = SIG_DFL;
      sigemptyset(&dfl.sa_mask);
      sigaction(sig, &dfl, NULL);
      raise(sig);
    } else if (prev->sa_handler != SIG_IGN) {
      prev->sa_handler(sig);
    }
  }
  errno = saved_errno;
}

int zeus__restore_signals_acquire(void) {
  pthread_mutex_lock(&sig_mu);
  int rc = ZEUS_OK;
  if (sig_users == 0) {
    for (size_t i = 0; i < NSIG_HANDLED; i++) {
      struct sigaction cur;
      sig_installed[i] = false;
      if (sigaction(handled[i], NULL, &cur) != 0) continue;
      if (!(cur.sa_flags & SA_SIGINFO) && cur.sa_handler == SIG_IGN) continue; /* ignored stays ignored */
      if (i >= ALWAYS_HANDLED && ((cur.sa_flags & SA_SIGINFO) || cur.sa_handler != SIG_DFL)) continue;
      sig_prev[i] = cur;
      struct sigaction sa;
      memset(&sa, 0, sizeof sa);
      sa.sa_sigaction = on_signal;
      sa.sa_flags = SA_SIGINFO | SA_RESTART;
      sigemptyset(&sa.sa_mask);
      if (sigaction(handled[i], &sa, NULL) != 0) {
        rc = zeus__error(ZEUS_EINTERNAL, "installing the %s handler that restores the GPUs failed: %s", handled_name[i],
                         strerror(errno));
        for (size_t j = 0; j < i; j++)
          if (sig_installed[j]) sigaction(handled[j], &sig_prev[j], NULL);
        memset(sig_installed, 0, sizeof sig_installed);
        break;
      }
      sig_installed[i] = true;
    }
  }
  if (!rc) sig_users++;
  pthread_mutex_unlock(&sig_mu);
  if (!rc)
    zeus__log(ZEUS_LOG_DEBUG, "device", "SIGINT/SIGTERM/SIGHUP/SIGQUIT/SIGUSR1 handlers restore the GPUs (%d user(s))",
              sig_users);
  return rc;
}

void zeus__restore_signals_release(void) {
  pthread_mutex_lock(&sig_mu);
  if (sig_users > 0 && --sig_users == 0) {
    for (size_t i = 0; i < NSIG_HANDLED; i++) {
      if (!sig_installed[i]) continue;
      struct sigaction cur;
      /* Put the previous handler back only if ours is still the one installed; a handler
       * installed after ours (which may chain to ours) is left alone. */
      if (sigaction(handled[i], NULL, &cur) == 0 && (cur.sa_flags & SA_SIGINFO) && cur.sa_sigaction == on_signal)
        sigaction(handled[i], &sig_prev[i], NULL);
      sig_installed[i] = false;
    }
  }
  pthread_mutex_unlock(&sig_mu);
}
