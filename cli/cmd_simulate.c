/* zeus simulate: replays the NSDI '23 traces to evaluate the batch-size and power-limit
 * optimizers without GPUs. */
#include <jansson.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

#define CMD "simulate"

static const char *trace_dir, *gpu_name;
static zeus_trace_workload wl;
static zeus_simulate_opts sim_opts;
static long seed_opt;
static bool have_target, have_seed, all_workloads, json_output;

/* --beta: a number > 0, or inf/infinity for no early stopping. */
static bool parse_beta(const char *cmd, const char *opt, const char *text, void *dest) {
  double *out = dest;
  if (strcmp(text, "inf") == 0 || strcmp(text, "infinity") == 0) {
    *out = INFINITY;
    return true;
  }
  return cli_parse_double(cmd, opt, text, 1e-300, 1e300, out);
}

static const cli_opt sim_table[] = {
    {"trace-dir", 0, CLI_OPT_STRING, &trace_dir, "DIR", "folder of the trace CSVs",
     "$ZEUS_TRACE_DIR, else $ZEUS_DATA_DIR/nsdi23-trace", .heading = "Traces:"},
    {"gpu", 0, CLI_OPT_STRING, &gpu_name, "NAME", "which power trace: a40, v100, p100, rtx6000",
     .required = true},
    {"dataset", 0, CLI_OPT_STRING, &wl.dataset, "D",
     "the workload's dataset, as named in the traces",
     .heading = "Workload (all of them, or --all):"},
    {"network", 0, CLI_OPT_STRING, &wl.network, "N", "its network"},
    {"optimizer", 0, CLI_OPT_STRING, &wl.optimizer, "O", "its optimizer"},
    {"target-metric", 0, CLI_OPT_DOUBLE, &wl.target_metric, "T",
     "the validation metric to reach (as in the train trace's target_metric)", NULL, -1e300, 1e300,
     .seen = &have_target},
    {"max-epochs", 0, CLI_OPT_LONG, &wl.max_epochs, "E", "epochs after which a try gives up", NULL,
     1, 1e6},
    {"default-bs", 0, CLI_OPT_LONG, &wl.default_bs, "B",
     "the user's batch size; the largest batch size at or below it is used when\n"
     "the GPU's power trace lacks it",
     NULL, 1, 1099511627776.0},
    {"all", 0, CLI_OPT_FLAG, &all_workloads, NULL, "the paper's six workloads, one row each"},
    {"eta", 0, CLI_OPT_DOUBLE, &sim_opts.eta, "X",
     "cost = eta*energy + (1-eta)*max_power*time, X in [0, 1]", "0.5", 0, 1, .heading = "Knobs:"},
    {"beta", 0, CLI_OPT_CUSTOM, &sim_opts.beta, "X", "early-stopping factor, > 0 or 'inf'", "2.0",
     .parse = parse_beta},
    {"seed", 0, CLI_OPT_LONG, &seed_opt, "N",
     "random seed; the same seed gives the same result everywhere", "1", 0, 9223372036854775807.0,
     .seen = &have_seed},
    {"recurrences", 0, CLI_OPT_LONG, &sim_opts.recurrences, "R", "recurrences to simulate",
     "2 x batch sizes x power limits", 1, 1e6},
    {"json", 0, CLI_OPT_FLAG, &json_output, NULL, "print one JSON document (see below)",
     .heading = "Output:"},
    {0},
};

