/* zeus frontier: the iteration time–energy frontier of a pipeline from an instruction profile. */
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "cli.h"

static const char *const CMD = "frontier";

static void help(FILE *out) {
  fprintf(out,
          "usage: zeus frontier --profile CSV --stages S --microbatches M --blocking-power W\n"
          "                     [--unit-time SECONDS] [--noise-factor F] [--cost-model exponential|hull]\n"
          "                     [--pareto effective|energy] [--slack reclaim|keep]\n"
          "                     [--out DIR] [--every N | --sample K] [--plot FILE.svg]\n"
          "                     [--timeline PLAN[:FILE.svg]] [--max-iterations N] [--json]\n\n"
          "Computes every Pareto-optimal GPU frequency plan of one synchronous 1F1B training iteration\n"
          "(Perseus' time–energy frontier, by Phillips–Dessouky iterative minimum cuts), from the\n"
          "all-slowest plan down to the shortest iteration time, one time unit per step.\n\n"
          "Input: a CSV with the columns stage,instruction,frequency,time,energy (others ignored): the\n"
          "time (s) and energy (J) of one forward or backward of one microbatch per stage and SM clock.\n\n"
          "Options:\n"
          "  --profile CSV          instruction profile (required)\n"
          "  --stages S             pipeline stages (required; the profile must have at least S)\n"
          "  --microbatches M       microbatches per iteration (required, >= S unless\n"
          "                         --allow-fewer-microbatches)\n"
          "  --allow-fewer-microbatches  accept M < S (a bubble-heavy pipeline; usually the two\n"
          "                         counts were swapped, so it is refused without this flag)\n"
          "  --blocking-power W     GPU power while blocked on pipeline communication, watts (required)\n"
          "  --unit-time SECONDS    time quantum (default 0.001)\n"
          "  --noise-factor F       Pareto filter retry factor in (0, 1] (default 0.95)\n"
          "  --cost-model MODEL     exponential (a·e^(b·t)+c, default) or hull (lower convex hull)\n"
          "  --pareto COST          options kept by the Pareto filter on time and effective cost\n"
          "                         (energy − blocking power × time; default) or measured energy\n"
          "                         (the original's: nothing slower than the least-energy clock)\n"
          "  --slack MODE           reclaim (default): instructions with slack in the measured\n"
          "                         schedule move to a slower, cheaper clock without lengthening the\n"
          "                         iteration; keep: the clocks the solver's durations give\n"
          "  --out DIR              write DIR/frontier.csv and DIR/freqs_pipeline_%%05d.py plan files;\n"
          "                         without it frontier.csv goes to standard output\n"
          "  --every N              write only every N-th plan (and the last)\n"
          "  --sample K             write only K plans evenly spaced in iteration time\n"
          "  --plot FILE            SVG of energy against iteration time (evaluated and model)\n"
          "  --timeline PLAN[:FILE] SVG of plan PLAN's pipeline (default FILE: timeline_PLAN.svg in\n"
          "                         DIR, or the current folder); PLAN may be 'last'\n"
          "  --max-iterations N     stop after N points\n"
          "  --json                 print a JSON summary on standard output\n\n"
          "frontier.csv: iteration,time_s,cost_j,cost_with_blocking_j,eval_time_s,eval_energy_j\n"
          "(eval_*: the plan's time and energy recomputed from the measured profile).\n\n"
          "Example:\n"
          "  zeus frontier --profile gpt3-175b+a100_sxm_bf16.csv --stages 8 --microbatches 12 \\\n"
          "      --blocking-power 83.64 --out plans --sample 20 --plot frontier.svg\n\n"
          "Environment:\n"
          "  ZEUS_LOG_LEVEL   error | warn | info | debug | off (default warn)\n");
}

static const char *need_value(int argc, char **argv, int *i) {
  if (*i + 1 >= argc) {
    cli_error(CMD, false, "%s needs a value (see 'zeus frontier --help')", argv[*i]);
    return NULL;
  }
  return argv[++*i];
}

