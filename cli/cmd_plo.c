/* zeus plo replay: the power-limit optimizer in a simulated training loop on GPUs modelled by a
 * measured profile CSV; zeus plo demo: the same on the built-in simulated GPU. */
#include <jansson.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

typedef enum selector_kind { SEL_ENERGY, SEL_TIME, SEL_ZEUS_COST, SEL_MAX_SLOWDOWN } selector_kind;
static const char *const selector_names[] = {"energy", "time", "zeus-cost", "max-slowdown", NULL};

typedef struct options {
  const char *profile;
  int selector; /* a selector_kind */
  double eta, factor;
  bool have_eta, have_factor, json;
  long steps_per_epoch, epochs, wait, warmup, profile_steps;
  double jitter, slow_first, drift, counter_period_ms;
  long seed;
  bool original;
  double confidence;
  long max_profile_steps;
} options;

static options plo_opts = {
    .selector = SEL_ZEUS_COST, .eta = 0.5, .wait = 1, .warmup = 10, .profile_steps = 40, .seed = 1};

/* The noise's random numbers: splitmix64, and a standard normal deviate by Box-Muller. */
static uint64_t splitmix(uint64_t *s) {
  uint64_t z = (*s += 0x9e3779b97f4a7c15ULL);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}
static double gauss(uint64_t *s) {
  double u1 = ((double)(splitmix(s) >> 11) + 0.5) / 9007199254740992.0;
  double u2 = (double)(splitmix(s) >> 11) / 9007199254740992.0;
  return sqrt(-2 * log(u1)) * cos(2 * M_PI * u2);
}

/* One table for both subcommands: demo refuses --profile, replay requires it. */
static const cli_opt plo_table[] = {
    {"profile", 0, CLI_OPT_STRING, &plo_opts.profile, "FILE.csv",
     "(replay, required) the power-limit profile that models the GPUs"},
    {"selector", 0, CLI_OPT_CHOICE, &plo_opts.selector, "NAME",
     "energy | time | zeus-cost | max-slowdown", "zeus-cost", .choices = selector_names},
    {"eta", 0, CLI_OPT_DOUBLE, &plo_opts.eta, "E",
     "zeus-cost: weight of energy against time, in [0, 1]; the cost is\n"
     "eta*energy + (1-eta)*max_power*time, max_power the largest limit times the\n"
     "number of GPUs",
     "0.5", 0, 1, .seen = &plo_opts.have_eta},
    {"factor", 0, CLI_OPT_DOUBLE, &plo_opts.factor, "F",
     "max-slowdown (required with it): the lowest limit whose time is at most F\n"
     "times the time at the largest limit, F >= 1",
     NULL, 1, 1e9, .seen = &plo_opts.have_factor},
    {"steps-per-epoch", 0, CLI_OPT_LONG, &plo_opts.steps_per_epoch, "N",
     "steps in an epoch (default: enough to profile every limit in one epoch:\n"
     "wait + 1 + limits * (warmup + profile steps))",
     NULL, 1, 1e9},
    {"epochs", 0, CLI_OPT_LONG, &plo_opts.epochs, "M", "epochs to run",
     "until the optimizer is done", 1, 1e6},
    {"wait", 0, CLI_OPT_LONG, &plo_opts.wait, "W", "steps before profiling starts", "1", 0, 1e9},
    {"warmup", 0, CLI_OPT_LONG, &plo_opts.warmup, "K", "warm-up steps at each limit", "10", 0, 1e9},
    {"profile-steps", 0, CLI_OPT_LONG, &plo_opts.profile_steps, "P", "steps measured at each limit",
     "40", 1, 1e9},
    {"jitter", 0, CLI_OPT_DOUBLE, &plo_opts.jitter, "S",
     "noise: each step's work is scaled by 1 + S * a standard normal deviate\n"
     "(0.05: 5 % standard deviation)", "0", 0, 1},
    {"slow-first", 0, CLI_OPT_DOUBLE, &plo_opts.slow_first, "F",
     "noise: the first profiling window's steps take F more (0.05: 5 % slow)", "0", 0, 10},
    {"drift", 0, CLI_OPT_DOUBLE, &plo_opts.drift, "D",
     "noise: the work grows linearly by D over the original's profiling steps\n"
     "(wait + 1 + limits * (warmup + profile steps)), then stays", "0", 0, 10},
    {"counter-period-ms", 0, CLI_OPT_DOUBLE, &plo_opts.counter_period_ms, "MS",
     "the simulated energy counters tick every MS ms (a real H100: 100); windows then\n"
     "follow the ticks, as the monitor does on a real GPU", "0 (continuous)", 0, 10000},
    {"seed", 0, CLI_OPT_LONG, &plo_opts.seed, "N", "seed of the noise", "1", 0, 1e15},
    {"original", 0, CLI_OPT_FLAG, &plo_opts.original, NULL,
     "profile as the original does (sets ZEUS_PLO_PROFILING=original): one window\n"
     "of profile steps per limit, nothing measured again"},
    {"confidence", 0, CLI_OPT_DOUBLE, &plo_opts.confidence, "P",
     "the confidence mode (issue 37), P in (0, 1) such as 0.95: after the sweep, measure\n"
     "the limits that could still be the best until the choice is within the selector's\n"
     "tolerance at confidence P (looked at each time the steps double), or the cap (then\n"
     "the choice if at P, else the higher contender); 0: off\n"
     "(ZEUS_PLO_CONFIDENCE is read when 0)", "0", 0, 0.999999},
    {"max-profile-steps", 0, CLI_OPT_LONG, &plo_opts.max_profile_steps, "N",
     "the confidence mode's cap in steps (default 0: the end of the epoch in which the\n"
     "sweep ends)", "0", 0, 1e15},
    {"json", 0, CLI_OPT_FLAG, &plo_opts.json, NULL,
     "print one JSON document (see below) instead of the text report"},
    {0},
};