static const cli_command sim_cmd = {
    .name = "simulate",
    .usage =
        "zeus simulate --trace-dir DIR --gpu a40|v100|p100|rtx6000 --dataset D --network N\n"
        "              --optimizer O --target-metric T --max-epochs E --default-bs B\n"
        "              [--eta 0.5] [--beta 2.0] [--seed 1] [--recurrences R] [--json]\n"
        "zeus simulate --trace-dir DIR --gpu G --all [--eta ..] [--beta ..] [--seed ..] [--json]",
    .about =
        "Replays the NSDI'23 Zeus traces (summary_train.csv and summary_power_<gpu>.csv) to run\n"
        "one recurring job under the batch-size optimizer (pruning exploration, then Gaussian\n"
        "Thompson sampling) and the just-in-time power-limit optimizer, with no GPU. Each try\n"
        "samples one training run of the chosen batch size from the train trace; the first try\n"
        "of a batch size profiles every power limit during its first epoch, later tries use the\n"
        "limit of least cost; tries stop early at beta x the best recurrence cost. It prints\n"
        "every try (batch size, power limit, energy, time, whether it reached the target) and a\n"
        "summary: totals over the whole run, exploration included; the baseline (default batch\n"
        "size at the maximum power limit) and the oracle (batch size and limit of least expected\n"
        "cost), both expected per recurrence over the trace's runs; and the energy and time\n"
        "saved in percent against recurrences x baseline.\n"
        "\n"
        "The traces are the ones the original Zeus project published for its NSDI'23 evaluation;\n"
        "with ZEUS_DATA_DIR set to the measured-data folder (docs/data.md),\n"
        "--trace-dir can be left out.",
    .opts = sim_table,
    .more =
        "JSON: {\"trace_dir\", \"gpu\", \"options\": {\"eta\", \"beta\" (null: no early\n"
        "stopping), \"seed\"}, \"workload\": {\"dataset\", \"network\", \"optimizer\",\n"
        "\"target_metric\", \"max_epochs\", \"default_batch_size\"}, \"history\":\n"
        "[{\"recurrence\", \"try\", \"batch_size\", \"power_limit_w\", \"epochs\", \"energy_j\",\n"
        "\"time_s\", \"cost_j\", \"reached\"}], \"summary\": {\"recurrences\", \"tries\",\n"
        "\"batch_sizes\", \"default_batch_size\", \"num_power_limits\", \"max_power_w\",\n"
        "\"total\": {\"energy_j\", \"time_s\", \"cost_j\"}, \"baseline_per_recurrence\" and\n"
        "\"oracle_per_recurrence\": {\"batch_size\", \"power_limit_w\", \"energy_j\",\n"
        "\"time_s\", \"cost_j\"}, \"energy_saved_pct\", \"time_saved_pct\"}}. With --all:\n"
        "{\"trace_dir\", \"gpu\", \"options\", \"workloads\": [{\"workload\", \"summary\"}...]}.\n"
        "\n"
        "Examples:\n"
        "  zeus simulate --trace-dir \"$ZEUS_DATA_DIR/nsdi23-trace\" --gpu v100 \\\n"
        "      --dataset cifar100 --network shufflenetv2 --optimizer adadelta \\\n"
        "      --target-metric 0.6 --max-epochs 100 --default-bs 1024\n"
        "  zeus simulate --gpu v100 --all --json\n"
        "\n"
        "Environment:\n"
        "  ZEUS_TRACE_DIR      default for --trace-dir\n"
        "  ZEUS_DATA_DIR       the measured-data folder; default --trace-dir is its nsdi23-trace\n"
        "  ZEUS_LOG_LEVEL      info shows the optimizer's decisions on stderr\n"
        "  (no GPU is used: ZEUS_GPU_BACKEND and CUDA_VISIBLE_DEVICES do not matter here)\n",
    .args = CLI_ARGS_NONE,
};

static void print_workload_head(const zeus_trace_workload *w, const char *gpu,
                                const zeus_simulate_result *r, const zeus_simulate_opts *o) {
  printf("%s/%s (%s) on %s: target %g, at most %ld epochs, default batch size %ld", w->dataset,
         w->network, w->optimizer, gpu, w->target_metric, w->max_epochs, r->default_bs);
  if (r->default_bs != w->default_bs) printf(" (%ld is not in the traces)", w->default_bs);
  printf("\nbatch sizes:");
  for (size_t i = 0; i < r->num_batch_sizes; i++) printf(" %ld", r->batch_sizes[i]);
  printf("; %zu power limits; %ld recurrences; eta %g, beta %g, seed %llu\n\n", r->num_power_limits,
         r->recurrences, o->eta, o->beta, (unsigned long long)o->seed);
}

