/* cli/opt.h: the one option parser of the zeus CLI, and --help generated from the same table.
 *
 * A command describes its options once, in a table of cli_opt; cli_parse() reads argv with it
 * and cli_help() prints the help from it, so the two cannot drift. Both spellings of a value are
 * accepted (--name=value and --name value; -x value and -xvalue), "--" ends the options, and an
 * unknown or misspelled option gets a "did you mean" naming the nearest one.
 *
 * Output rule of every command (docs/output.md): standard output belongs either to the
 * command's report or to the child it runs, never both. Without a child the report goes to
 * stdout. With a child (zeus monitor energy -- CMD, zeus run -- CMD): in text mode the child keeps
 * stdout and the report goes to stderr; with --json the JSON document is the only thing on
 * stdout and the child's stdout is sent to stderr; with -o FILE the report goes to FILE and the
 * child keeps stdout.
 */
#ifndef ZEUS_CLI_OPT_H
#define ZEUS_CLI_OPT_H

#include <stdbool.h>
#include <stdio.h>

typedef enum cli_opt_kind {
  CLI_OPT_FLAG,   /* bool *dest = true; takes no value */
  CLI_OPT_STRING, /* const char **dest = the value as given (borrowed from argv) */
  CLI_OPT_INT,    /* int *dest: a decimal integer within [min, max] */
  CLI_OPT_LONG,   /* long *dest: a decimal integer within [min, max] */
  CLI_OPT_DOUBLE, /* double *dest: a finite number within [min, max] */
  CLI_OPT_CHOICE, /* int *dest = index of the value in `choices` (case-insensitive) */
  CLI_OPT_CUSTOM, /* parse(cmd, opt, value, dest) checks and stores the value itself */
} cli_opt_kind;

/* Prints its own error ("zeus <cmd>: <opt>: ...") and returns false when `value` is bad. */
typedef bool (*cli_opt_parse_fn)(const char *cmd, const char *opt, const char *value, void *dest);

typedef struct cli_opt {
  const char *name; /* long name without "--"; NULL ends the table */
  char short_name;  /* 0 when none */
  cli_opt_kind kind;
  void *dest;
  const char *metavar; /* "N", "FILE" (values only); NULL: CHOICE shows a|b|c, others VALUE */
  const char *help;    /* one paragraph, wrapped to 100 columns; "(default: ...)" added */
  const char *def;     /* the default as a user reads it, or NULL */
  double min, max;     /* INT, LONG, DOUBLE: the allowed range (both 0: any value of the type) */
  const char *const *choices; /* CHOICE: NULL-terminated */
  cli_opt_parse_fn parse;     /* CUSTOM */
  bool *seen;                 /* optional: set true when the option is given */
  bool required;              /* an error names it when it is missing */
  const char *heading;        /* optional: a line printed above this option in --help ("Job:"),
                                 starting a group of options */
} cli_opt;

typedef enum cli_args {
  CLI_ARGS_NONE,    /* no operands */
  CLI_ARGS_ANY,     /* operands anywhere between the options (GNU style) */
  CLI_ARGS_COMMAND, /* a command to run: after "--", or from the first operand on */
} cli_args;

typedef struct cli_command {
  const char *name;    /* as users type it after "zeus": "monitor energy" */
  const char *usage;   /* usage lines without "usage: " (several lines allowed) */
  const char *about;   /* what it does: paragraphs, printed before the options */
  const cli_opt *opts; /* the table, ended by an entry whose name is NULL; -h/--help is implied */
  const char *more;    /* printed after the options: formats, examples, environment */
  cli_args args;
  int min_args, max_args; /* CLI_ARGS_ANY: operand counts (max_args < 0: no limit) */
  const char *args_name;  /* operands as the errors name them: "FILE" */
  const char *program;    /* a program of its own (an example): errors start "<program>: " and
                             not "zeus <name>: "; NULL for zeus commands */
} cli_command;

/* Status of cli_parse() when the command should go on. */
#define CLI_CONTINUE (-1)

/* Parses argv[1..argc) against c->opts (argv[0] is the command's name). On success returns
 * CLI_CONTINUE and, when `rest` is not NULL, sets *rest_argv / *rest_argc to the operands
 * (CLI_ARGS_ANY, moved to argv[1..] in order) or to the command to run (CLI_ARGS_COMMAND;
 * NULL-terminated, since it lies at argv's end). After -h/--help it prints the help on stdout
 * and returns 0; on an error it prints one line on stderr and returns 2 (CLI_EXIT_USAGE).
 * Defaults are the caller's: a destination keeps its value unless the option is given; given
 * twice, the last value wins. */
int cli_parse(const cli_command *c, int argc, char **argv, char ***rest_argv, int *rest_argc);

/* The help text generated from `c`: usage, about, every option with its help and default, more. */
void cli_help(const cli_command *c, FILE *out);

/* Edit distance used for the "did you mean" hints (exposed for tests). */
int cli_edit_distance(const char *a, const char *b);

/* The index of `word` in the NULL-terminated `names` (a subcommand or mode), or -1 after printing
 * "zeus <cmd>: unknown <what> '<word>' (did you mean '<near>'?; expected a, b or c)" on stderr.
 * A NULL `word` (nothing given) prints "missing <what> (expected a, b or c)". */
int cli_pick(const char *cmd, const char *what, const char *word, const char *const *names);

#endif
