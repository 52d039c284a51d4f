/* zeus frontier: the iteration time–energy frontier of a pipeline from an instruction profile. */
#include <errno.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"

static const char *const CMD = "frontier";

/* --timeline PLAN[:FILE]: PLAN is an index, 'last' or 'min-energy'. */
enum { PLAN_LAST = -2, PLAN_MIN_ENERGY = -3 };
typedef struct timeline_arg {
  long plan;
  const char *file; /* borrowed from argv; NULL: the default name */
} timeline_arg;

static bool parse_timeline(const char *cmd, const char *opt, const char *value, void *dest) {
  timeline_arg *t = dest;
  const char *colon = strchr(value, ':');
  size_t len = colon ? (size_t)(colon - value) : strlen(value);
  char num[32];
  if (len == 0 || len >= sizeof num) {
    cli_error(cmd, false, "%s: expected PLAN[:FILE], got '%s'", opt, value);
    return false;
  }
  memcpy(num, value, len);
  num[len] = '\0';
  if (strcmp(num, "last") == 0) t->plan = PLAN_LAST;
  else if (strcmp(num, "min-energy") == 0) t->plan = PLAN_MIN_ENERGY;
  else if (!cli_parse_long(cmd, opt, num, 0, 1000000000, &t->plan)) return false;
  t->file = colon && colon[1] ? colon + 1 : NULL;
  return true;
}

static const char *const cost_models[] = {"exponential", "hull", NULL};
static const char *const paretos[] = {"effective", "energy", NULL};
static const char *const slacks[] = {"reclaim", "keep", NULL};
enum { PROGRESS_AUTO, PROGRESS_ALWAYS, PROGRESS_NEVER };
static const char *const progresses[] = {"auto", "always", "never", NULL};

/* ---- progress on stderr ---- */

typedef struct progress_state {
  bool tty;        /* redraw one line in place (else one line per report) */
  double start, delay, interval, last;
  bool shown;      /* something is on the line */
} progress_state;

static double mono_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int on_progress(const zeus_frontier_progress *p, void *ctx) {
  progress_state *ps = ctx;
  double now = mono_s(), elapsed = now - ps->start;
  if (elapsed < ps->delay || now - ps->last < ps->interval) return 0;
  ps->last = now;
  double span = p->slowest_time_s - p->fastest_time_s, done = span > 0 ? (p->slowest_time_s - p->time_s) / span : 1;
  double by_points = p->max_points ? (double)p->points / (double)p->max_points : 0;
  if (by_points > done) done = by_points;
  if (done > 1) done = 1;
  char left[64] = "";
  if (done > 0.01 && elapsed > 0.5) snprintf(left, sizeof left, ", about %.0f s left", elapsed * (1 - done) / done);
  fprintf(stderr, "%szeus frontier: %zu points (%.0f %%), iteration time %.3f s (from %.3f s to %.3f s), %.0f s%s%s",
          ps->tty ? "\r" : "", p->points, 100 * done, p->time_s, p->slowest_time_s, p->fastest_time_s, elapsed, left,
          ps->tty ? "\033[K" : "\n");
  fflush(stderr);
  ps->shown = true;
  return 0;
}

/* ---- output folders, made before solving so that a bad path fails in a second ---- */

/* mkdir -p: creates `dir` and its missing parents. */
static bool make_dirs(const char *dir) {
  char *p = strdup(dir);
  if (!p) return false;
  bool ok = true;
  for (char *s = p + 1; ok; s++) {
    if (*s != '/' && *s != '\0') continue;
    char c = *s;
    *s = '\0';
    if (mkdir(p, 0777) != 0 && errno != EEXIST) ok = false;
    *s = c;
    if (!c) break;
  }
  if (ok) {
    struct stat st;
    if (stat(dir, &st) != 0) ok = false;
    else if (!S_ISDIR(st.st_mode)) {
      errno = ENOTDIR;
      ok = false;
    } else if (access(dir, W_OK | X_OK) != 0) {
      ok = false;
    }
  }
  int e = errno;
  free(p);
  errno = e;
  return ok;
}

static bool prepare_dir(const char *dir, const char *what) {
  if (make_dirs(dir)) return true;
  cli_error(CMD, false, "%s: cannot create or write to the folder '%s': %s", what, dir, strerror(errno));
  return false;
}

/* The folder a file goes into, created. */
static bool prepare_parent(const char *file, const char *what) {
  const char *slash = strrchr(file, '/');
  if (!slash) return prepare_dir(".", what);
  if (slash == file) return prepare_dir("/", what);
  char *dir = strndup(file, (size_t)(slash - file));
  if (!dir) return false;
  bool ok = prepare_dir(dir, what);
  free(dir);
  return ok;
}

