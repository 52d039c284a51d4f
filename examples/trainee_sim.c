/* Example: a training program that speaks the recurring-job protocol (zeus_job) on the simulated
 * GPU, so that `zeus run` works end to end with no GPU.
 *
 *   trainee_sim --bs B [--lr LR] [--seed S] [--epochs E] [--samples N] [--eval-samples N]
 *
 * It "trains" on a synthetic convergence model: the validation accuracy after epoch e is
 *     A(bs) * (1 - exp(-e / tau(bs, lr))) + noise,   noise ~ Normal(0, 0.01) from the seed,
 * with tau = 2 + 4 bs/1024 + 8 (16/bs), scaled up by 1 + 0.5 |ln(lr / (0.1 sqrt(bs/256)))| when
 * the learning rate is off its square-root-scaled ideal, and A = 0.75 up to batch size 1024 but
 * 0.58 above it: large batch sizes never reach a target of 0.6. Each training step does
 * bs/128 + 0.25 units of simulated work on every GPU (a fixed per-step overhead makes small batch
 * sizes wasteful), evaluation 0.5 units per step of 256 samples. The simulated GPUs come from the
 * ZEUS_SIM_* settings (ZEUS_SIM_GPUS, ZEUS_SIM_MODEL_FILE...) but always run on the virtual clock,
 * so a 100-epoch run takes milliseconds.
 *
 * Settings come from the ZEUS_* environment that `zeus run` sets (ZEUS_TARGET_METRIC is required;
 * see <zeus/bso.h>); the result goes to $ZEUS_LOG_DIR/$ZEUS_JOB_ID+bs<B>.train.json. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <zeus.h>

#include "opt.h" /* the zeus CLI's option parser (cli/opt.h) */

static void die(const char *what) {
  fprintf(stderr, "trainee_sim: %s: %s\n", what, zeus_errmsg());
  exit(1);
}

static long bs, epochs = 100, samples = 50000, eval_samples = 10000, seed = 1;
static double lr = NAN;

static const cli_opt opts[] = {
    {"bs", 0, CLI_OPT_LONG, &bs, "B", "batch size", NULL, 1, 1e9, .required = true},
    {"lr", 0, CLI_OPT_DOUBLE, &lr, "LR", "learning rate (> 0)", "the ideal one for B", 1e-300, 1e300},
    {"seed", 0, CLI_OPT_LONG, &seed, "S", "training seed (the noise of the accuracy)", "1", 0, 9.2e18},
    {"epochs", 0, CLI_OPT_LONG, &epochs, "E", "epochs at most", "100", 1, 1e9},
    {"samples", 0, CLI_OPT_LONG, &samples, "N", "training samples per epoch", "50000", 1, 1e12},
    {"eval-samples", 0, CLI_OPT_LONG, &eval_samples, "N", "evaluation samples per epoch", "10000", 1,
     1e12},
    {0},
};

static const cli_command cmd = {
    .name = "trainee_sim",
    .program = "trainee_sim",
    .usage = "trainee_sim --bs B [--lr LR] [--seed S] [--epochs E] [--samples N] [--eval-samples N]",
    .about = "A training program that speaks the recurring-job protocol (zeus_job) on simulated GPUs,\n"
             "for 'zeus run': it trains a synthetic model whose accuracy after each epoch depends on\n"
             "the batch size and learning rate, profiles the power limits in its first epoch, stops\n"
             "early on cost, and writes its result to $ZEUS_LOG_DIR/$ZEUS_JOB_ID+bs<B>.train.json.",
    .opts = opts,
    .more = "Example:\n"
            "  ZEUS_GPU_BACKEND=sim zeus run --batch-sizes 64,128,256 --default-bs 128 \\\n"
            "      --target-metric 0.6 --max-epochs 40 -- trainee_sim --bs {bs} --seed {seed}\n\n"
            "Environment: the ZEUS_* settings 'zeus run' sets (ZEUS_TARGET_METRIC is required; see\n"
            "<zeus/bso.h>), ZEUS_SIM_* (always on the virtual clock), ZEUS_LOG_LEVEL.\n",
    .args = CLI_ARGS_NONE,
};

