/* zeus/common.h: export macro and conventions shared by every public header.
 *
 * Conventions of the whole API (see zeus.h):
 *   - Functions return int: ZEUS_OK (0) or a negative ZEUS_E... code; zeus_errmsg() then
 *     says, on the calling thread, what went wrong.
 *   - Handles are opaque and come in open/close pairs; closing NULL does nothing.
 *   - Arguments are borrowed; out-parameters are marked  out  and owned by the caller.
 *   - Units are in the names: _mw (milliwatts), _mj (millijoules), _mhz, _s, _j, _w.
 */
#ifndef ZEUS_COMMON_H
#define ZEUS_COMMON_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#if defined(ZEUS_BUILDING)
#define ZEUS_EXTERN __attribute__((visibility("default")))
#else
#define ZEUS_EXTERN
#endif

#ifdef __cplusplus
#define ZEUS_BEGIN_DECLS extern "C" {
#define ZEUS_END_DECLS }
#else
#define ZEUS_BEGIN_DECLS
#define ZEUS_END_DECLS
#endif

#endif
