/* restore_signals.h: SIGINT/SIGTERM handlers that put every GPU setting back
 * (zeus_devices_restore_all()) and then let the signal act as it did before: the previous
 * handler runs, or a default disposition is restored and the signal raised again. An ignored
 * signal stays ignored. Reference-counted across users; thread-safe. */
#ifndef ZEUS_DEVICE_RESTORE_SIGNALS_H
#define ZEUS_DEVICE_RESTORE_SIGNALS_H

/* Installs the handlers for the first user. ZEUS_EINTERNAL when sigaction fails. */
int zeus__restore_signals_acquire(void);
/* Puts the previous handlers back after the last user (only where ours is still installed). */
void zeus__restore_signals_release(void);

#endif
