/* zeus.h: the one public API of libzeus.
 *
 * Conventions, stated once for every header below:
 *
 *   Errors. Every int-returning function returns ZEUS_OK (0) or a negative ZEUS_E... code
 *     (zeus/error.h), and zeus_errmsg() then says, on the calling thread, what went wrong.
 *
 *   Handles. Opaque; zeus_<x>_open() (or _new, _load, _solve) creates one and zeus_<x>_close()
 *     (or zeus_<x>_free()) releases it; releasing NULL does nothing.
 *
 *   Ownership. Arguments are borrowed for the duration of the call unless the comment says that
 *     the library keeps them. Plain memory the library allocates for the caller (strings, arrays
 *     of plain values, a job spec's storage) is released with zeus_free() (zeus/format.h), never
 *     with the caller's free(): libzeus may use another C runtime than its caller. A struct that
 *     owns memory of its own has its own release function, named in its comment
 *     (zeus_pfo_*_clear, zeus_pfo_*s_free, zeus_sim_config_free, zeus_simulate_result_free).
 *     Returned pointers marked "borrowed" stay owned by the library.
 *
 *   Parameters. A function that creates a handle or fills a struct for the caller takes it
 *     first (zeus_monitor_open(zeus_monitor **out, opts), zeus_selector_time(zeus_selector *out));
 *     every other function takes the object it acts on first, then its inputs, then its
 *     out-parameters, last. A caller's buffer is followed by its size. Out-parameters are marked
 *     out and are written only on success.
 *
 *   Options. Every options struct zeus_<x>_opts has void zeus_<x>_opts_init() that fills the
 *     defaults: start from it and change what you need. Where a struct's comment says
 *     "zero-initialised means defaults", a zeroed struct (or NULL) works too; elsewhere zero is a
 *     value (no warm-up steps, no retries) and a zeroed struct may be refused. Settings from the
 *     environment are read only by functions named _from_env (or documented as reading them),
 *     never by _init.
 *
 *   Units are in the names: _mw, _mj, _mhz, _s, _j, _w.
 *
 *   Threads. Functions are thread-safe unless their header says otherwise.
 */
#ifndef ZEUS_H
#define ZEUS_H

#include "zeus/common.h"
#include "zeus/error.h"
#include "zeus/version.h"
#include "zeus/log.h"
#include "zeus/clock.h"
#include "zeus/format.h"
#include "zeus/pipeline.h"
/* one header per module */
#include "zeus/device.h"
#include "zeus/soc.h"
#include "zeus/sim.h"
#include "zeus/monitor.h"
#include "zeus/power_monitor.h"
#include "zeus/power_stream.h"
#include "zeus/metric.h"
#include "zeus/grid.h"
#include "zeus/frontier.h"
#include "zeus/pfo.h"
#include "zeus/pfo_server.h"
#include "zeus/bso_server.h"
#include "zeus/exporter.h"
#include "zeus/pfo_client.h"
#include "zeus/collective.h"
#include "zeus/plo.h"
#include "zeus/bso.h"
#include "zeus/job.h"
#include "zeus/trace.h"
#include "zeus/run.h"
#include "zeus/daemon.h" /* present in libzeus built with ZEUS_WITH_DAEMON (the default) */

#endif
