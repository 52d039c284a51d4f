/* zeus simulate: replays the NSDI '23 traces to evaluate the batch-size and power-limit
 * optimizers without GPUs. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

#define CMD "simulate"

static void usage(FILE *out) {
  fprintf(out,
          "usage: zeus simulate --trace-dir DIR --gpu a40|v100|p100|rtx6000 --dataset D --network N\n"
          "                     --optimizer O --target-metric T --max-epochs E --default-bs B\n"
          "                     [--eta 0.5] [--beta 2.0] [--seed 1] [--recurrences R] [--json]\n"
          "       zeus simulate --trace-dir DIR --gpu G --all [--eta ..] [--beta ..] [--seed ..] [--json]\n\n"
          "Replays the NSDI'23 Zeus traces (summary_train.csv and summary_power_<gpu>.csv) to run one\n"
          "recurring job under the batch-size optimizer (pruning exploration, then Gaussian Thompson\n"
          "sampling) and the just-in-time power-limit optimizer, with no GPU. Each try samples one\n"
          "training run of the chosen batch size from the train trace; the first try of a batch size\n"
          "profiles every power limit during its first epoch, later tries use the limit of least cost;\n"
          "tries stop early at beta x the best recurrence cost. It prints every try (batch size, power\n"
          "limit, energy, time, whether it reached the target) and a summary: totals, the baseline\n"
          "(default batch size at the maximum power limit, expected over the trace's runs), the oracle\n"
          "(batch size and limit of least expected cost), and the energy saved and time change in\n"
          "percent over the whole run, exploration included.\n\n"
          "Options:\n"
          "  --trace-dir DIR     folder of the trace CSVs (default: $ZEUS_TRACE_DIR)\n"
          "  --gpu NAME          which power trace: a40, v100, p100, rtx6000\n"
          "  --dataset, --network, --optimizer   the workload, as named in the traces\n"
          "  --target-metric T   the validation metric to reach (as in the train trace's target_metric)\n"
          "  --max-epochs E      epochs after which a try gives up\n"
          "  --default-bs B      the user's batch size; the largest batch size at or below it is used\n"
          "                      when the GPU's power trace lacks it\n"
          "  --eta X             cost = eta*energy + (1-eta)*max_power*time, X in [0, 1] (default 0.5)\n"
          "  --beta X            early-stopping factor, > 0 or 'inf' (default 2.0)\n"
          "  --seed N            random seed (default 1); the same seed gives the same result everywhere\n"
          "  --recurrences R     default: 2 x batch sizes x power limits\n"
          "  --all               the paper's six workloads, one row each\n"
          "  --json              {\"history\": [...], \"summary\": {...}} (with --all: a list of workloads)\n\n"
          "Example:\n"
          "  zeus simulate --trace-dir ../shared/data/nsdi23-trace --gpu v100 --dataset cifar100 \\\n"
          "      --network shufflenetv2 --optimizer adadelta --target-metric 0.6 --max-epochs 100 \\\n"
          "      --default-bs 1024\n"
          "  zeus simulate --trace-dir ../shared/data/nsdi23-trace --gpu v100 --all\n\n"
          "Environment:\n"
          "  ZEUS_TRACE_DIR      default for --trace-dir\n"
          "  ZEUS_LOG_LEVEL      info shows the optimizer's decisions on stderr\n"
          "  (no GPU is used: ZEUS_GPU_BACKEND and CUDA_VISIBLE_DEVICES do not matter here)\n");
}

static void print_workload_head(const zeus_trace_workload *w, const char *gpu, const zeus_simulate_result *r,
                                const zeus_simulate_opts *o) {
  printf("%s/%s (%s) on %s: target %g, at most %ld epochs, default batch size %ld", w->dataset, w->network,
         w->optimizer, gpu, w->target_metric, w->max_epochs, r->default_bs);
  if (r->default_bs != w->default_bs) printf(" (%ld is not in the traces)", w->default_bs);
  printf("\nbatch sizes:");
  for (size_t i = 0; i < r->num_batch_sizes; i++) printf(" %ld", r->batch_sizes[i]);
  printf("; %zu power limits; %ld recurrences; eta %g, beta %g, seed %llu\n\n", r->num_power_limits, r->recurrences,
         o->eta, o->beta, (unsigned long long)o->seed);
}

static void print_one(const zeus_trace_workload *w, const char *gpu, const zeus_simulate_result *r,
                      const zeus_simulate_opts *o) {
  print_workload_head(w, gpu, r, o);
  printf("%5s %4s %7s %8s %7s %14s %12s %8s\n", "rec", "try", "bs", "limit W", "epochs", "energy J", "time s",
         "reached");
  for (size_t i = 0; i < r->history_len; i++) {
    const zeus_simulate_try *t = &r->history[i];
    printf("%5ld %4ld %7ld %8u %7ld %14.1f %12.1f %8s\n", t->recurrence, t->try_index, t->batch_size, t->power_limit_w,
           t->epochs, t->energy_j, t->time_s, t->reached ? "yes" : "no");
  }
  printf("\nsummary (%zu tries over %ld recurrences)\n", r->history_len, r->recurrences);
  printf("  total:     %.6g J, %.6g s, cost %.6g\n", r->energy_j, r->time_s, r->cost);
  printf("  baseline:  batch size %ld at the maximum limit: %.6g J, %.6g s per recurrence (expected)\n",
         r->default_bs, r->baseline_energy_j, r->baseline_time_s);
  printf("  oracle:    batch size %ld at %u W: %.6g J, %.6g s per recurrence (expected)\n", r->oracle_bs,
         r->oracle_power_limit_w, r->oracle_energy_j, r->oracle_time_s);
  printf("  energy saved: %.2f %%   time saved: %.2f %% (negative: slower than the baseline)\n",
         r->energy_savings_pct, r->time_change_pct);
}

static bool parse_beta(const char *text, double *out) {
  if (text && (strcmp(text, "inf") == 0 || strcmp(text, "infinity") == 0)) {
    *out = INFINITY;
    return true;
  }
  return cli_parse_double(CMD, "--beta", text, 1e-300, INFINITY, out);
}

int cmd_simulate(int argc, char **argv) {
  if (cli_wants_help(argc, argv)) {
    usage(stdout);
    return CLI_EXIT_OK;
  }
  const char *dir = getenv("ZEUS_TRACE_DIR"), *gpu = NULL;
  zeus_trace_workload w = {0};
  bool have_target = false, all = false, json = false;
  zeus_simulate_opts o;
  zeus_simulate_opts_init(&o);
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    const char *v = i + 1 < argc ? argv[i + 1] : NULL;
    long l;
    if (strcmp(a, "--all") == 0) { all = true; continue; }
    if (strcmp(a, "--json") == 0) { json = true; continue; }
    if (!v) {
      if (strncmp(a, "--", 2) == 0) cli_error(CMD, false, "%s needs a value", a);
      else cli_error(CMD, false, "unexpected argument '%s' (see zeus simulate --help)", a);
      return CLI_EXIT_USAGE;
    }
    i++;
    if (strcmp(a, "--trace-dir") == 0) dir = v;
    else if (strcmp(a, "--gpu") == 0) gpu = v;
    else if (strcmp(a, "--dataset") == 0) w.dataset = v;
    else if (strcmp(a, "--network") == 0) w.network = v;
    else if (strcmp(a, "--optimizer") == 0) w.optimizer = v;
    else if (strcmp(a, "--target-metric") == 0) {
      if (!cli_parse_double(CMD, a, v, -1e300, 1e300, &w.target_metric)) return CLI_EXIT_USAGE;
      have_target = true;
    } else if (strcmp(a, "--max-epochs") == 0) {
      if (!cli_parse_long(CMD, a, v, 1, 1000000, &w.max_epochs)) return CLI_EXIT_USAGE;
    } else if (strcmp(a, "--default-bs") == 0) {
      if (!cli_parse_long(CMD, a, v, 1, 1L << 40, &w.default_bs)) return CLI_EXIT_USAGE;
    } else if (strcmp(a, "--eta") == 0) {
      if (!cli_parse_double(CMD, a, v, 0, 1, &o.eta)) return CLI_EXIT_USAGE;
    } else if (strcmp(a, "--beta") == 0) {
      if (!parse_beta(v, &o.beta)) return CLI_EXIT_USAGE;
    } else if (strcmp(a, "--seed") == 0) {
      if (!cli_parse_long(CMD, a, v, 0, 0x7fffffffffffffffL, &l)) return CLI_EXIT_USAGE;
      o.seed = (uint64_t)l;
    } else if (strcmp(a, "--recurrences") == 0) {
      if (!cli_parse_long(CMD, a, v, 1, 1000000, &o.recurrences)) return CLI_EXIT_USAGE;
    } else {
      cli_error(CMD, false, "unknown option '%s' (see zeus simulate --help)", a);
      return CLI_EXIT_USAGE;
    }
  }
  if (!dir || !*dir) {
    cli_error(CMD, false, "--trace-dir is required (or set ZEUS_TRACE_DIR), e.g. ../shared/data/nsdi23-trace");
    return CLI_EXIT_USAGE;
  }
  if (!gpu) {
    cli_error(CMD, false, "--gpu is required: a40, v100, p100 or rtx6000");
    return CLI_EXIT_USAGE;
  }
  if (!all) {
    const char *missing = !w.dataset ? "--dataset" : !w.network ? "--network" : !w.optimizer ? "--optimizer"
                        : !have_target ? "--target-metric" : !w.max_epochs ? "--max-epochs"
                        : !w.default_bs ? "--default-bs" : NULL;
    if (missing) {
      cli_error(CMD, false, "%s is required (or --all for the paper's six workloads)", missing);
      return CLI_EXIT_USAGE;
    }
  } else if (w.dataset || w.network || w.optimizer || have_target || w.max_epochs || w.default_bs || o.recurrences) {
    cli_error(CMD, false, "--all runs the six built-in workloads: leave out the workload options and --recurrences");
    return CLI_EXIT_USAGE;
  }
  zeus_trace *t;
  if (zeus_trace_open(&t, dir, gpu) != ZEUS_OK) {
    cli_error(CMD, true, "cannot load the traces");
    return CLI_EXIT_FAIL;
  }
  int status = CLI_EXIT_OK;
  if (!all) {
    zeus_simulate_result *r;
    if (zeus_simulate(t, &w, &o, &r) != ZEUS_OK) {
      cli_error(CMD, true, "simulation failed");
      zeus_trace_close(t);
      return CLI_EXIT_FAIL;
    }
    if (json) {
      char *s;
      if (zeus_simulate_result_json(r, true, &s) == ZEUS_OK) {
        puts(s);
        free(s);
      } else {
        cli_error(CMD, true, "cannot print JSON");
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
  if (json) printf("[");
  else
    printf("%-50s %7s %6s %6s %15s %13s %12s\n", "workload (" "target, max epochs)", "bs", "recur", "tries",
           "energy saved %", "time saved %", "oracle bs@W");
  for (size_t i = 0; i < n; i++) {
    zeus_simulate_result *r;
    if (zeus_simulate(t, &six[i], &o, &r) != ZEUS_OK) {
      cli_error(CMD, true, "simulation of %s/%s failed", six[i].dataset, six[i].network);
      status = CLI_EXIT_FAIL;
      continue;
    }
    if (json) {
      char *s;
      if (zeus_simulate_result_json(r, false, &s) == ZEUS_OK) {
        printf("%s{\"dataset\":\"%s\",\"network\":\"%s\",\"optimizer\":\"%s\",\"target_metric\":%.17g,"
               "\"max_epochs\":%ld,\"result\":%s}", i ? "," : "", six[i].dataset, six[i].network, six[i].optimizer,
               six[i].target_metric, six[i].max_epochs, s);
        free(s);
      }
    } else {
      char name[128], oracle[48];
      snprintf(name, sizeof name, "%s/%s/%s (%g, %ld)", six[i].dataset, six[i].network, six[i].optimizer,
               six[i].target_metric, six[i].max_epochs);
      snprintf(oracle, sizeof oracle, "%ld@%u", r->oracle_bs, r->oracle_power_limit_w);
      printf("%-50s %7ld %6ld %6zu %15.2f %13.2f %12s\n", name, r->default_bs, r->recurrences, r->history_len,
             r->energy_savings_pct, r->time_change_pct, oracle);
    }
    zeus_simulate_result_free(r);
  }
  if (json) printf("]\n");
  zeus_trace_close(t);
  return status;
}