static void print_one(const zeus_trace_workload *w, const char *gpu, const zeus_simulate_result *r,
                      const zeus_simulate_opts *o) {
  print_workload_head(w, gpu, r, o);
  printf("%5s %4s %7s %8s %7s %14s %12s %8s\n", "rec", "try", "bs", "limit W", "epochs", "energy J",
         "time s", "reached");
  for (size_t i = 0; i < r->history_len; i++) {
    const zeus_simulate_try *t = &r->history[i];
    printf("%5ld %4ld %7ld %8u %7ld %14.1f %12.1f %8s\n", t->recurrence, t->try_index,
           t->batch_size, t->power_limit_w, t->epochs, t->energy_j, t->time_s,
           t->reached ? "yes" : "no");
  }
  printf("\nsummary (%zu tries over %ld recurrences)\n", r->history_len, r->recurrences);
  printf("  total:     %.6g J, %.6g s, cost %.6g\n", r->energy_j, r->time_s, r->cost);
  printf("  baseline:  batch size %ld at the maximum limit: %.6g J, %.6g s per recurrence "
         "(expected)\n",
         r->default_bs, r->baseline_energy_j, r->baseline_time_s);
  printf("  oracle:    batch size %ld at %u W: %.6g J, %.6g s per recurrence (expected)\n",
         r->oracle_bs, r->oracle_power_limit_w, r->oracle_energy_j, r->oracle_time_s);
  printf("  energy saved: %.2f %%   time saved: %.2f %% (negative: slower than the baseline)\n",
         r->energy_savings_pct, r->time_change_pct);
}

static json_t *workload_json(const zeus_trace_workload *w, long default_bs) {
  return json_pack("{s:s,s:s,s:s,s:f,s:I,s:I}", "dataset", w->dataset, "network", w->network,
                   "optimizer", w->optimizer, "target_metric", w->target_metric, "max_epochs",
                   (json_int_t)w->max_epochs, "default_batch_size", (json_int_t)default_bs);
}

/* The library's JSON of a result, as a value (NULL after an error message). */
static json_t *result_json(const zeus_simulate_result *r, bool with_history) {
  char *s;
  if (zeus_simulate_result_json(r, with_history, &s) != ZEUS_OK) {
    cli_error(CMD, true, "cannot write the JSON report");
    return NULL;
  }
  json_t *v = json_loads(s, 0, NULL);
  zeus_free(s);
  if (!v) cli_error(CMD, false, "cannot write the JSON report");
  return v;
}

static int print_doc(json_t *doc) {
  char *s = zeus_json_dumps(doc, JSON_INDENT(2));
  json_decref(doc);
  if (!s) {
    cli_error(CMD, true, "cannot write the JSON report");
    return CLI_EXIT_FAIL;
  }
  puts(s);
  zeus_free(s);
  return CLI_EXIT_OK;
}

/* The trace folder: --trace-dir, $ZEUS_TRACE_DIR, or $ZEUS_DATA_DIR/nsdi23-trace. */
static const char *default_trace_dir(char *buf, size_t len) {
  const char *d = getenv("ZEUS_TRACE_DIR");
  if (d && *d) return d;
  d = getenv("ZEUS_DATA_DIR");
  if (d && *d) {
    snprintf(buf, len, "%s/nsdi23-trace", d);
    return buf;
  }
  return NULL;
}

