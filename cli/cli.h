/* cli/cli.h: the zeus command-line tool. One file per subcommand, each a client of <zeus.h>.
 *
 * A subcommand is `int cmd_<name>(int argc, char **argv)` where argv[0] is the subcommand's own
 * name; it returns the process exit code (0 ok, 1 failure, 2 usage error). Register it in the
 * table of cli/main.c; a command of an optional component is registered as CLI_COMPONENT(cmd_x)
 * and named in its zeus_component() call (cmake/components.cmake), which leaves it out of builds
 * without the component. Every subcommand answers --help with what it does, an example, and the
 * environment variables it reads. */
#ifndef ZEUS_CLI_H
#define ZEUS_CLI_H

#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <sys/types.h>

#include <zeus.h>

#include "opt.h"

#define CLI_EXIT_OK 0
#define CLI_EXIT_FAIL 1
#define CLI_EXIT_USAGE 2

/* Prints "zeus <cmd>: <message>" to stderr, then zeus_errmsg() when `with_zeus_error`. */
void cli_error(const char *cmd, bool with_zeus_error, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* True when argv holds -h or --help before any "--". */
bool cli_wants_help(int argc, char **argv);
/* Parses a number option value; prints an error naming the option and returns false when bad. */
bool cli_parse_long(const char *cmd, const char *opt, const char *text, long min, long max,
                    long *out);
bool cli_parse_double(const char *cmd, const char *opt, const char *text, double min, double max,
                      double *out);
/* Parses "0,1,3" into indices (at most `cap`); prints an error and returns false when bad. */
bool cli_parse_index_list(const char *cmd, const char *opt, const char *text, unsigned *out,
                          size_t cap, size_t *n);

/* A --gpus LIST destination for cli_opt's CLI_OPT_CUSTOM with cli_opt_index_list. */
typedef struct cli_index_list {
  unsigned idx[ZEUS_MAX_GPUS];
  size_t n;
  bool given;
} cli_index_list;
/* cli_opt_parse_fn for a cli_index_list: "0,1,3", each at most once. */
bool cli_opt_index_list(const char *cmd, const char *opt, const char *value, void *dest);

/* A report written with -o FILE (the output rule of opt.h): into a temporary file beside FILE,
 * renamed over FILE when complete, so a reader never sees half a report and a failed run leaves
 * an older one intact. The file is opened before the child starts (a bad path fails early) and
 * closed on exec. */
typedef struct cli_report {
  char tmp[4096];
  FILE *f;
} cli_report;
bool cli_report_open(const char *cmd, cli_report *r, const char *path);
/* Flushes, syncs and renames; false after an error message. */
bool cli_report_commit(const char *cmd, cli_report *r, const char *path);
/* Removes the temporary file (no-op when none is open). */
void cli_report_discard(cli_report *r);

/* ---- the 'zeus gpus' tools that read and change GPUs (cli/gpus_util.c) ---- */

struct json_t;
/* The GPUs a --gpus list names (every visible GPU when not given), checked against the handle;
 * prints an error naming the bad index, or saying that there is no GPU, and returns false. */
bool cli_gpu_selection(const char *cmd, zeus_devices *d, const cli_index_list *l, unsigned *out,
                       size_t *n);
/* Opens the GPUs (zeus_devices_open with the environment's settings) and selects those a --gpus
 * list names, as cli_gpu_selection; on failure prints why, closes what it opened and returns
 * NULL. The caller closes the handle it returns. */
zeus_devices *cli_open_gpu_selection(const char *cmd, const cli_index_list *l, unsigned *out, size_t *n);
/* Median (sorts v in place), largest and smallest of n values; NaN when n is 0. */
double cli_median(double *v, size_t n);
double cli_max(const double *v, size_t n);
double cli_min(const double *v, size_t n);
/* SIGINT/SIGTERM set cli_stop_signal (to the signal's number) instead of ending the process, so
 * a command that changed settings can put them back, report and exit with 128 + signal.
 * Nested calls are counted; release puts the earlier handlers back. */
extern volatile sig_atomic_t cli_stop_signal;
void cli_catch_stop_signals(void);
void cli_release_stop_signals(void);
/* Serving until SIGINT or SIGTERM (pfo-server, exporter): cli_serve_block_signals() ignores
 * SIGPIPE and blocks SIGINT and SIGTERM in the calling thread; call it before the server starts
 * its threads, so they inherit the block and only cli_serve_wait() (sigwait: no race between a
 * check and a pause) takes the signal. cli_serve_wait returns the signal's number. */
void cli_serve_block_signals(void);
int cli_serve_wait(void);
/* Sleeps; false (at once) when a stop signal has come. */
bool cli_sleep_s(double s);
/* The SM clocks the GPU supports at its highest memory clock (*mem_mhz), highest first. */
int cli_gpu_sm_clocks(zeus_devices *d, unsigned gpu, unsigned *mem_mhz, unsigned *mhz, size_t *n);
/* The supported clock nearest to `want`. */
unsigned cli_nearest_clock(const unsigned *mhz, size_t n, double want);
/* A JSON real, or null when v is not finite. */
struct json_t *cli_json_real_or_null(double v);
/* Writes `doc` indented with zeus_json_dumps() and a newline, after zeus_json_round_by_unit();
 * false on failure. */
bool cli_write_json(FILE *out, struct json_t *doc);
/* Starts argv as a child with the signal dispositions from before cli_catch_stop_signals()
 * (standard output on our standard error when asked: the output rule of opt.h). -1 (after an
 * error message) when it cannot start. */
pid_t cli_child_start(const char *cmd, char **argv, bool stdout_to_stderr);
/* Whether the child has ended (then *exit_code as a shell reports it: 128 + N for signal N). */
bool cli_child_poll(pid_t pid, int *exit_code);
/* Sends `sig` unless the child has ended, waits up to grace_s, then SIGKILL; its exit code. */
int cli_child_stop(pid_t pid, int sig, double grace_s);

int cmd_gpus(int argc, char **argv);
int cmd_gpus_probe(int argc, char **argv);
int cmd_gpus_check(int argc, char **argv);
int cmd_gpus_set(int argc, char **argv);
int cmd_gpus_clock_latency(int argc, char **argv);
int cmd_gpus_report(int argc, char **argv);
int cmd_monitor(int argc, char **argv);
int cmd_exporter(int argc, char **argv);
int cmd_frontier(int argc, char **argv);
int cmd_pfo_server(int argc, char **argv);
int cmd_bso_server(int argc, char **argv);
int cmd_plo(int argc, char **argv);
int cmd_run(int argc, char **argv);
int cmd_simulate(int argc, char **argv);
int cmd_daemon(int argc, char **argv);

#endif
