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

#include <stdbool.h>
#include <stdio.h>

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

int cmd_gpus(int argc, char **argv);
int cmd_monitor(int argc, char **argv);
int cmd_exporter(int argc, char **argv);
int cmd_frontier(int argc, char **argv);
int cmd_pfo_server(int argc, char **argv);
int cmd_plo(int argc, char **argv);
int cmd_run(int argc, char **argv);
int cmd_simulate(int argc, char **argv);
int cmd_daemon(int argc, char **argv);

#endif