static const char plo_about[] =
    "Runs the power-limit optimizer (the library's zeus_plo) in a simulated training loop: every\n"
    "step begins with on_step_begin, runs one unit of work on every GPU and ends with\n"
    "on_step_end; every epoch ends with on_epoch_end. The optimizer profiles each power limit\n"
    "from the maximum down in 25 W steps (warm-up steps, then a window of profile steps), then\n"
    "applies the optimum its selector chooses. The GPUs are simulated on a virtual clock, so a\n"
    "replay takes milliseconds and never touches a real GPU.\n"
    "\n"
    "'replay' models one GPU per gpu<i>_energy column of FILE.csv, a power-limit profile\n"
    "(start_time,window_name,elapsed_time,gpu<i>_energy...; window names end in _<W>; each row\n"
    "is 40 steps at that limit), and prints every power-limit change in order, the measurements\n"
    "and the optimum. 'demo' does the same on the built-in simulated GPU (ZEUS_SIM_GPUS of them)\n"
    "and also prints the energy saved against the maximum limit.";

static const char plo_more[] =
    "set_power_limit_calls lists, in order, every change of a GPU's limit while training (the\n"
    "limits put back when the optimizer closes are not listed). An epoch ending while a limit is\n"
    "warming up or profiled puts the maximum back and tries that limit again.\n"
    "\n"
    "JSON: {\"profile\" (null for demo), \"selector\": {\"name\", \"eta\" | \"factor\"},\n"
    "\"num_gpus\", \"power_limits_w\": [profiled limits], \"optimal_power_limit_w\",\n"
    "\"set_power_limit_calls\": [{\"gpu\", \"power_limit_w\"}], \"measurements\":\n"
    "[{\"power_limit_w\", \"time_s\", \"energy_j\"}]}; each measurement is one\n"
    "profiling window, its energy summed over the GPUs.\n"
    "\n"
    "Examples:\n"
    "  zeus plo replay --profile \"$ZEUS_DATA_DIR/plo-profiles/A40+resnet50+gpu0.csv\"\n"
    "  zeus plo replay --profile prof.csv --selector max-slowdown --factor 1.1 --json\n"
    "  zeus plo replay --profile prof.csv --steps-per-epoch 100 --warmup 5 --profile-steps 20\n"
    "  ZEUS_SIM_GPUS=2 zeus plo demo --eta 0.8\n"
    "\n"
    "Environment: ZEUS_LOG_LEVEL (info shows each step of the optimizer); demo reads ZEUS_SIM_*\n"
    "(ZEUS_SIM_GPUS, ZEUS_SIM_MODEL_FILE, ...) but always runs on the virtual clock. Both use\n"
    "simulated GPUs whatever ZEUS_GPU_BACKEND says.\n";