int cmd_frontier(int argc, char **argv) {
  if (cli_wants_help(argc, argv)) {
    help(stdout);
    return CLI_EXIT_OK;
  }
  zeus_frontier_opts o = {0};
  zeus_frontier_write_opts wo = {0};
  const char *profile = NULL, *out = NULL, *plot = NULL, *timeline = NULL;
  bool json = false, have_s = false, have_m = false, have_p = false;
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i], *v;
    long l;
    double d;
    if (strcmp(a, "--json") == 0) {
      json = true;
      continue;
    }
    if (strcmp(a, "--allow-fewer-microbatches") == 0) {
      o.allow_fewer_microbatches = true;
      continue;
    }
    static const char *const with_value[] = {"--profile", "--out", "--plot", "--timeline", "--stages",
                                             "--microbatches", "--blocking-power", "--unit-time",
                                             "--noise-factor", "--cost-model", "--pareto", "--slack",
                                             "--every", "--sample", "--max-iterations"};
    bool known = false;
    for (size_t k = 0; k < sizeof with_value / sizeof with_value[0]; k++) known |= strcmp(a, with_value[k]) == 0;
    if (!known) {
      cli_error(CMD, false, "unknown option '%s' (see 'zeus frontier --help')", a);
      return CLI_EXIT_USAGE;
    }
    if (!(v = need_value(argc, argv, &i))) return CLI_EXIT_USAGE;
    if (strcmp(a, "--profile") == 0) profile = v;
    else if (strcmp(a, "--out") == 0) out = v;
    else if (strcmp(a, "--plot") == 0) plot = v;
    else if (strcmp(a, "--timeline") == 0) timeline = v;
    else if (strcmp(a, "--stages") == 0) {
      if (!cli_parse_long(CMD, a, v, 1, 100000, &l)) return CLI_EXIT_USAGE;
      o.stages = (int)l;
      have_s = true;
    } else if (strcmp(a, "--microbatches") == 0) {
      if (!cli_parse_long(CMD, a, v, 1, 100000, &l)) return CLI_EXIT_USAGE;
      o.microbatches = (int)l;
      have_m = true;
    } else if (strcmp(a, "--blocking-power") == 0) {
      if (!cli_parse_double(CMD, a, v, 0, 1e6, &d)) return CLI_EXIT_USAGE;
      o.blocking_power_w = d;
      have_p = true;
    } else if (strcmp(a, "--unit-time") == 0) {
      if (!cli_parse_double(CMD, a, v, 1e-9, 1000, &d)) return CLI_EXIT_USAGE;
      o.unit_time_s = d;
    } else if (strcmp(a, "--noise-factor") == 0) {
      if (!cli_parse_double(CMD, a, v, 1e-9, 1, &d)) return CLI_EXIT_USAGE;
      o.noise_factor = d;
    } else if (strcmp(a, "--cost-model") == 0) {
      if (strcasecmp(v, "exponential") == 0) o.cost_model = ZEUS_FRONTIER_COST_EXPONENTIAL;
      else if (strcasecmp(v, "hull") == 0) o.cost_model = ZEUS_FRONTIER_COST_HULL;
      else {
        cli_error(CMD, false, "--cost-model: expected exponential or hull, got '%s'", v);
        return CLI_EXIT_USAGE;
      }
    } else if (strcmp(a, "--pareto") == 0) {
      if (strcasecmp(v, "effective") == 0) o.pareto = ZEUS_FRONTIER_PARETO_EFFECTIVE;
      else if (strcasecmp(v, "energy") == 0) o.pareto = ZEUS_FRONTIER_PARETO_ENERGY;
      else {
        cli_error(CMD, false, "--pareto: expected effective or energy, got '%s'", v);
        return CLI_EXIT_USAGE;
      }
    } else if (strcmp(a, "--slack") == 0) {
      if (strcasecmp(v, "reclaim") == 0) o.slack = ZEUS_FRONTIER_SLACK_RECLAIM;
      else if (strcasecmp(v, "keep") == 0) o.slack = ZEUS_FRONTIER_SLACK_KEEP;
      else {
        cli_error(CMD, false, "--slack: expected reclaim or keep, got '%s'", v);
        return CLI_EXIT_USAGE;
      }
    } else if (strcmp(a, "--every") == 0) {
      if (!cli_parse_long(CMD, a, v, 1, 1000000000, &wo.every)) return CLI_EXIT_USAGE;
    } else if (strcmp(a, "--sample") == 0) {
      if (!cli_parse_long(CMD, a, v, 2, 1000000000, &wo.sample)) return CLI_EXIT_USAGE;
    } else if (strcmp(a, "--max-iterations") == 0) {
      if (!cli_parse_long(CMD, a, v, 1, 1000000000, &o.max_iterations)) return CLI_EXIT_USAGE;
    } else {
      cli_error(CMD, false, "unknown option '%s' (see 'zeus frontier --help')", a);
      return CLI_EXIT_USAGE;
    }
  }
  if (!profile || !have_s || !have_m || !have_p) {
    cli_error(CMD, false, "--profile, --stages, --microbatches and --blocking-power are required "
                          "(see 'zeus frontier --help')");
    return CLI_EXIT_USAGE;
  }
  if (wo.every && wo.sample) {
    cli_error(CMD, false, "--every and --sample exclude each other");
    return CLI_EXIT_USAGE;
  }
  long tl_plan = -1;
  char *tl_file = NULL;
  if (timeline) {
    const char *colon = strchr(timeline, ':');
    size_t len = colon ? (size_t)(colon - timeline) : strlen(timeline);
    char num[32];
    if (len == 0 || len >= sizeof num) {
      cli_error(CMD, false, "--timeline: expected PLAN[:FILE], got '%s'", timeline);
      return CLI_EXIT_USAGE;
    }
    memcpy(num, timeline, len);
    num[len] = 0;
    if (strcmp(num, "last") == 0) tl_plan = -2;
    else if (!cli_parse_long(CMD, "--timeline", num, 0, 1000000000, &tl_plan)) return CLI_EXIT_USAGE;
    if (colon && colon[1]) tl_file = strdup(colon + 1);
  }

  zeus_frontier_profile *p = NULL;
  zeus_frontier *f = NULL;
  int code = CLI_EXIT_FAIL;
  struct timespec t0, t1;
  if (zeus_frontier_profile_load(&p, profile) != ZEUS_OK) {
    cli_error(CMD, true, "cannot read the profile");
    goto done;
  }
  clock_gettime(CLOCK_MONOTONIC, &t0);
  if (zeus_frontier_solve(&f, p, &o) != ZEUS_OK) {
    cli_error(CMD, true, "cannot compute the frontier");
    goto done;
  }
  clock_gettime(CLOCK_MONOTONIC, &t1);
  double secs = (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec);
  size_t npts = zeus_frontier_num_points(f);
  if (out) {
    if (zeus_frontier_write(f, out, &wo) != ZEUS_OK) {
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
    free(csv);
  }
  if (plot && zeus_frontier_write_plot_svg(f, plot, &wo) != ZEUS_OK) {
    cli_error(CMD, true, "cannot write the plot");
    goto done;
  }
  if (timeline) {
    size_t plan = tl_plan == -2 ? npts - 1 : (size_t)tl_plan;
    if (plan >= npts) {
      cli_error(CMD, false, "--timeline: plan %zu does not exist (the frontier has %zu points)", plan, npts);
      goto done;
    }
    if (!tl_file) {
      size_t len = (out ? strlen(out) : 1) + 40;
      if (!(tl_file = malloc(len))) goto done;
      snprintf(tl_file, len, "%s/timeline_%05zu.svg", out ? out : ".", plan);
    }
    if (zeus_frontier_write_timeline_svg(f, plan, tl_file) != ZEUS_OK) {
      cli_error(CMD, true, "cannot write the timeline");
      goto done;
    }
  }
  zeus_frontier_point first, last;
  zeus_frontier_get_point(f, 0, &first);
  zeus_frontier_get_point(f, npts - 1, &last);
  if (json) {
    printf("{\"points\": %zu, \"seconds\": %.3f, \"out\": %s%s%s,\n"
           " \"slowest\": {\"time_s\": %.6f, \"cost_with_blocking_j\": %.6f, \"eval_time_s\": %.6f, \"eval_energy_j\": %.6f},\n"
           " \"fastest\": {\"time_s\": %.6f, \"cost_with_blocking_j\": %.6f, \"eval_time_s\": %.6f, \"eval_energy_j\": %.6f}}\n",
           npts, secs, out ? "\"" : "", out ? out : "null", out ? "\"" : "", first.time_s,
           first.cost_with_blocking_j, first.eval_time_s, first.eval_energy_j, last.time_s,
           last.cost_with_blocking_j, last.eval_time_s, last.eval_energy_j);
  } else {
    fprintf(stderr, "zeus frontier: %zu points, %.3f s to %.3f s, in %.3f s of solving%s%s\n", npts,
            first.time_s, last.time_s, secs, out ? "; written to " : "", out ? out : "");
  }
  code = CLI_EXIT_OK;
done:
  free(tl_file);
  zeus_frontier_free(f);
  zeus_frontier_profile_free(p);
  return code;
}