int cmd_simulate(int argc, char **argv) {
  zeus_simulate_opts_init(&sim_opts);
  int rc = cli_parse(&sim_cmd, argc, argv, NULL, NULL);
  if (rc != CLI_CONTINUE) return rc;
  if (have_seed) sim_opts.seed = (uint64_t)seed_opt;
  char dirbuf[4096];
  const char *dir = trace_dir ? trace_dir : default_trace_dir(dirbuf, sizeof dirbuf);
  if (!dir || !*dir) {
    cli_error(
        CMD, false,
        "--trace-dir is required (or set ZEUS_TRACE_DIR, or ZEUS_DATA_DIR to the measured-data "
        "folder that holds nsdi23-trace/)");
    return CLI_EXIT_USAGE;
  }
  zeus_trace_workload w = wl;
  zeus_simulate_opts o = sim_opts;
  if (!all_workloads) {
    const char *missing = !w.dataset      ? "--dataset"
                          : !w.network    ? "--network"
                          : !w.optimizer  ? "--optimizer"
                          : !have_target  ? "--target-metric"
                          : !w.max_epochs ? "--max-epochs"
                          : !w.default_bs ? "--default-bs"
                                          : NULL;
    if (missing) {
      cli_error(CMD, false, "%s is required (or --all for the paper's six workloads)", missing);
      return CLI_EXIT_USAGE;
    }
  } else if (w.dataset || w.network || w.optimizer || have_target || w.max_epochs || w.default_bs ||
             o.recurrences) {
    cli_error(
        CMD, false,
        "--all runs the six built-in workloads: leave out the workload options and --recurrences");
    return CLI_EXIT_USAGE;
  }
  const char *gpu = gpu_name;
  zeus_trace *t;
  if (zeus_trace_open(&t, dir, gpu) != ZEUS_OK) {
    cli_error(CMD, true, "cannot load the traces");
    return CLI_EXIT_FAIL;
  }
  json_t *doc = NULL;
  if (json_output)
    doc = json_pack("{s:s,s:s,s:{s:f,s:o,s:I}}", "trace_dir", dir, "gpu", gpu, "options", "eta",
                    o.eta, "beta", isfinite(o.beta) ? json_real(o.beta) : json_null(), "seed",
                    (json_int_t)o.seed);
  int status = CLI_EXIT_OK;
  if (!all_workloads) {
    zeus_simulate_result *r;
    if (zeus_simulate(t, &w, &o, &r) != ZEUS_OK) {
      cli_error(CMD, true, "simulation failed");
      json_decref(doc);
      zeus_trace_close(t);
      return CLI_EXIT_FAIL;
    }
    if (json_output) {
      json_t *res = result_json(r, true);
      if (res) {
        json_object_set_new(doc, "workload", workload_json(&w, r->default_bs));
        json_object_update(doc, res);
        json_decref(res);
        status = print_doc(doc);
      } else {
        json_decref(doc);
        status = CLI_EXIT_FAIL;
      }
    } else {
      print_one(&w, gpu, r, &o);
    }
    zeus_simulate_result_free(r);
    zeus_trace_close(t);
    return status;
  }
  const zeus_trace_workload *six;
  size_t n = zeus_trace_default_workloads(&six);
  json_t *list = json_array();
  if (!json_output)
    printf("%-50s %7s %6s %6s %15s %13s %12s\n", "workload (target, max epochs)", "bs", "recur",
           "tries", "energy saved %", "time saved %", "oracle bs@W");
  for (size_t i = 0; i < n; i++) {
    zeus_simulate_result *r;
    if (zeus_simulate(t, &six[i], &o, &r) != ZEUS_OK) {
      cli_error(CMD, true, "simulation of %s/%s failed", six[i].dataset, six[i].network);
      status = CLI_EXIT_FAIL;
      continue;
    }
    if (json_output) {
      json_t *res = result_json(r, false);
      if (res) {
        json_array_append_new(
            list, json_pack("{s:o,s:O}", "workload", workload_json(&six[i], r->default_bs),
                            "summary", json_object_get(res, "summary")));
        json_decref(res);
      } else {
        status = CLI_EXIT_FAIL;
      }
    } else {
      char name[128], oracle[48];
      snprintf(name, sizeof name, "%s/%s/%s (%g, %ld)", six[i].dataset, six[i].network,
               six[i].optimizer, six[i].target_metric, six[i].max_epochs);
      snprintf(oracle, sizeof oracle, "%ld@%u", r->oracle_bs, r->oracle_power_limit_w);
      printf("%-50s %7ld %6ld %6zu %15.2f %13.2f %12s\n", name, r->default_bs, r->recurrences,
             r->history_len, r->energy_savings_pct, r->time_change_pct, oracle);
    }
    zeus_simulate_result_free(r);
  }
  if (json_output) {
    json_object_set_new(doc, "workloads", list);
    if (print_doc(doc)) status = CLI_EXIT_FAIL;
  } else {
    json_decref(list);
  }
  zeus_trace_close(t);
  return status;
}