static const cli_command plo_cmd = {
    .name = "plo",
    .usage = "zeus plo replay --profile FILE.csv [OPTIONS]\nzeus plo demo [OPTIONS]",
    .about = plo_about,
    .opts = plo_table,
    .more = plo_more,
};
static const cli_command replay_cmd = {
    .name = "plo replay",
    .usage = "zeus plo replay --profile FILE.csv [OPTIONS]",
    .about = plo_about,
    .opts = plo_table,
    .more = plo_more,
};
static const cli_command demo_cmd = {
    .name = "plo demo",
    .usage = "zeus plo demo [OPTIONS]",
    .about = plo_about,
    .opts = plo_table,
    .more = plo_more,
};

typedef struct change {
  unsigned gpu, mw;
  long epoch, step; /* step 0: at the epoch's end; -1: when the optimizer opened */
} change;

typedef struct run {
  zeus_devices *dev;
  zeus_sim_node *node;
  unsigned ngpu;
  unsigned last_mw[ZEUS_MAX_GPUS];
  change *changes;
  size_t nchanges, cap;
} run;

/* Records every GPU whose limit moved since the last look. */
static int note_changes(run *r, long epoch, long step) {
  for (unsigned g = 0; g < r->ngpu; g++) {
    unsigned mw;
    if (zeus_gpu_get_power_limit(r->dev, g, &mw) != ZEUS_OK) return CLI_EXIT_FAIL;
    if (mw == r->last_mw[g]) continue;
    if (r->nchanges == r->cap) {
      size_t cap = r->cap ? 2 * r->cap : 64;
      change *c = realloc(r->changes, cap * sizeof *c);
      if (!c) return CLI_EXIT_FAIL;
      r->changes = c;
      r->cap = cap;
    }
    r->changes[r->nchanges++] = (change){g, mw, epoch, step};
    r->last_mw[g] = mw;
  }
  return CLI_EXIT_OK;
}

/* The checks between options that the table cannot express. */
static int check_options(const char *cmd, bool demo, const options *o) {
  if (!demo && !o->profile) {
    cli_error(cmd, false, "--profile FILE.csv is required (see 'zeus plo replay --help')");
    return CLI_EXIT_USAGE;
  }
  if (demo && o->profile) {
    cli_error(cmd, false,
              "--profile is for 'zeus plo replay'; demo models its GPUs with ZEUS_SIM_*");
    return CLI_EXIT_USAGE;
  }
  if (o->have_eta && o->selector != SEL_ZEUS_COST) {
    cli_error(cmd, false, "--eta applies to --selector zeus-cost only");
    return CLI_EXIT_USAGE;
  }
  if (o->have_factor && o->selector != SEL_MAX_SLOWDOWN) {
    cli_error(cmd, false, "--factor applies to --selector max-slowdown only");
    return CLI_EXIT_USAGE;
  }
  if (o->selector == SEL_MAX_SLOWDOWN && !o->have_factor) {
    cli_error(cmd, false, "--selector max-slowdown needs --factor F (the allowed slowdown, >= 1)");
    return CLI_EXIT_USAGE;
  }
  return CLI_EXIT_OK;
}