int main(int argc, char **argv) {
  int parsed = cli_parse(&cmd, argc, argv, NULL, NULL);
  if (parsed != CLI_CONTINUE) return parsed;
  zeus_set_log_callback(zeus_log_stderr_sink, NULL);
  if (zeus_log_init_stderr(NULL) != ZEUS_OK) die("ZEUS_LOG_LEVEL");

  /* Simulated GPUs as configured, on the virtual clock. */
  zeus_sim_config *cfg;
  if (zeus_sim_config_from_env(&cfg) != ZEUS_OK) die("simulated GPU settings");
  cfg->clock = ZEUS_SIM_CLOCK_VIRTUAL;
  zeus_devices_opts dopts = {.backend = "sim", .sim = cfg, .all_devices = true};
  zeus_devices *dev;
  if (zeus_devices_open(&dev, &dopts) != ZEUS_OK) die("opening the simulated GPUs");
  zeus_sim_config_free(cfg);
  zeus_sim_node *node = zeus_devices_sim_node(dev);
  unsigned ngpu = zeus_gpu_count(dev);
  static const unsigned no_cpu[1] = {0};
  zeus_monitor_opts mopts = {.devices = dev, .cpu_indices = no_cpu, .num_cpu_indices = 0};
  zeus_monitor *mon;
  if (zeus_monitor_open(&mon, &mopts) != ZEUS_OK) die("opening the monitor");

  long steps = (samples + bs - 1) / bs, eval_steps = (eval_samples + 255) / 256;
  zeus_job_opts jo = {.batch_size = bs, .max_epochs = epochs, .steps_per_epoch = steps,
                      .eval_steps_per_epoch = eval_steps, .monitor = mon};
  zeus_job *job;
  if (zeus_job_open(&job, &jo) != ZEUS_OK) die("starting the job");
  zeus_job_info info;
  zeus_job_get_info(job, &info);
  printf("trainee_sim: batch size %ld, %ld steps per epoch, %u simulated GPU%s, target %g, cost threshold %g%s\n", bs,
         steps, ngpu, ngpu == 1 ? "" : "s", info.target_metric, info.cost_threshold,
         info.profiling ? ", profiling power limits in epoch 1" : "");

  /* The convergence model. */
  double ideal_lr = 0.1 * sqrt((double)bs / 256.0);
  double tau = 2.0 + 4.0 * (double)bs / 1024.0 + 8.0 * (16.0 / (double)bs);
  if (!isnan(lr)) tau *= 1.0 + 0.5 * fabs(log(lr / ideal_lr));
  double ceiling = bs <= 1024 ? 0.75 : 0.58;
  zeus_rng rng;
  zeus_rng_seed(&rng, (uint64_t)seed);

  double *units = calloc(ngpu, sizeof *units), *eval_units = calloc(ngpu, sizeof *eval_units);
  if (!units || !eval_units) {
    fprintf(stderr, "trainee_sim: out of memory\n");
    return 1;
  }
  for (unsigned g = 0; g < ngpu; g++) {
    units[g] = (double)bs / 128.0 + 0.25;
    eval_units[g] = 0.5;
  }
  bool more;
  long epoch;
  int rc;
  while ((rc = zeus_job_next_epoch(job, &more, &epoch)) == ZEUS_OK && more) {
    if (zeus_job_train_begin(job)) die("epoch begin");
    for (long s = 0; s < steps; s++) {
      if (zeus_job_train_step_begin(job) || zeus_sim_work_all(node, units, NULL) || zeus_job_train_step_end(job))
        die("training step");
    }
    if (zeus_job_train_end(job) || zeus_job_eval_begin(job)) die("evaluation");
    for (long s = 0; s < eval_steps; s++) {
      if (zeus_job_eval_step_begin(job) || zeus_sim_work_all(node, eval_units, NULL) || zeus_job_eval_step_end(job))
        die("evaluation step");
    }
    if (zeus_job_eval_end(job)) die("evaluation end");
    double acc = ceiling * (1.0 - exp(-(double)(epoch + 1) / tau)) + 0.01 * zeus_rng_normal(&rng);
    if (zeus_job_report_metric(job, acc, true)) die("reporting the metric");
    zeus_job_get_info(job, &info);
    printf("epoch %ld: accuracy %.4f (%.1f s, %.0f J so far, power limit %u W)\n", epoch + 1, acc, info.time_s,
           info.energy_j, info.optimal_power_limit_w);
  }
  if (rc != ZEUS_OK) die("deciding the next epoch");
  zeus_job_get_info(job, &info);
  printf("trainee_sim: %s after %ld epochs: %.1f s, %.0f J, cost %.0f -> %s\n",
         info.reached ? "reached the target" : "stopped", info.epochs, info.time_s, info.energy_j, info.cost,
         info.train_json);
  zeus_job_close(job);
  zeus_monitor_close(mon);
  zeus_devices_close(dev);
  free(units);
  free(eval_units);
  return 0;
}
