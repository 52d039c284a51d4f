/* zeus.h: the one public API of libzeus.
 *
 * Ownership, once for the whole API:
 *   - Arguments are borrowed for the duration of the call unless a comment says otherwise.
 *   - Handles come from zeus_<x>_open() and go back with zeus_<x>_close(); closing NULL is a no-op.
 *   - Whatever the library allocates for the caller is released with the matching zeus_<x>_free().
 *   - Out-parameters are marked  out  and are written only on success.
 * Errors: every int-returning function returns ZEUS_OK (0) or a negative ZEUS_E... code, and
 * zeus_errmsg() holds the detail for the calling thread.
 * Threads: functions are thread-safe unless their comment says otherwise.
 */
#ifndef ZEUS_H
#define ZEUS_H

#include "zeus/common.h"
#include "zeus/error.h"
#include "zeus/version.h"
#include "zeus/log.h"
#include "zeus/clock.h"
#include "zeus/format.h"
/* module headers are added below as they land */
#include "zeus/device.h"
#include "zeus/sim.h"
#include "zeus/monitor.h"
#include "zeus/frontier.h"
#include "zeus/pfo.h"
#include "zeus/pfo_client.h"
#include "zeus/collective.h"
#include "zeus/plo.h"
#include "zeus/bso.h"
#include "zeus/trace.h"
#include "zeus/run.h"
#include "zeus/daemon.h" /* present in libzeus built with ZEUS_WITH_DAEMON (the default) */

#endif