static void print_changes(const run *r) {
  printf("power-limit changes, in order:\n");
  if (r->nchanges == 0) printf("  (none)\n");
  for (size_t i = 0; i < r->nchanges;) {
    const change *c = &r->changes[i];
    size_t j = i + 1;
    while (j < r->nchanges && r->changes[j].mw == c->mw && r->changes[j].epoch == c->epoch &&
           r->changes[j].step == c->step)
      j++;
    char where[64];
    if (c->step > 0) snprintf(where, sizeof where, "epoch %ld, step %ld", c->epoch, c->step);
    else if (c->step < 0) snprintf(where, sizeof where, "at start");
    else snprintf(where, sizeof where, "epoch %ld, at its end", c->epoch);
    printf("  %-22s GPU%s ", where, j - i > 1 ? "s" : "");
    for (size_t k = i; k < j; k++) printf("%s%u", k > i ? "," : "", r->changes[k].gpu);
    printf(" -> %u W\n", c->mw / 1000);
    i = j;
  }
}

static void print_table(const zeus_plo_measurement *m, size_t n, unsigned opt_w, double eta,
                        unsigned ngpu, bool demo) {
  unsigned max_w = 0;
  size_t at_max = 0, at_opt = 0;
  for (size_t i = 0; i < n; i++) {
    if (m[i].power_limit_w > max_w) {
      max_w = m[i].power_limit_w;
      at_max = i;
    }
    if (m[i].power_limit_w == opt_w) at_opt = i;
  }
  printf("\nmeasurements (per window of the profile steps; energy summed over %u GPU%s):\n", ngpu,
         ngpu == 1 ? "" : "s");
  char cost_head[32];
  snprintf(cost_head, sizeof cost_head, "cost (eta %g)", eta);
  printf("  %8s %12s %14s %16s\n", "limit W", "time s", "energy J", cost_head);
  for (size_t i = 0; i < n; i++)
    printf("  %8u %12.4f %14.3f %16.3f%s\n", m[i].power_limit_w, m[i].time_s, m[i].energy_j,
           zeus_cost(m[i].energy_j, m[i].time_s, eta, (double)max_w * ngpu),
           m[i].power_limit_w == opt_w ? "  <- chosen" : "");
  printf("\noptimal power limit: %u W\n", opt_w);
  if (demo && m[at_max].energy_j > 0 && m[at_max].time_s > 0) {
    double de = m[at_max].energy_j - m[at_opt].energy_j;
    double dt = m[at_opt].time_s - m[at_max].time_s;
    printf(
        "against the maximum limit (%u W): energy %s %.3f J per window (%.1f%%), time %+.4f s "
        "(%+.1f%%)\n",
        max_w, de >= 0 ? "saved" : "added", de >= 0 ? de : -de,
        100.0 * (de >= 0 ? de : -de) / m[at_max].energy_j, dt, 100.0 * dt / m[at_max].time_s);
  }
}

/* What the choice could not tell apart and the confidence it reached (issue 37), when known. */
static void print_report(const zeus_plo *plo) {
  double conf = zeus_plo_confidence(plo);
  if (isnan(conf)) return;
  const unsigned *cw;
  size_t nc = zeus_plo_contenders(plo, &cw);
  printf("could not tell apart from:");
  if (!nc) printf(" none (no other limit within the measured noise)");
  for (size_t i = 0; i < nc; i++) printf("%s %u W", i ? "," : "", cw[i]);
  printf("\nconfidence reached: %.3f\n", conf);
}

