/* The power-limit optimizer replayed on a measured profile with a noisy workload: what
 * `zeus plo replay --runs`, bench_plo and test_plo_robust use to measure how often the optimizer
 * chooses right when steps jitter, the first window is slow and the work drifts (issue 30). */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/core.h"
#include "plo/plo_internal.h"
#include "zeus/sim.h"

void zeus__plo_noise_init(zeus__plo_noise *n) {
  memset(n, 0, sizeof *n);
  n->wait_steps = 1;
  n->warmup_steps = 3;
  n->profile_steps = 10;
}

void zeus__plo_noise_issue30(zeus__plo_noise *n) {
  zeus__plo_noise_init(n);
  n->jitter = 0.05;
  n->slow_first = 0.05;
  n->drift = 0.02;
  n->counter_period_s = 0.1;
}

static uint64_t splitmix(uint64_t *s) {
  uint64_t z = (*s += 0x9e3779b97f4a7c15ULL);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

double zeus__plo_gauss(uint64_t *s) {
  double u1 = ((double)(splitmix(s) >> 11) + 0.5) / 9007199254740992.0;
  double u2 = (double)(splitmix(s) >> 11) / 9007199254740992.0;
  return sqrt(-2 * log(u1)) * cos(2 * M_PI * u2);
}

int zeus__plo_noisy_replay(const char *profile, const zeus_selector *sel, const zeus__plo_noise *nz, int mode,
                           zeus__plo_replay_result *res) {
  memset(res, 0, sizeof *res);
  zeus_sim_config *cfg = NULL;
  int rc = zeus_sim_config_load(&cfg, profile, 40);
  if (rc) return rc;
  cfg->clock = ZEUS_SIM_CLOCK_VIRTUAL;
  for (unsigned g = 0; g < cfg->num_gpus && cfg->gpus; g++) {
    cfg->gpus[g].counter_period_s = nz->counter_period_s;
    if (nz->hardware && (rc = zeus_sim_hardware_profile(nz->hardware, &cfg->gpus[g].hw))) {
      zeus_sim_config_free(cfg);
      return rc;
    }
  }
  zeus_devices_opts dopts = {.backend = "sim", .sim = cfg, .all_devices = true};
  zeus_devices *dev = NULL;
  zeus_monitor *mon = NULL;
  zeus_plo *plo = NULL;
  rc = zeus_devices_open(&dev, &dopts);
  zeus_sim_config_free(cfg);
  if (rc) return rc;
  zeus_sim_node *node = zeus_devices_sim_node(dev);
  unsigned ngpu = zeus_gpu_count(dev);
  static const unsigned no_cpu[1];
  zeus_monitor_opts mo = {.devices = dev, .cpu_indices = no_cpu, .num_cpu_indices = 0};
  /* A counter that ticks is what a real GPU has, where the monitor follows its ticks (the sampled
   * source, chosen by auto there); on the virtual clock auto cannot tell, so it is asked for. */
  if (nz->counter_period_s > 0 || nz->hardware) mo.energy_source = ZEUS_ENERGY_SAMPLED;
  if ((rc = zeus_monitor_open(&mon, &mo))) goto out;
  zeus_selector s = *sel;
  if (s.kind == ZEUS_SELECTOR_ZEUS_COST && s.world_size == 0) s.world_size = ngpu;
  zeus_plo_opts po;
  zeus_plo_opts_init(&po);
  po.selector = &s;
  po.wait_steps = nz->wait_steps;
  po.warmup_steps = nz->warmup_steps;
  po.profile_steps = nz->profile_steps;
  po.no_signal_handlers = true;
  po.profile_path = nz->profile_path;
  po.confidence = nz->confidence;
  po.max_profile_steps = nz->max_profile_steps;
  if ((rc = zeus__plo_open_mode(&plo, mon, &po, mode))) goto out;
  if (nz->steps_per_epoch > 0 && (rc = zeus_plo_set_epoch_steps(plo, nz->steps_per_epoch))) goto out;
  const unsigned *limits;
  size_t nlimits = zeus_plo_power_limits(plo, &limits);
  long orig_steps = nz->wait_steps + 1 + (long)nlimits * (nz->warmup_steps + nz->profile_steps);
  long spe = nz->steps_per_epoch > 0 ? nz->steps_per_epoch : 3 * orig_steps;
  if (nz->steps_per_epoch <= 0 && (rc = zeus_plo_set_epoch_steps(plo, spe))) goto out;
  uint64_t seed = nz->seed * 0x2545f4914f6cdd1dULL + 1;
  long step = 0;
  double units[ZEUS_MAX_GPUS];
  for (long epoch = 0; epoch < 1000 && zeus_plo_get_state(plo) != ZEUS_PLO_DONE; epoch++) {
    for (long k = 0; k < spe; k++) {
      if ((rc = zeus_plo_on_step_begin(plo))) goto out;
      const zeus_plo_measurement *m;
      bool first_window = zeus_plo_get_state(plo) == ZEUS_PLO_PROFILING && zeus_plo_measurements(plo, &m) == 0;
      double f = 1 + nz->jitter * zeus__plo_gauss(&seed);
      if (first_window) f *= 1 + nz->slow_first;
      f *= 1 + nz->drift * fmin(1.0, (double)step / (double)orig_steps);
      if (f < 0.1) f = 0.1;
      for (unsigned g = 0; g < ngpu; g++) units[g] = f;
      if ((rc = zeus_sim_work_all(node, units, NULL))) goto out;
      step++;
      zeus_plo_on_step_end(plo);
    }
    if ((rc = zeus_plo_on_epoch_end(plo))) goto out;
  }
  if (zeus_plo_get_state(plo) != ZEUS_PLO_DONE) {
    rc = zeus__error(ZEUS_EIO, "noisy replay of '%s': the optimizer is not done", profile);
    goto out;
  }
  res->chosen_w = zeus_plo_optimal_power_limit_w(plo);
  res->ngpu = ngpu;
  res->steps = zeus__plo_profiling_steps(plo);
  res->original_steps = orig_steps;
  const zeus_plo_measurement *m;
  res->n = zeus_plo_measurements(plo, &m);
  if (res->n > ZEUS__PLO_REPLAY_MAX) res->n = ZEUS__PLO_REPLAY_MAX;
  memcpy(res->meas, m, res->n * sizeof *m);
  res->confidence = zeus_plo_confidence(plo);
  const unsigned *cw;
  res->ncontenders = zeus_plo_contenders(plo, &cw);
  if (res->ncontenders > ZEUS__PLO_REPLAY_MAX) res->ncontenders = ZEUS__PLO_REPLAY_MAX;
  if (res->ncontenders) memcpy(res->contenders_w, cw, res->ncontenders * sizeof *cw);
out:
  zeus_plo_close(plo);
  zeus_monitor_close(mon);
  zeus_devices_close(dev);
  return rc;
}

int zeus__plo_judge(const zeus_selector *sel, const zeus_plo_measurement *truth, size_t n, unsigned chosen_w,
                    bool *right, double *excess) {
  size_t at = n, at_max = 0;
  for (size_t i = 0; i < n; i++) {
    if (truth[i].power_limit_w == chosen_w) at = i;
    if (truth[i].power_limit_w > truth[at_max].power_limit_w) at_max = i;
  }
  if (at == n) return zeus__error(ZEUS_EINVAL, "judging a choice: %u W is not a profiled limit", chosen_w);
  double max_power = (double)truth[at_max].power_limit_w * (sel->world_size ? sel->world_size : 1);
  double best = INFINITY, mine = 0;
  if (sel->kind == ZEUS_SELECTOR_MAX_SLOWDOWN) {
    double bound = sel->factor * truth[at_max].time_s;
    for (size_t i = 0; i < n; i++)
      if (truth[i].time_s <= bound) best = fmin(best, truth[i].energy_j);
    mine = truth[at].energy_j;
    *right = truth[at].time_s <= bound * 1.005 && mine <= best * 1.01;
  } else {
    for (size_t i = 0; i < n; i++) {
      double k = sel->kind == ZEUS_SELECTOR_ENERGY ? truth[i].energy_j
                 : sel->kind == ZEUS_SELECTOR_TIME ? truth[i].time_s
                                                   : zeus_cost(truth[i].energy_j, truth[i].time_s, sel->eta, max_power);
      best = fmin(best, k);
      if (i == at) mine = k;
    }
    *right = mine <= best * 1.01;
  }
  if (excess) *excess = best > 0 ? mine / best - 1 : 0;
  return ZEUS_OK;
}

int zeus__plo_robustness(const char *profile, const zeus_selector *sel, const zeus__plo_noise *nz, int mode,
                         int runs, int *right, double *max_steps_ratio) {
  zeus__plo_noise clean = *nz;
  clean.jitter = clean.slow_first = clean.drift = 0;
  clean.counter_period_s = 0;
  clean.hardware = NULL;
  zeus__plo_replay_result truth, r;
  int rc = zeus__plo_noisy_replay(profile, sel, &clean, 1, &truth);
  if (rc) return rc;
  zeus_selector judged = *sel; /* the world size the replay used */
  if (judged.kind == ZEUS_SELECTOR_ZEUS_COST && judged.world_size == 0) judged.world_size = truth.ngpu;
  *right = 0;
  if (max_steps_ratio) *max_steps_ratio = 0;
  for (int k = 0; k < runs; k++) {
    zeus__plo_noise z = *nz;
    z.seed = nz->seed + (uint64_t)k;
    if ((rc = zeus__plo_noisy_replay(profile, sel, &z, mode, &r))) return rc;
    bool ok;
    if ((rc = zeus__plo_judge(&judged, truth.meas, truth.n, r.chosen_w, &ok, NULL))) return rc;
    *right += ok;
    if (max_steps_ratio) *max_steps_ratio = fmax(*max_steps_ratio, (double)r.steps / (double)r.original_steps);
  }
  return ZEUS_OK;
}

int zeus__plo_cut_profile(const char *src, const char *dst, unsigned max_w, unsigned min_w, size_t *kept) {
  if (kept) *kept = 0;
  FILE *in = fopen(src, "r");
  if (!in) return zeus__error(ZEUS_EIO, "cutting a profile: cannot read '%s'", src);
  FILE *out = fopen(dst, "w");
  if (!out) {
    fclose(in);
    return zeus__error(ZEUS_EIO, "cutting a profile: cannot write '%s'", dst);
  }
  char line[4096];
  size_t n = 0;
  bool header = true;
  while (fgets(line, sizeof line, in)) {
    if (header) {
      fputs(line, out);
      header = false;
      continue;
    }
    /* window_name is the second column and ends in _<limit in W>. */
    const char *c1 = strchr(line, ',');
    const char *c2 = c1 ? strchr(c1 + 1, ',') : NULL;
    if (!c2) continue;
    const char *us = c2;
    while (us > c1 && *us != '_') us--;
    if (us == c1) continue;
    unsigned w = (unsigned)strtoul(us + 1, NULL, 10);
    if (w < min_w || w > max_w) continue;
    fputs(line, out);
    n++;
  }
  fclose(in);
  int bad = fclose(out) != 0;
  if (bad) return zeus__error(ZEUS_EIO, "cutting a profile: cannot write '%s'", dst);
  if (kept) *kept = n;
  return ZEUS_OK;
}

int zeus__plo_lead(const zeus_selector *sel, const zeus_plo_measurement *truth, size_t n, double *lead) {
  *lead = INFINITY;
  if (n < 2) return zeus__error(ZEUS_EINVAL, "the lead of a choice needs two limits or more, got %zu", n);
  size_t at_max = 0;
  for (size_t i = 0; i < n; i++)
    if (truth[i].power_limit_w > truth[at_max].power_limit_w) at_max = i;
  double max_power = (double)truth[at_max].power_limit_w * (sel->world_size ? sel->world_size : 1);
  double bound = sel->factor * truth[at_max].time_s;
  size_t best = n;
  double bk = INFINITY;
  for (size_t i = 0; i < n; i++) {
    double k = sel->kind == ZEUS_SELECTOR_ENERGY      ? truth[i].energy_j
               : sel->kind == ZEUS_SELECTOR_TIME      ? truth[i].time_s
               : sel->kind == ZEUS_SELECTOR_MAX_SLOWDOWN ? (truth[i].time_s <= bound ? truth[i].energy_j : INFINITY)
                                                      : zeus_cost(truth[i].energy_j, truth[i].time_s, sel->eta, max_power);
    if (k < bk) bk = k, best = i;
  }
  if (best == n) return zeus__error(ZEUS_EINVAL, "the lead of a choice: no limit qualifies");
  for (size_t i = 0; i < n; i++) {
    if (i == best) continue;
    double d;
    if (sel->kind == ZEUS_SELECTOR_MAX_SLOWDOWN)
      d = truth[i].time_s <= bound ? truth[i].energy_j / bk - 1 : truth[i].time_s / bound - 1;
    else
      d = (sel->kind == ZEUS_SELECTOR_ENERGY ? truth[i].energy_j
           : sel->kind == ZEUS_SELECTOR_TIME ? truth[i].time_s
                                             : zeus_cost(truth[i].energy_j, truth[i].time_s, sel->eta, max_power)) /
              bk - 1;
    *lead = fmin(*lead, d);
  }
  return ZEUS_OK;
}

/* The oracle's right choices out of `trials` with contenders within `width` (zeus__plo_oracle_bound). */
static double oracle_at(const char *path, const zeus_selector *sel, const zeus__plo_noise *nz, int trials,
                        double width, bool swept) {
  zeus__plo_noise clean;
  zeus__plo_noise_init(&clean);
  clean.wait_steps = nz->wait_steps;
  clean.warmup_steps = nz->warmup_steps;
  clean.profile_steps = nz->profile_steps;
  zeus__plo_replay_result t;
  if (zeus__plo_noisy_replay(path, sel, &clean, 1, &t) || t.n < 2) return -1;
  zeus_selector js = *sel;
  if (js.kind == ZEUS_SELECTOR_ZEUS_COST && js.world_size == 0) js.world_size = t.ngpu;
  bool cont[ZEUS__PLO_REPLAY_MAX];
  size_t k = 0, top = 0;
  for (size_t i = 0; i < t.n; i++)
    if (t.meas[i].power_limit_w > t.meas[top].power_limit_w) top = i;
  bool wrong = false; /* a wrong limit among the contenders */
  for (size_t i = 0; i < t.n; i++) {
    bool ok = true;
    double excess = 0; /* the limit's cost over the best, as the judge computes it */
    if (zeus__plo_judge(&js, t.meas, t.n, t.meas[i].power_limit_w, &ok, &excess)) return -1;
    if (js.kind == ZEUS_SELECTOR_MAX_SLOWDOWN)
      cont[i] = i == top || fabs(t.meas[i].time_s / (js.factor * t.meas[top].time_s) - 1) <= width;
    else
      cont[i] = excess <= width;
    k += cont[i];
    wrong |= cont[i] && !ok;
  }
  /* A narrower set that leaves out every wrong limit would be right by construction. */
  if (!wrong && width < 0.06) return -1;
  double steps = ZEUS__ROBUST_STEP_BUDGET * (double)t.original_steps - nz->wait_steps - 1, per = steps / (double)k;
  if (swept) {
    double sweep = (double)t.n * (double)(nz->warmup_steps + nz->profile_steps);
    per = (double)nz->profile_steps + fmax(0.0, steps - sweep) / (double)k;
  }
  double sd = nz->jitter / sqrt(per);
  uint64_t seed = 0x9e3779b97f4a7c15ULL;
  int right = 0;
  for (int r = 0; r < trials; r++) {
    zeus_plo_measurement est[ZEUS__PLO_REPLAY_MAX];
    for (size_t i = 0; i < t.n; i++) {
      est[i] = t.meas[i];
      if (!cont[i]) continue;
      double f = 1 + sd * zeus__plo_gauss(&seed);
      est[i].time_s *= f;
      est[i].energy_j *= f;
    }
    unsigned w;
    bool ok = false;
    if (zeus_selector_select(&js, est, t.n, &w) == ZEUS_OK && zeus__plo_judge(&js, t.meas, t.n, w, &ok, NULL) == ZEUS_OK)
      right += ok;
  }
  return (double)right / trials;
}

double zeus__plo_oracle_bound(const char *path, const zeus_selector *sel, const zeus__plo_noise *nz, int trials,
                              bool swept) {
  static const double widths[] = {0.06, 0.04, 0.025, 0.015};
  double best = -1;
  for (size_t i = 0; i < sizeof widths / sizeof widths[0]; i++)
    best = fmax(best, oracle_at(path, sel, nz, trials, widths[i], swept));
  return best;
}
