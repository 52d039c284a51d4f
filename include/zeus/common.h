/* zeus/common.h: the export macro and C++ guards every public header uses. The conventions of
 * the whole API (errors, handles, ownership, parameter order, options) are stated once, in
 * zeus.h. */
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