static int print_json(const run *r, const options *o, bool demo, const unsigned *limits,
                      size_t nlimits, const zeus_plo_measurement *m, size_t n, unsigned opt_w,
                      const zeus_plo *plo) {
  json_t *calls = json_array(), *meas = json_array(), *lims = json_array(), *sel;
  for (size_t i = 0; i < r->nchanges; i++)
    json_array_append_new(calls, json_pack("{s:i,s:f}", "gpu", (json_int_t)r->changes[i].gpu,
                                           "power_limit_w", r->changes[i].mw / 1000.0));
  for (size_t i = 0; i < n; i++)
    json_array_append_new(
        meas, json_pack("{s:f,s:f,s:f}", "power_limit_w", (double)m[i].power_limit_w, "time_s",
                        m[i].time_s, "energy_j", m[i].energy_j));
  for (size_t i = 0; i < nlimits; i++) json_array_append_new(lims, json_real(limits[i]));
  if (o->selector == SEL_ZEUS_COST)
    sel = json_pack("{s:s,s:f}", "name", selector_names[o->selector], "eta", o->eta);
  else if (o->selector == SEL_MAX_SLOWDOWN)
    sel = json_pack("{s:s,s:f}", "name", selector_names[o->selector], "factor", o->factor);
  else sel = json_pack("{s:s}", "name", selector_names[o->selector]);
  json_t *out = json_pack("{s:o,s:o,s:I,s:o,s:f,s:o,s:o}", "profile",
                          demo ? json_null() : json_string(o->profile), "selector", sel, "num_gpus",
                          (json_int_t)r->ngpu, "power_limits_w", lims, "optimal_power_limit_w",
                          (double)opt_w, "set_power_limit_calls", calls, "measurements", meas);
  double conf = zeus_plo_confidence(plo);
  if (!isnan(conf)) {
    const unsigned *cw;
    size_t nc = zeus_plo_contenders(plo, &cw);
    json_t *ca = json_array();
    for (size_t i = 0; i < nc; i++) json_array_append_new(ca, json_real(cw[i]));
    json_object_set_new(out, "contenders_w", ca);
    json_object_set_new(out, "confidence", json_real(conf));
  }
  zeus_json_round_by_unit(out); /* each number at its resolution (docs/output.md) */
  char *s = zeus_json_dumps(out, JSON_INDENT(2));
  json_decref(out);
  if (!s) {
    cli_error(demo ? "plo demo" : "plo replay", true, "cannot write the JSON report");
    return CLI_EXIT_FAIL;
  }
  puts(s);
  zeus_free(s);
  return CLI_EXIT_OK;
}

