/* src/core/core.h: internal helpers shared by every module (not API).
 *
 * Errors: every failing internal function calls zeus__error() once, at the place that knows
 * what went wrong, and returns its code; callers that add context use zeus__error_ctx().
 */
#ifndef ZEUS_CORE_INTERNAL_H
#define ZEUS_CORE_INTERNAL_H

#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <time.h>

#include "zeus/clock.h"
#include "zeus/error.h"
#include "zeus/log.h"

#define ZEUS__PRINTF(a, b) __attribute__((format(printf, a, b)))
#define ZEUS__ARRAY_LEN(a) (sizeof(a) / sizeof((a)[0]))

/* ---- errors ---- */
/* Sets this thread's error code and message; returns `code`. */
int zeus__error(int code, const char *fmt, ...) ZEUS__PRINTF(2, 3);
/* Prefixes this thread's current message with "<context>: "; returns `code`. */
int zeus__error_ctx(int code, const char *fmt, ...) ZEUS__PRINTF(2, 3);
/* zeus__error(ZEUS_ENOMEM, "out of memory while <what>"). */
int zeus__oom(const char *what);
/* Keeps this thread's message but gives it another code; returns `code`. */
int zeus__error_recode(int code);

/* This thread's error (code and message), saved across calls that may overwrite it (a
 * collective every rank must join, a clean-up, a state reload) and put back afterwards:
 *   zeus__saved_error e;  zeus__error_save(&e);  cleanup();  return zeus__error_restore(&e); */
#define ZEUS__ERRMSG_MAX 1024
typedef struct zeus__saved_error {
  int code;
  char msg[ZEUS__ERRMSG_MAX];
} zeus__saved_error;
void zeus__error_save(zeus__saved_error *s);
/* Makes the saved error this thread's error again; returns its code. */
int zeus__error_restore(const zeus__saved_error *s);

/* ---- logging ---- */
extern int zeus__log_level_cur; /* read without a lock: a stale level only mis-filters once */
void zeus__log_emit(int level, const char *module, const char *fmt, ...) ZEUS__PRINTF(3, 4);
#define zeus__log(level, module, ...)                                 \
  do {                                                                \
    if ((level) <= zeus__log_level_cur) zeus__log_emit((level), (module), __VA_ARGS__); \
  } while (0)

/* ---- parsing numbers and settings ---- */
/* Parse a whole string (surrounding blanks allowed) as a number within [min, max]. On failure:
 * ZEUS_EINVAL ("<what>: expected an integer, got 'x'") or ZEUS_ERANGE ("<what>: 500 is
 * outside [0, 100]"). */
int zeus__parse_long(const char *text, long min, long max, const char *what, long *out);
int zeus__parse_double(const char *text, double min, double max, const char *what, double *out);
int zeus__parse_bool(const char *text, const char *what, bool *out);

/* Environment settings. Unset (or empty) gives the default; a bad value is an error naming
 * the variable, its value and what was expected. */
const char *zeus__env_str(const char *name); /* NULL when unset or empty */
int zeus__env_long(const char *name, long min, long max, long def, long *out);
int zeus__env_double(const char *name, double min, double max, double def, double *out);
int zeus__env_bool(const char *name, bool def, bool *out);
/* `choices` is NULL-terminated; *out is the index of the match (case-insensitive). */
int zeus__env_choice(const char *name, const char *const *choices, int def, int *out);

/* ---- growable string buffer ---- */
typedef struct zeus__buf {
  char *data; /* always NUL-terminated once anything was appended */
  size_t len;
  size_t cap;
} zeus__buf;
int zeus__buf_append(zeus__buf *b, const char *s, size_t n);
int zeus__buf_puts(zeus__buf *b, const char *s);
int zeus__buf_printf(zeus__buf *b, const char *fmt, ...) ZEUS__PRINTF(2, 3);
void zeus__buf_free(zeus__buf *b);

/* ---- memory ---- */
/* A malloc()ed copy of s (free() it), or NULL when memory runs out (no error is set). */
char *zeus__strdup(const char *s);
/* Makes room for `need` elements of `size` bytes in a growable array: `arrayp` is the address of
 * the array pointer (T **, NULL for none yet) and *cap its capacity in elements. Capacity doubles
 * (from 16) until it holds `need`; new elements are zeroed. ZEUS_ENOMEM "out of memory while
 * <what>" when it cannot grow (array and capacity then unchanged). Replaces the realloc-and-double
 * pattern every module used to write by hand:
 *   if ((rc = zeus__grow(&v->items, &v->cap, v->n + 1, sizeof *v->items, "adding an item"))) ...
 */
int zeus__grow(void *arrayp, size_t *cap, size_t need, size_t size, const char *what);

/* ---- fork ----
 * A child of fork() has copies of its parent's locks and conditions but none of its threads: an
 * object that started threads notes the generation when it did, and where it differs later it is
 * in a child (its threads are gone; its lock may be held and its condition waited on by them, so
 * neither may be used, destroyed or joined). The first call registers the handler. */
unsigned zeus__fork_generation(void);

/* ---- peers ----
 * Per-client limits count a local user as one client however it connects: on a Unix socket the
 * peer's uid (SO_PEERCRED); over TCP from loopback (all of 127.0.0.0/8 and ::1) the uid that owns
 * the connecting socket, asked of the kernel (sock_diag, else /proc/net/tcp). */