/* ---- the JSON summary ---- */

static json_t *point_json(const zeus_frontier *f, size_t i) {
  zeus_frontier_point p;
  zeus_frontier_get_point(f, i, &p);
  /* At the microsecond and the microjoule, as frontier.csv writes them (zeus/format.h). */
  return json_pack("{s:I,s:f,s:f,s:f,s:f,s:f,s:b}", "iteration", (json_int_t)p.iteration, "time_s",
                   zeus_round_decimals(p.time_s, 6), "cost_j", zeus_round_decimals(p.cost_j, 6),
                   "cost_with_blocking_j", zeus_round_decimals(p.cost_with_blocking_j, 6), "eval_time_s",
                   zeus_round_decimals(p.eval_time_s, 6), "eval_energy_j", zeus_round_decimals(p.eval_energy_j, 6),
                   "dominated", p.dominated);
}

static json_t *path_or_null(const char *s) { return s ? json_string(s) : json_null(); }

static const cli_command command_template = {
    .name = "frontier",
    .usage = "zeus frontier --profile CSV --stages S --microbatches M --blocking-power W [OPTIONS]",
    .about = "Computes every Pareto-optimal GPU frequency plan of one synchronous 1F1B training iteration\n"
             "(Perseus' time–energy frontier, by Phillips–Dessouky iterative minimum cuts), from the\n"
             "all-slowest plan down to the shortest iteration time, one time unit per step.\n\n"
             "Input: a CSV with the columns stage,instruction,frequency,time,energy (others ignored): the\n"
             "time (s) and energy (J) of one forward or backward of one microbatch per stage and SM clock.\n"
             "A UTF-8 byte-order mark before the header is accepted; the file must be a regular file of at\n"
             "most 64 MiB.",
    .more = "frontier.csv: iteration,time_s,cost_j,cost_with_blocking_j,eval_time_s,eval_energy_j,dominated\n"
            "(eval_*: the plan's time and energy recomputed from the measured profile; dominated: 1 when\n"
            "another plan is at least as fast and as cheap by eval_* and better in one).\n\n"
            "Progress: a solve that takes more than a second shows its progress on stderr when stderr is a\n"
            "terminal and --json is not given (--progress always|never overrides). Output folders are\n"
            "created (with their parents) before solving.\n\n"
            "--json prints one object on stdout: num_points, dominated_points, plans_written, solve_time_s,\n"
            "out, plot, timeline (paths or null), and slowest, fastest and min_energy points (iteration,\n"
            "time_s, cost_j, cost_with_blocking_j, eval_time_s, eval_energy_j, dominated).\n\n"
            "Example:\n"
            "  zeus frontier --profile gpt3-175b+a100_sxm_bf16.csv --stages 8 --microbatches 12 \\\n"
            "      --blocking-power 83.64 --out plans --sample 20 --plot plans/frontier.svg --timeline last\n\n"
            "Environment:\n"
            "  ZEUS_LOG_LEVEL   error | warn | info | debug | off (default warn)\n",
    .args = CLI_ARGS_NONE,
};