/* Opens the simulated GPUs, runs the loop, prints. */
static int replay(const char *cmd, bool demo, const options *o) {
  zeus_sim_config *cfg = NULL;
  int rc = demo ? zeus_sim_config_from_env(&cfg) : zeus_sim_config_load(&cfg, o->profile, 40);
  if (rc) {
    cli_error(cmd, true, demo ? "cannot set up the simulated GPU" : "cannot use the profile");
    return CLI_EXIT_FAIL;
  }
  cfg->clock = ZEUS_SIM_CLOCK_VIRTUAL;
  for (unsigned g = 0; g < cfg->num_gpus && cfg->gpus; g++)
    if (o->counter_period_ms > 0) cfg->gpus[g].counter_period_s = o->counter_period_ms / 1000;
  if (o->original) setenv("ZEUS_PLO_PROFILING", "original", 1);
  zeus_devices_opts dopts = {.backend = "sim", .sim = cfg, .all_devices = true};
  run r = {0};
  zeus_monitor *mon = NULL;
  zeus_plo *plo = NULL;
  int exit_code = CLI_EXIT_FAIL;
  rc = zeus_devices_open(&r.dev, &dopts);
  zeus_sim_config_free(cfg);
  if (rc) {
    cli_error(cmd, true, "cannot open the simulated GPUs");
    return CLI_EXIT_FAIL;
  }
  r.node = zeus_devices_sim_node(r.dev);
  r.ngpu = zeus_gpu_count(r.dev);
  static const unsigned no_cpu[1];
  zeus_monitor_opts mo = {.devices = r.dev, .cpu_indices = no_cpu, .num_cpu_indices = 0};
  /* a ticking counter: windows follow its ticks, as the monitor does on a real GPU */
  if (o->counter_period_ms > 0) mo.energy_source = ZEUS_ENERGY_SAMPLED;
  if (zeus_monitor_open(&mon, &mo)) {
    cli_error(cmd, true, "cannot measure the simulated GPUs");
    goto out;
  }
  for (unsigned g = 0; g < r.ngpu; g++) zeus_gpu_get_power_limit(r.dev, g, &r.last_mw[g]);

  zeus_selector sel;
  switch (o->selector) {
    case SEL_ENERGY:
      rc = zeus_selector_energy(&sel);
      break;
    case SEL_TIME:
      rc = zeus_selector_time(&sel);
      break;
    case SEL_ZEUS_COST:
      rc = zeus_selector_zeus_cost(&sel, o->eta, r.ngpu);
      break;
    default:
      rc = zeus_selector_max_slowdown(&sel, o->factor);
      break;
  }
  if (rc) {
    cli_error(cmd, true, "bad selector");
    exit_code = CLI_EXIT_USAGE;
    goto out;
  }
  zeus_plo_opts po;
  zeus_plo_opts_init(&po);
  po.selector = &sel;
  po.wait_steps = o->wait;
  po.warmup_steps = o->warmup;
  po.profile_steps = o->profile_steps;
  po.confidence = o->confidence;
  po.max_profile_steps = o->max_profile_steps;
  if (zeus_plo_open(&plo, mon, &po)) {
    cli_error(cmd, true, "cannot start the optimizer");
    goto out;
  }
  if (note_changes(&r, 0, -1)) goto failed_read;
  const unsigned *limits;
  size_t nlimits = zeus_plo_power_limits(plo, &limits);
  long spe = o->steps_per_epoch ? o->steps_per_epoch
                                : o->wait + 1 + (long)nlimits * (o->warmup + o->profile_steps);
  if (!o->json) {
    printf("%s: %u simulated GPU%s%s%s; %s selector", demo ? "zeus plo demo" : "zeus plo replay",
           r.ngpu, r.ngpu == 1 ? "" : "s", demo ? "" : " modelled by ", demo ? "" : o->profile,
           selector_names[o->selector]);
    if (o->selector == SEL_ZEUS_COST) printf(" (eta %g, world size %u)", o->eta, r.ngpu);
    if (o->selector == SEL_MAX_SLOWDOWN) printf(" (factor %g)", o->factor);
    printf("\npower limits to profile:");
    for (size_t i = 0; i < nlimits; i++) printf(" %u", limits[i]);
    printf(" W\nwait %ld, warmup %ld, profile %ld steps; %ld steps per epoch\n\n", o->wait,
           o->warmup, o->profile_steps, spe);
  }

  /* An interrupted limit starts again at an epoch's first step and needs 1 + K + P step begins;
   * shorter epochs never finish one. Longer ones finish at least one limit per epoch after the
   * wait, so running "until done" ends. */
  if (!o->epochs && spe < 1 + o->warmup + o->profile_steps) {
    cli_error(cmd, false,
              "an epoch of %ld steps is too short to profile one power limit (it needs at least "
              "1 + warmup + profile steps = %ld); raise --steps-per-epoch",
              spe, 1 + o->warmup + o->profile_steps);
    goto out;
  }
  double units[ZEUS_MAX_GPUS];
  for (unsigned g = 0; g < r.ngpu; g++) units[g] = 1.0;
  zeus_plo_set_epoch_steps(plo, spe);
  uint64_t seed = (uint64_t)o->seed * 0x2545f4914f6cdd1dULL + 1;
  long orig_steps = o->wait + 1 + (long)nlimits * (o->warmup + o->profile_steps), step = 0, done_step = 0;
  bool noisy = o->jitter > 0 || o->slow_first > 0 || o->drift > 0;
  long epoch = 0;
  for (;;) {
    if (o->epochs && epoch == o->epochs) break;
    if (!o->epochs && zeus_plo_get_state(plo) == ZEUS_PLO_DONE) break;
    epoch++;
    zeus_plo_on_epoch_begin(plo);
    for (long s = 1; s <= spe; s++) {
      if (zeus_plo_on_step_begin(plo)) {
        cli_error(cmd, true, "epoch %ld, step %ld", epoch, s);
        goto out;
      }
      if (note_changes(&r, epoch, s)) goto failed_read;
      if (noisy) { /* the same noise as the robustness figures (src/plo/noisy_replay.c) */
        const zeus_plo_measurement *mm;
        bool first = zeus_plo_get_state(plo) == ZEUS_PLO_PROFILING && zeus_plo_measurements(plo, &mm) == 0;
        double f = 1 + o->jitter * gauss(&seed);
        if (first) f *= 1 + o->slow_first;
        f *= 1 + o->drift * fmin(1.0, (double)step / (double)orig_steps);
        for (unsigned g = 0; g < r.ngpu; g++) units[g] = f < 0.1 ? 0.1 : f;
      }
      step++;
      if (!done_step && zeus_plo_get_state(plo) == ZEUS_PLO_DONE) done_step = step;
      if (zeus_sim_work_all(r.node, units, NULL)) {
        cli_error(cmd, true, "simulated work failed");
        goto out;
      }
      zeus_plo_on_step_end(plo);
    }
    if (zeus_plo_on_epoch_end(plo)) {
      cli_error(cmd, true, "end of epoch %ld", epoch);
      goto out;
    }
    if (note_changes(&r, epoch, 0)) goto failed_read;
  }
  if (zeus_plo_get_state(plo) != ZEUS_PLO_DONE) {
    const zeus_plo_measurement *m;
    size_t n = zeus_plo_measurements(plo, &m);
    cli_error(
        cmd, false,
        "the optimizer is not done after %ld epoch%s of %ld steps (%zu of %zu limits profiled); "
        "raise --epochs or --steps-per-epoch",
        epoch, epoch == 1 ? "" : "s", spe, n, nlimits);
    goto out;
  }
  const zeus_plo_measurement *m;
  size_t n = zeus_plo_measurements(plo, &m);
  unsigned opt = zeus_plo_optimal_power_limit_w(plo);
  if (o->json) {
    exit_code = print_json(&r, o, demo, limits, nlimits, m, n, opt, plo);
  } else {
    print_changes(&r);
    if (done_step)
      printf("profiling took %ld steps (the original's: %ld on these settings)\n", done_step, orig_steps);
    print_table(m, n, opt, o->eta, r.ngpu, demo);
    print_report(plo);
    exit_code = CLI_EXIT_OK;
  }
  goto out;
failed_read:
  cli_error(cmd, true, "cannot read the power limits of the simulated GPUs");
out:
  zeus_plo_close(plo);
  zeus_monitor_close(mon);
  zeus_devices_close(r.dev);
  free(r.changes);
  return exit_code;
}

int cmd_plo(int argc, char **argv) {
  static const char *const subcommands[] = {"replay", "demo", NULL};
  if (argc < 2 || argv[1][0] == '-') {
    int rc = cli_parse(&plo_cmd, argc, argv, NULL, NULL);
    if (rc != CLI_CONTINUE) return rc;
    cli_pick("plo", "subcommand", NULL, subcommands);
    fprintf(stderr, "(see 'zeus plo --help')\n");
    return CLI_EXIT_USAGE;
  }
  int which = cli_pick("plo", "subcommand", argv[1], subcommands);
  if (which < 0) return CLI_EXIT_USAGE;
  bool demo = which == 1;
  const cli_command *c = demo ? &demo_cmd : &replay_cmd;
  int rc = cli_parse(c, argc - 1, argv + 1, NULL, NULL);
  if (rc != CLI_CONTINUE) return rc;
  if ((rc = check_options(c->name, demo, &plo_opts))) return rc;
  return replay(c->name, demo, &plo_opts);
}