#include <sys/types.h>
/* The uid of the process at the other end of loopback TCP connection fd; false where it is not
 * loopback TCP or cannot be told. */
bool zeus__loopback_peer_uid(int fd, uid_t *uid);
/* Who a connection counts against: "uid N" (true, *uid set when not NULL) or "address A". */
bool zeus__peer_who(int fd, char *who, size_t len, uid_t *uid);

/* ---- timed waits ----
 * Every timed wait measures CLOCK_MONOTONIC, so that a wall-clock jump (NTP, an administrator)
 * neither cuts a wait short nor stretches it. */
/* Initialises a condition variable whose timed waits use CLOCK_MONOTONIC. */
int zeus__cond_init(pthread_cond_t *cv);
/* The CLOCK_MONOTONIC instant `seconds` (>= 0) from now. */
struct timespec zeus__deadline_in(double seconds);
/* Waits on `cv` (from zeus__cond_init; `mu` held) until it is signalled or `deadline` passes:
 * pthread_cond_timedwait's result, ETIMEDOUT once the deadline has passed. */
int zeus__cond_wait_until(pthread_cond_t *cv, pthread_mutex_t *mu, const struct timespec *deadline);

/* ---- files ---- */
/* The one way a file a user names is read whole (NUL-terminated; *len excludes the NUL): it must
 * be a regular file (a FIFO, /dev/zero, a terminal or a folder is refused at once, ZEUS_EINVAL
 * "'<path>' is not a regular file (a <what> must be one ...)"; opening never blocks) of at most
 * `max` bytes (ZEUS_ERANGE "'<path>' has N bytes, more than the limit of 16 MiB for a <what>",
 * also when it grows past `max` while read). `what` names the kind of file ("job spec"); NULL:
 * "file". Other errors name the path (ZEUS_ENOENT, ZEUS_EPERM, ZEUS_EIO). */
int zeus__read_file_max(const char *path, size_t max, const char *what, char **data /* out, free() */,
                        size_t *len /* out */);
/* The cap of zeus__read_file(): 16 MiB, far above any profile, plan, trace or model the project
 * reads (the largest measured file is 0.3 MiB, a power profile of 100,000 limits 5.5 MiB), and low
 * enough that what a parser builds from it (about 10 x the text for CSV and JSON) stays bounded. */
#define ZEUS__READ_MAX ((size_t)16 << 20)
/* zeus__read_file_max(path, ZEUS__READ_MAX, "file", ...). */
int zeus__read_file(const char *path, char **data /* out, free() */, size_t *len /* out */);
/* "64 MiB", "16 KiB" or "100 bytes", for messages about limits. */
typedef struct zeus__size_str {
  char s[32];
} zeus__size_str;
zeus__size_str zeus__size_text(size_t bytes);
/* Writes `data` to a temporary file beside `path`, fsyncs it, and renames it over `path`,
 * so readers see the old or the new file and never half of one. */
int zeus__write_file_atomic(const char *path, const void *data, size_t len);
/* mkdir -p (mode 0755); errors name the path (ZEUS_EPERM, ZEUS_EIO). */
int zeus__mkdirs(const char *path);
/* Writes `data` as `name` inside the open directory `dirfd`, atomically: a temporary file with a
 * random name, created with O_CREAT|O_EXCL|O_NOFOLLOW (never an existing file or a symlink that
 * someone planted), fsynced, then renamed over `name` (renameat replaces a symlink, never follows
 * it). `name` must be one path component. `what` names the file in errors (NULL: `name`). */
int zeus__write_file_atomic_at(int dirfd, const char *name, const void *data, size_t len, const char *what);
/* Opens (creating it, mode 0700, when missing; missing parents 0755) a directory that only this
 * user may write: the last component must not be a symlink, must be owned by the effective user
 * (or by root), and must not be writable by group or others, so that no other local user can plant
 * files or symlinks in it. *fd is O_DIRECTORY|O_CLOEXEC. ZEUS_EPERM naming the path and the fix
 * ("chmod go-w ...") when it is shared, ZEUS_EIO/ZEUS_EPERM when it cannot be created. */
int zeus__open_private_dir(const char *path, int *fd /* out */);

/* ---- randomness (random.c) ---- */
/* n bytes from the kernel's CSPRNG (getrandom). ZEUS_EIO when none can be had. */
int zeus__random_bytes(void *buf, size_t n);
/* `chars` (1..128) random base32 characters [a-z2-7] (5 bits each) and a NUL into out. */
int zeus__random_token(char *out /* chars + 1 bytes */, size_t chars);
/* ---- servers' secrets (token.c) ---- */
/* The bearer token from the first line of `path` (a regular file of at most 4 KiB; trailing
 * blanks dropped; a warning logged under `domain` when group or others may read it). ZEUS_EINVAL
 * naming the file when it cannot be read or its first line is empty. */
int zeus__read_token_file(const char *path, const char *domain, char **out /* out */);
struct sockaddr;
/* Whether a is an IPv4 127/8, IPv6 ::1 or v4-mapped loopback address. */
bool zeus__sockaddr_is_loopback(const struct sockaddr *a);
/* Whether two NUL-terminated secrets are equal, in time that depends on their lengths only. */
bool zeus__secret_equal(const char *a, const char *b);

#endif