int cmd_frontier(int argc, char **argv) {
  zeus_frontier_opts o = {0};
  zeus_frontier_write_opts wo = {0};
  const char *profile = NULL, *out = NULL, *plot = NULL;
  int stages = 0, microbatches = 0, cost_model = 0, pareto = 0, slack = 0, progress = PROGRESS_AUTO;
  double blocking = 0, unit = 0.001, noise = 0.95;
  bool json = false, allow_fewer = false, have_tl = false;
  timeline_arg tl = {0, NULL};
  const cli_opt opts[] = {
      {"profile", 0, CLI_OPT_STRING, &profile, "CSV", "instruction profile", .required = true},
      {"stages", 0, CLI_OPT_INT, &stages, "S", "pipeline stages (the profile must have at least S)", NULL, 1, 100000,
       .required = true},
      {"microbatches", 0, CLI_OPT_INT, &microbatches, "M", "microbatches per iteration (>= S unless --allow-fewer-microbatches)",
       NULL, 1, 100000, .required = true},
      {"blocking-power", 0, CLI_OPT_DOUBLE, &blocking, "W", "GPU power while blocked on pipeline communication, watts",
       NULL, 0, 1e6, .required = true},
      {"allow-fewer-microbatches", 0, CLI_OPT_FLAG, &allow_fewer, NULL,
       "accept M < S (a bubble-heavy pipeline; usually the two counts were swapped, so it is refused without this flag)"},
      {"unit-time", 0, CLI_OPT_DOUBLE, &unit, "SECONDS", "time quantum: one frontier point per unit", "0.001", 1e-9, 1000},
      {"noise-factor", 0, CLI_OPT_DOUBLE, &noise, "F", "Pareto filter retry factor in (0, 1]", "0.95", 1e-9, 1},
      {"cost-model", 0, CLI_OPT_CHOICE, &cost_model, NULL,
       "exponential (a·e^(b·t)+c) or hull (lower convex hull)", "exponential", .choices = cost_models},
      {"pareto", 0, CLI_OPT_CHOICE, &pareto, NULL,
       "options kept by the Pareto filter on time and effective cost (energy − blocking power × time) or measured "
       "energy (the original's: nothing slower than the least-energy clock)",
       "effective", .choices = paretos},
      {"slack", 0, CLI_OPT_CHOICE, &slack, NULL,
       "reclaim: instructions with slack in the measured schedule move to a slower, cheaper clock without lengthening the "
       "iteration; keep: the clocks the solver's durations give",
       "reclaim", .choices = slacks},
      {"max-iterations", 0, CLI_OPT_LONG, &o.max_iterations, "N", "stop after N points", NULL, 1, 1000000000},
      {"out", 0, CLI_OPT_STRING, &out, "DIR",
       "write DIR/frontier.csv and DIR/freqs_pipeline_%05d.py plan files (DIR and its parents are created); without it "
       "frontier.csv goes to standard output"},
      {"every", 0, CLI_OPT_LONG, &wo.every, "N", "write only every N-th plan (and the last)", NULL, 1, 1000000000},
      {"sample", 0, CLI_OPT_LONG, &wo.sample, "K", "write only K plans evenly spaced in iteration time", NULL, 2,
       1000000000},
      {"drop-dominated", 0, CLI_OPT_FLAG, &wo.drop_dominated, NULL,
       "keep only the points no other plan dominates, in frontier.csv and among the plans (--every/--sample choose among "
       "them)"},
      {"plot", 0, CLI_OPT_STRING, &plot, "FILE",
       "SVG of energy against iteration time: evaluated points (dominated ones apart), the model's, the plans written and "
       "the minimum-energy plan marked"},
      {"timeline", 0, CLI_OPT_CUSTOM, &tl, "PLAN[:FILE]",
       "SVG of one plan's pipeline; PLAN is an index, 'last' or 'min-energy' (default FILE: timeline_PLAN.svg in DIR, or "
       "the current folder)",
       .parse = parse_timeline, .seen = &have_tl},
      {"progress", 0, CLI_OPT_CHOICE, &progress, NULL, "progress on stderr: auto (a terminal, not --json), always or never",
       "auto", .choices = progresses},
      {"json", 0, CLI_OPT_FLAG, &json, NULL, "print a JSON summary on standard output (see below)"},
      {0},
  };
  cli_command c = command_template;
  c.opts = opts;
  int rc = cli_parse(&c, argc, argv, NULL, NULL);
  if (rc != CLI_CONTINUE) return rc;
  if (wo.every && wo.sample) {
    cli_error(CMD, false, "--every and --sample exclude each other (see 'zeus frontier --help')");
    return CLI_EXIT_USAGE;
  }
  o.stages = stages;
  o.microbatches = microbatches;
  o.blocking_power_w = blocking;
  o.unit_time_s = unit;
  o.noise_factor = noise;
  o.cost_model = cost_model ? ZEUS_FRONTIER_COST_HULL : ZEUS_FRONTIER_COST_EXPONENTIAL;
  o.pareto = pareto ? ZEUS_FRONTIER_PARETO_ENERGY : ZEUS_FRONTIER_PARETO_EFFECTIVE;
  o.slack = slack ? ZEUS_FRONTIER_SLACK_KEEP : ZEUS_FRONTIER_SLACK_RECLAIM;
  o.allow_fewer_microbatches = allow_fewer;
  progress_state ps = {.tty = isatty(STDERR_FILENO) != 0, .delay = 1.0};
  if (progress == PROGRESS_ALWAYS || (progress == PROGRESS_AUTO && !json && ps.tty)) {
    if (progress == PROGRESS_ALWAYS) ps.delay = 0;
    ps.interval = ps.tty ? 0.2 : 1.0;
    o.progress = on_progress;
    o.progress_ctx = &ps;
  }

  /* Every output folder exists and is writable before a long solve starts. */
  if (out && !prepare_dir(out, "--out")) return CLI_EXIT_FAIL;
  if (plot && !prepare_parent(plot, "--plot")) return CLI_EXIT_FAIL;
  if (have_tl && tl.file && !prepare_parent(tl.file, "--timeline")) return CLI_EXIT_FAIL;

  zeus_frontier_profile *p = NULL;
  zeus_frontier *f = NULL;
  char *tl_path = NULL;
  json_t *doc = NULL;
  int code = CLI_EXIT_FAIL;
  if (zeus_frontier_profile_load(&p, profile) != ZEUS_OK) {
    cli_error(CMD, true, "cannot read the profile");
    goto done;
  }
  ps.start = ps.last = mono_s();
  ps.last -= 1e9; /* the first report is due as soon as the delay is over */
  double t0 = mono_s();
  rc = zeus_frontier_solve(&f, p, &o);
  double secs = mono_s() - t0;
  if (ps.shown && ps.tty) fputs("\r\033[K", stderr);
  if (rc != ZEUS_OK) {
    cli_error(CMD, true, "cannot compute the frontier");
    goto done;
  }
  size_t npts = zeus_frontier_num_points(f), ndom = 0, emin = 0;
  zeus_frontier_point pt, best = {0};
  for (size_t i = 0; i < npts; i++) {
    zeus_frontier_get_point(f, i, &pt);
    ndom += pt.dominated;
    if (i == 0 || pt.eval_energy_j < best.eval_energy_j) {
      best = pt;
      emin = i;
    }
  }
  long plans = 0;
  if (out) {
    if ((plans = zeus_frontier_count_plans(f, &wo)) < 0 || zeus_frontier_write(f, out, &wo) != ZEUS_OK) {
      cli_error(CMD, true, "cannot write the frontier");
      goto done;
    }
  } else if (!json) {
    char *csv;
    if (zeus_frontier_csv(f, &wo, &csv) != ZEUS_OK) {
      cli_error(CMD, true, "cannot format the frontier");
      goto done;
    }
    fputs(csv, stdout);
    zeus_free(csv);
  }
  /* The plot marks the plans written (none without --out). */
  if (plot && zeus_frontier_write_plot_svg(f, plot, out ? &wo : NULL) != ZEUS_OK) {
    cli_error(CMD, true, "cannot write the plot");
    goto done;
  }
  if (have_tl) {
    size_t plan = tl.plan == PLAN_LAST ? npts - 1 : tl.plan == PLAN_MIN_ENERGY ? emin : (size_t)tl.plan;
    if (plan >= npts) {
      cli_error(CMD, false, "--timeline: plan %zu does not exist (the frontier has %zu points)", plan, npts);
      goto done;
    }
    if (tl.file) {
      tl_path = strdup(tl.file);
    } else {
      size_t len = (out ? strlen(out) : 1) + 40;
      if ((tl_path = malloc(len))) snprintf(tl_path, len, "%s/timeline_%05zu.svg", out ? out : ".", plan);
    }
    if (!tl_path || zeus_frontier_write_timeline_svg(f, plan, tl_path) != ZEUS_OK) {
      cli_error(CMD, true, "cannot write the timeline");
      goto done;
    }
  }
  zeus_frontier_point first, last;
  zeus_frontier_get_point(f, 0, &first);
  zeus_frontier_get_point(f, npts - 1, &last);
  if (json) {
    doc = json_pack("{s:I,s:I,s:I,s:f,s:o,s:o,s:o,s:o,s:o,s:o}", "num_points", (json_int_t)npts, "dominated_points",
                    (json_int_t)ndom, "plans_written", (json_int_t)plans, "solve_time_s", zeus_round_decimals(secs, 9), "out",
                    path_or_null(out), "plot", path_or_null(plot), "timeline", path_or_null(tl_path), "slowest",
                    point_json(f, 0), "fastest", point_json(f, npts - 1), "min_energy", point_json(f, emin));
    char *s = doc ? zeus_json_dumps(doc, JSON_INDENT(2)) : NULL;
    if (!s) {
      cli_error(CMD, true, "cannot format the JSON summary");
      goto done;
    }
    printf("%s\n", s);
    zeus_free(s);
  } else {
    fprintf(stderr,
            "zeus frontier: %zu points (%zu dominated), %.3f s to %.3f s, least energy %.1f J at %.3f s (plan %zu), "
            "in %.3f s of solving%s%s\n",
            npts, ndom, first.time_s, last.time_s, best.eval_energy_j, best.eval_time_s, emin, secs,
            out ? "; written to " : "", out ? out : "");
  }
  code = CLI_EXIT_OK;
done:
  json_decref(doc);
  free(tl_path);
  zeus_frontier_free(f);
  zeus_frontier_profile_free(p);
  return code;
}
