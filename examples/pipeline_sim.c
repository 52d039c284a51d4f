/* Example: a pipeline-parallel training job on simulated GPUs, driven by a real Perseus server.
 *
 *   zeus pfo-server --port 7787 --scheduler AllMaxFrequency &
 *   pipeline_sim --server http://127.0.0.1:7787 --pp 4 --microbatches 8 --iterations 40
 *
 * W = dp x pp x tp ranks run as threads of this process. Each rank has its own simulated GPU
 * (the "sim" backend, one GPU per rank, on a virtual clock) and its own Perseus client
 * (zeus_pfo_optimizer): rank 0 registers the job, the job id reaches the other ranks through an
 * in-process collective (zeus_thread_group), and every rank registers its GPU's frequencies and
 * its 1F1B instruction order. The GPUs differ per stage through the DVFS model's parameters: the
 * first stage (embedding; heavier, more memory-bound) and the last stage (LM head and loss; the
 * heaviest, compute-bound) take longer per unit of work than the middle stages, so a good
 * schedule slows the middle stages down. A forward is 1 unit of work, a backward 2.
 *
 * Clocks (see pipeline_sim.h for the details): each rank's GPU has its own virtual clock, which
 * moves only by that GPU's work and idling. A rank that waits for its neighbour's activation or
 * gradient idles its GPU until the neighbour's send time (the time stamped on the message), so
 * waiting costs idle power, as in a real pipeline; at the end of every iteration all ranks idle
 * to the latest clock of all (pipeline flush, optimizer step). So the per-rank clocks never
 * disagree about when a message was available, and every rank's iteration lasts as long.
 *
 * Measured stages (--stage-profile FILE, --blocking-power W): instead of the DVFS model, each
 * rank's GPU takes exactly the time and energy of the profile's row for its stage, the
 * instruction and the SM clock in place (a CSV stage,instruction,frequency,time,energy such as
 * the Perseus artifact's stage profiles), and draws W while it idles. Its clocks are the
 * profile's (which must be evenly spaced, with a forward and a backward row for every stage at
 * every clock). --straggler D:FACTOR[@ITER[-END]] multiplies the time and the energy (the power
 * stays) of every instruction of data-parallel pipeline D by FACTOR in iterations ITER..END-1.
 *
 * Every --iters-per-round iterations each rank posts its measurements to the server and gets
 * its next schedule. The program prints, per round, the mean iteration time (the same on every
 * rank) and the mean energy of one iteration summed over all GPUs, and each data-parallel
 * pipeline's; --json prints a list of rounds instead. Iterations after the last full round are
 * run but not reported. */
#include <errno.h>
#include <jansson.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <zeus.h>

#include "opt.h" /* the zeus CLI's option parser (cli/opt.h) */
#include "pipeline_sim.h"


/* ---- a measured stage profile (--stage-profile) ---- */

typedef struct stage_profile {
  int stages, nclocks;
  int max_mhz, min_mhz, step_mhz;
  double *t, *e; /* [(stage * 2 + kind) * nclocks + clock index], clock index 0 = max; NAN: missing */
} stage_profile;

static void stage_profile_free(stage_profile *p) {
  if (!p) return;
  free(p->t);
  free(p->e);
  free(p);
}

typedef struct prow {
  int stage, kind, mhz;
  double t, e;
} prow;

/* Splits one CSV line in place on commas; returns the number of fields (at most max). */
static int split_csv(char *line, char **f, int max) {
  int n = 0;
  for (char *p = line; n < max;) {
    f[n++] = p;
    char *c = strchr(p, ',');
    if (!c) break;
    *c = '\0';
    p = c + 1;
  }
  for (int i = 0; i < n; i++) { /* trim blanks and the line end */
    while (*f[i] == ' ' || *f[i] == '\t') f[i]++;
    size_t l = strlen(f[i]);
    while (l && strchr(" \t\r\n", f[i][l - 1])) f[i][--l] = '\0';
  }
  return n;
}

/* Loads FILE for a pipeline of `pp` stages; prints the problem and returns NULL on bad input. */
static stage_profile *stage_profile_load(const char *path, int pp) {
  FILE *f = fopen(path, "r");
  if (!f) {
    fprintf(stderr, "pipeline_sim: --stage-profile '%s': %s\n", path, strerror(errno));
    return NULL;
  }
  static const char *const cols[] = {"stage", "instruction", "frequency", "time", "energy"};
  int at[5] = {-1, -1, -1, -1, -1};
  char line[4096], *fld[64];
  prow *rows = NULL;
  size_t nrows = 0, cap = 0, lineno = 0;
  bool ok = true;
  if (!fgets(line, sizeof line, f)) {
    fprintf(stderr, "pipeline_sim: --stage-profile '%s' is empty (expected a header with %s)\n", path,
            "stage,instruction,frequency,time,energy");
    ok = false;
  }
  lineno = 1;
  int nf = ok ? split_csv(line, fld, 64) : 0;
  for (int c = 0; c < 5 && ok; c++) {
    for (int i = 0; i < nf; i++)
      if (!strcmp(fld[i], cols[c])) at[c] = i;
    if (at[c] < 0) {
      fprintf(stderr, "pipeline_sim: %s:1: no column '%s' (expected stage,instruction,frequency,time,energy)\n", path,
              cols[c]);
      ok = false;
    }
  }
  while (ok && fgets(line, sizeof line, f)) {
    lineno++;
    if (strspn(line, " \t\r\n") == strlen(line)) continue;
    nf = split_csv(line, fld, 64);
    prow r;
    char *end;
    bool good = true;
    for (int c = 0; c < 5 && good; c++) good = at[c] < nf;
    if (good) {
      r.stage = (int)strtol(fld[at[0]], &end, 10);
      good = *fld[at[0]] && !*end && r.stage >= 0;
    }
    if (good) {
      r.kind = !strcmp(fld[at[1]], "forward") ? 0 : !strcmp(fld[at[1]], "backward") ? 1 : -1;
      good = r.kind >= 0;
    }
    if (good) {
      r.mhz = (int)strtol(fld[at[2]], &end, 10);
      good = *fld[at[2]] && !*end && r.mhz > 0;
    }
    if (good) {
      r.t = strtod(fld[at[3]], &end);
      good = *fld[at[3]] && !*end && isfinite(r.t) && r.t > 0;
    }
    if (good) {
      r.e = strtod(fld[at[4]], &end);
      good = *fld[at[4]] && !*end && isfinite(r.e) && r.e >= 0;
    }
    if (!good) {
      fprintf(stderr,
              "pipeline_sim: %s:%zu: expected a stage (integer >= 0), forward or backward, a clock (MHz > 0), a "
              "time (s > 0) and an energy (J >= 0)\n",
              path, lineno);
      ok = false;
      break;
    }
    if (r.stage >= pp) continue; /* the first pp stages are used, as zeus frontier does */
    if (nrows == cap) {
      cap = cap ? 2 * cap : 256;
      prow *v = realloc(rows, cap * sizeof *rows);
      if (!v) {
        fprintf(stderr, "pipeline_sim: out of memory reading '%s'\n", path);
        ok = false;
        break;
      }
      rows = v;
    }
    rows[nrows++] = r;
  }
  fclose(f);
  stage_profile *p = ok ? calloc(1, sizeof *p) : NULL;
  if (ok && !p) ok = false;
  if (ok) { /* the clocks: every distinct one, evenly spaced (the simulated GPU's clock steps) */
    p->stages = pp;
    p->max_mhz = 0, p->min_mhz = 1 << 30;
    for (size_t i = 0; i < nrows; i++) {
      if (rows[i].mhz > p->max_mhz) p->max_mhz = rows[i].mhz;
      if (rows[i].mhz < p->min_mhz) p->min_mhz = rows[i].mhz;
    }
    p->step_mhz = 0;
    for (size_t i = 0; i < nrows; i++)
      if (rows[i].mhz != p->max_mhz && (!p->step_mhz || p->max_mhz - rows[i].mhz < p->step_mhz))
        p->step_mhz = p->max_mhz - rows[i].mhz;
    if (!nrows) {
      fprintf(stderr, "pipeline_sim: %s has no rows for stages 0..%d\n", path, pp - 1);
      ok = false;
    } else if (!p->step_mhz) {
      p->step_mhz = 1, p->nclocks = 1;
    } else {
      p->nclocks = (p->max_mhz - p->min_mhz) / p->step_mhz + 1;
      for (size_t i = 0; i < nrows && ok; i++)
        if ((p->max_mhz - rows[i].mhz) % p->step_mhz) {
          fprintf(stderr,
                  "pipeline_sim: %s: the clocks are not evenly spaced (%d MHz is not a multiple of %d MHz below "
                  "%d MHz), which the simulated GPU needs\n",
                  path, rows[i].mhz, p->step_mhz, p->max_mhz);
          ok = false;
        }
      if (ok && p->nclocks > 512) {
        fprintf(stderr, "pipeline_sim: %s has %d clocks between %d and %d MHz; the simulated GPU takes at most 512\n",
                path, p->nclocks, p->min_mhz, p->max_mhz);
        ok = false;
      }
    }
  }
  if (ok) {
    size_t n = (size_t)pp * 2 * (size_t)p->nclocks;
    p->t = malloc(n * sizeof *p->t);
    p->e = malloc(n * sizeof *p->e);
    if (!p->t || !p->e) ok = false;
    for (size_t i = 0; ok && i < n; i++) p->t[i] = p->e[i] = NAN;
    for (size_t i = 0; ok && i < nrows; i++) {
      size_t k = ((size_t)rows[i].stage * 2 + (size_t)rows[i].kind) * (size_t)p->nclocks +
                 (size_t)((p->max_mhz - rows[i].mhz) / p->step_mhz);
      p->t[k] = rows[i].t, p->e[k] = rows[i].e;
    }
    static const char *const kinds[] = {"forward", "backward"};
    for (int s = 0; s < pp && ok; s++)
      for (int k = 0; k < 2 && ok; k++)
        for (int c = 0; c < p->nclocks && ok; c++)
          if (isnan(p->t[((size_t)s * 2 + (size_t)k) * (size_t)p->nclocks + (size_t)c])) {
            fprintf(stderr, "pipeline_sim: %s has no %s row for stage %d at %d MHz (every stage 0..%d needs a forward "
                    "and a backward row at every clock of the profile, %d..%d MHz in steps of %d)\n", path, kinds[k], s,
                    p->max_mhz - c * p->step_mhz, pp - 1, p->min_mhz, p->max_mhz, p->step_mhz);
            ok = false;
          }
  }
  free(rows);
  if (!ok) {
    stage_profile_free(p);
    return NULL;
  }
  return p;
}

/* ---- stragglers (--straggler) ---- */

typedef struct straggler {
  int dp;
  double factor;
  long from, until; /* iterations [from, until); until < 0: to the end */
} straggler;

/* Parses "D:FACTOR[@ITER[-END]][,...]"; prints the problem and returns false on bad input. */
static bool parse_stragglers(const char *text, int dp, straggler **out, int *n) {
  char *copy = strdup(text), *save = NULL;
  straggler *v = calloc(strlen(text) + 1, sizeof *v);
  int k = 0;
  bool ok = copy && v;
  for (char *tok = ok ? strtok_r(copy, ",", &save) : NULL; ok && tok; tok = strtok_r(NULL, ",", &save)) {
    straggler s = {.until = -1};
    char *end;
    errno = 0;
    long d = strtol(tok, &end, 10);
    ok = end != tok && *end == ':' && !errno;
    if (ok) {
      char *f = end + 1;
      s.factor = strtod(f, &end);
      ok = end != f && isfinite(s.factor);
    }
    if (ok && *end == '@') {
      char *it = end + 1;
      s.from = strtol(it, &end, 10);
      ok = end != it && s.from >= 0;
      if (ok && *end == '-') {
        char *u = end + 1;
        s.until = strtol(u, &end, 10);
        ok = end != u;
      }
    }
    ok = ok && !*end;
    if (!ok) {
      fprintf(stderr, "pipeline_sim: --straggler '%s': expected D:FACTOR[@ITER[-END]], e.g. 1:1.2@20 or 1:1.2@20-60\n",
              tok);
      break;
    }
    if (d < 0 || d >= dp) {
      fprintf(stderr, "pipeline_sim: --straggler '%s': pipeline %ld does not exist (--dp %d: pipelines 0..%d)\n", tok,
              d, dp, dp - 1);
      ok = false;
    } else if (!(s.factor >= 0.01 && s.factor <= 100)) {
      fprintf(stderr, "pipeline_sim: --straggler '%s': FACTOR must be in 0.01..100, got %g\n", tok, s.factor);
      ok = false;
    } else if (s.until >= 0 && s.until <= s.from) {
      fprintf(stderr, "pipeline_sim: --straggler '%s': END (%ld) must be after ITER (%ld)\n", tok, s.until, s.from);
      ok = false;
    }
    s.dp = (int)d;
    v[k++] = s;
  }
  free(copy);
  if (!ok) {
    free(v);
    return false;
  }
  *out = v;
  *n = k;
  return true;
}

static double straggler_factor(const straggler *v, int n, int dp, long iter) {
  double f = 1;
  for (int i = 0; i < n; i++)
    if (v[i].dp == dp && iter >= v[i].from && (v[i].until < 0 || iter < v[i].until)) f *= v[i].factor;
  return f;
}

/* The per-stage GPU model. */
static void stage_model(int stage, int pp, zeus_sim_gpu_config *g) {
  memset(g, 0, sizeof *g);
  g->model = ZEUS_SIM_DVFS;
  g->dvfs.time_per_unit_s = 0.010;
  g->dvfs.mem_bound_fraction = 0.25;
  const char *what = "middle stage";
  if (stage == pp - 1) {
    g->dvfs.time_per_unit_s = 0.015, g->dvfs.mem_bound_fraction = 0.15, what = "last stage";
  } else if (stage == 0) {
    g->dvfs.time_per_unit_s = 0.013, g->dvfs.mem_bound_fraction = 0.35, what = "first stage";
  }
  snprintf(g->name, sizeof g->name, "Zeus Simulated GPU (%s)", what);
}

typedef struct shared {
  const char *server, *metadata;
  int dp, pp, tp, world, microbatches;
  long iterations, iters_per_round;
  psim_job *job;
  zeus_thread_group *tg;
  zeus_pfo_round_stats *stats; /* [round][rank] */
  double *truth;               /* [round][rank]: the simulated GPU's ground-truth energy per iteration */
  long max_rounds;
  stage_profile *profile; /* NULL: the DVFS model */
  double blocking_power_w; /* < 0: the model's default */
  straggler *stragglers;
  int nstragglers;
  double pace_s; /* real seconds per iteration at least; 0: as fast as it goes */
} shared;

/* A GPU replaying the stage profile: each instruction's row at the clock in place. */
typedef struct profile_gpu {
  zeus_sim_node *node;
  const shared *sh;
  const psim_rank *r;
} profile_gpu;

/* The row of the clock the GPU runs at now (the clock in effect, not the read-back, which on the
 * h100 hardware profile waits for the sensor tick). */
static int profile_row(profile_gpu *g, bool forward, double *t, double *e) {
  const stage_profile *p = g->sh->profile;
  unsigned mhz = 0;
  int rc = zeus_sim_operating_point(g->node, 0, &mhz, NULL);
  if (rc) return rc;
  int c = (p->max_mhz - (int)mhz) / p->step_mhz;
  if ((int)mhz > p->max_mhz || (int)mhz < p->min_mhz || (p->max_mhz - (int)mhz) % p->step_mhz)
    return zeus_set_errmsg(ZEUS_EINVAL, "pipeline: rank %d runs at %u MHz, a clock the stage profile lacks", g->r->rank,
                           mhz);
  size_t k = ((size_t)g->r->pp * 2 + (forward ? 0 : 1)) * (size_t)p->nclocks + (size_t)c;
  double f = straggler_factor(g->sh->stragglers, g->sh->nstragglers, g->r->dp, g->r->iter);
  *t = p->t[k] * f;
  *e = p->e[k] * f;
  return ZEUS_OK;
}

/* One instruction: the row of the clock in place, in pieces that end where the frequency
 * controller issues a clock lock (it acts then) or where a lock it issued takes effect (the rest
 * runs at the new clock's row, as a real GPU's kernels speed up or slow down mid-instruction). A
 * piece of simulated work keeps the clock it started at. */
static int profile_work(void *ctx, bool forward, double units) {
  (void)units;
  profile_gpu *g = ctx;
  zeus_pfo_controller *ctl = g->r->opt ? zeus_pfo_optimizer_controller(g->r->opt) : NULL;
  double done = 0; /* fraction of the instruction done */
  for (int guard = 0; done < 1 - 1e-12 && guard < 1000; guard++) {
    double t = 0, e = 0, now = zeus_sim_now(g->node);
    int rc = profile_row(g, forward, &t, &e);
    if (rc) return rc;
    double end = now + (1 - done) * t, stop = end;
    bool issue_here = false;
    if (ctl) {
      double issue = zeus_pfo_controller_next_issue(ctl);
      if (issue <= now) {
        if ((rc = zeus_pfo_controller_wait(ctl, 30.0))) return rc;
        if (zeus_pfo_controller_next_issue(ctl) > now) continue; /* issued: look again */
      } else if (issue < stop) {
        stop = issue;
        issue_here = true;
      }
      double tl[4];
      unsigned fl[4];
      size_t n = zeus_pfo_controller_timeline(ctl, now, tl, fl, 4);
      for (size_t i = 0; i < n; i++)
        if (tl[i] > now && tl[i] < stop) {
          stop = tl[i];
          issue_here = false;
        }
    }
    double dt = stop - now;
    if ((rc = zeus_sim_work_measured(g->node, 0, dt, e * dt / t, NULL))) return rc;
    if (g->r->opt) zeus_pfo_optimizer_observe(g->r->opt);
    done += dt / t;
    if (stop >= end) break;
    if (issue_here && (rc = zeus_pfo_controller_wait(ctl, 30.0))) return rc;
  }
  return ZEUS_OK;
}

typedef struct rank_arg {
  shared *sh;
  int rank;
  int rc;
  char err[1024];
} rank_arg;

/* The built-in model with a straggler: the GPU's work takes FACTOR times as long. */
typedef struct dvfs_gpu {
  zeus_sim_node *node;
  const shared *sh;
  const psim_rank *r;
} dvfs_gpu;

static int dvfs_work(void *ctx, bool forward, double units) {
  (void)forward;
  dvfs_gpu *g = ctx;
  double f = straggler_factor(g->sh->stragglers, g->sh->nstragglers, g->r->dp, g->r->iter);
  return zeus_sim_work(g->node, 0, units * f, NULL);
}


static int sim_work(void *ctx, double units) { return zeus_sim_work(ctx, 0, units, NULL); }
static int sim_idle(void *ctx, double s) { return zeus_sim_idle(ctx, s); }
static double sim_now(void *ctx) { return zeus_sim_now(ctx); }
static int profile_idle(void *ctx, double s) { return zeus_sim_idle(((profile_gpu *)ctx)->node, s); }
static double profile_now(void *ctx) { return zeus_sim_now(((profile_gpu *)ctx)->node); }
static int dvfs_idle(void *ctx, double s) { return zeus_sim_idle(((dvfs_gpu *)ctx)->node, s); }
static double dvfs_now(void *ctx) { return zeus_sim_now(((dvfs_gpu *)ctx)->node); }

static void *rank_main(void *p) {
  rank_arg *a = p;
  shared *sh = a->sh;
  psim_rank r;
  zeus_devices *dev = NULL;
  zeus_pfo_optimizer *opt = NULL;
  zeus_collective coll;
  zeus_sim_gpu_config gpu;
  profile_gpu pgpu;
  dvfs_gpu dgpu;
  int rc = psim_rank_init(&r, sh->job, a->rank);
  if (!rc) {
    stage_model(r.pp, sh->pp, &gpu);
    if (sh->profile) { /* the profile's clocks; the model's time and power are not used */
      gpu.dvfs.max_clock_mhz = (unsigned)sh->profile->max_mhz;
      gpu.dvfs.min_clock_mhz = (unsigned)sh->profile->min_mhz;
      gpu.dvfs.clock_step_mhz = (unsigned)sh->profile->step_mhz;
      snprintf(gpu.name, sizeof gpu.name, "Zeus Simulated GPU (stage %d of a measured profile)", r.pp);
    }
    if (sh->blocking_power_w >= 0) gpu.dvfs.idle_power_w = sh->blocking_power_w > 0 ? sh->blocking_power_w : 1e-9;
    const char *hw = getenv("ZEUS_SIM_HARDWARE");
    if (hw && *hw) rc = zeus_sim_hardware_profile(hw, &gpu.hw); /* e.g. h100: ticks, read costs, lock latencies */
    zeus_sim_config cfg = {.num_gpus = 1, .gpus = &gpu, .clock = ZEUS_SIM_CLOCK_VIRTUAL};
    zeus_devices_opts dopts = {.backend = "sim", .sim = &cfg, .all_devices = true};
    if (!rc) rc = zeus_devices_open(&dev, &dopts);
  }
  zeus_pfo_optimizer_opts o;
  zeus_pfo_optimizer_opts_init(&o);
  if (!rc) rc = zeus_pfo_optimizer_opts_from_env(&o);
  if (!rc) rc = zeus_thread_group_collective(sh->tg, a->rank, &coll);
  if (!rc) {
    o.rank = a->rank, o.dp_rank = r.dp, o.pp_rank = r.pp, o.tp_rank = r.tp;
    o.dp_degree = sh->dp, o.pp_degree = sh->pp, o.tp_degree = sh->tp, o.world_size = sh->world;
    o.devices = dev;
    o.device_id = 0;
    if (sh->server) o.server_url = sh->server;
    if (sh->metadata) o.job_metadata = sh->metadata;
    if (sh->iters_per_round > 0) o.iters_per_round = sh->iters_per_round;
    o.collective = &coll;
    o.pipe_schedule = r.names;
    o.n_pipe_schedule = r.n;
    rc = zeus_pfo_optimizer_open(&opt, &o);
  }
  if (rc) psim_job_abort(sh->job); /* open is collective: every rank fails there together */
  if (!rc) {
    zeus_sim_node *node = zeus_devices_sim_node(dev);
    r.gpu = (psim_gpu){node, sim_work, sim_idle, sim_now, NULL};
    if (sh->profile) {
      pgpu = (profile_gpu){node, sh, &r};
      r.gpu.work_kind = profile_work;
      r.gpu.ctx = &pgpu;
      r.gpu.idle = profile_idle;
      r.gpu.now = profile_now;
    } else if (sh->nstragglers) {
      dgpu = (dvfs_gpu){node, sh, &r};
      r.gpu.work_kind = dvfs_work;
      r.gpu.ctx = &dgpu;
      r.gpu.idle = dvfs_idle;
      r.gpu.now = dvfs_now;
    }
    r.opt = opt;
    long seen = -1;
    double t0 = zeus_monotonic_s(), acc = 0, e_prev = 0;
    if (!rc) rc = zeus_sim_true_energy(node, 0, &e_prev);
    for (long i = 0; i < sh->iterations && !rc; i++) {
      /* --pace: iteration i starts no earlier than i x pace seconds of real time after the first
       * (the simulated GPUs' own clocks are virtual and unaffected). */
      double wait = t0 + (double)i * sh->pace_s - zeus_monotonic_s();
      if (wait > 0) {
        struct timespec ts = {(time_t)wait, (long)((wait - (double)(time_t)wait) * 1e9)};
        nanosleep(&ts, NULL);
      }
      rc = psim_iteration(&r);
      double e_now = 0;
      if (!rc) rc = zeus_sim_true_energy(node, 0, &e_now);
      acc += e_now - e_prev;
      e_prev = e_now;
      zeus_pfo_round_stats st;
      zeus_pfo_last_round(opt, &st);
      if (!rc && st.round > seen && st.round < sh->max_rounds) {
        sh->stats[st.round * sh->world + a->rank] = st;
        sh->truth[st.round * sh->world + a->rank] = st.iterations > 0 ? acc / (double)st.iterations : 0;
        seen = st.round;
        acc = 0;
      }
    }
  }
  if (rc) snprintf(a->err, sizeof a->err, "%s", zeus_errmsg());
  a->rc = rc;
  zeus_pfo_optimizer_close(opt);
  zeus_devices_close(dev);
  psim_rank_free(&r);
  return NULL;
}

static shared job_sh = {.dp = 1, .tp = 1, .blocking_power_w = -1};
static long opt_pp, opt_dp = 1, opt_tp = 1, opt_mb, opt_iters, opt_k;
static bool opt_json;
static const char *opt_profile, *opt_straggler;

static const cli_opt opts[] = {
    {"server", 0, CLI_OPT_STRING, &job_sh.server, "URL", "the Perseus server", "ZEUS_PFO_SERVER_URL"},
    {"pp", 0, CLI_OPT_LONG, &opt_pp, "P", "pipeline-parallel degree (stages)", NULL, 1, 64, .required = true},
    {"dp", 0, CLI_OPT_LONG, &opt_dp, "D", "data-parallel degree", "1", 1, 64},
    {"tp", 0, CLI_OPT_LONG, &opt_tp, "T", "tensor-parallel degree", "1", 1, 64},
    {"microbatches", 0, CLI_OPT_LONG, &opt_mb, "M", "microbatches per iteration", NULL, 1, 10000,
     .required = true},
    {"iterations", 0, CLI_OPT_LONG, &opt_iters, "N", "iterations to run", NULL, 1, 1e7, .required = true},
    {"iters-per-round", 0, CLI_OPT_LONG, &opt_k, "K",
     "iterations per profiling round; each round ends with the results posted and the next schedule "
     "fetched",
     "ZEUS_PFO_ITERS_PER_ROUND, else 10", 1, 100000},
    {"job-metadata", 0, CLI_OPT_STRING, &job_sh.metadata, "TEXT", "appended to the job id by the server"},
    {"json", 0, CLI_OPT_FLAG, &opt_json, NULL,
     "print one JSON document: [{\"round\", \"iterations\", \"iter_time_s\", \"iter_energy_j\", "
     "\"true_iter_energy_j\", \"planned_clock_fraction\", \"pipelines\": [{\"dp\", \"iter_time_s\", "
     "\"iter_energy_j\", \"true_iter_energy_j\"}, ...]}, ...]: per round the job's iteration time, the energy of "
     "one iteration over all GPUs as the clients measured it and as the simulated GPUs drew it, the lowest rank's "
     "fraction of instruction time at the planned clock, and each data-parallel pipeline's"},
    {"stage-profile", 0, CLI_OPT_STRING, &opt_profile, "FILE",
     "each GPU takes the time and energy of FILE's row for its stage, instruction and SM clock (CSV "
     "stage,instruction,frequency,time,energy, other columns ignored; stages 0..P-1 are used; the clocks evenly "
     "spaced, with a forward and a backward row per stage and clock), e.g. the Perseus artifact's "
     "../shared/data/perseus-sosp24/stage_profile/gpt3-175b+a40_bf16.csv",
     NULL, .heading = "Measured stages and stragglers:"},
    {"blocking-power", 0, CLI_OPT_DOUBLE, &job_sh.blocking_power_w, "W",
     "power a GPU draws while it waits for a neighbour or the end of the iteration, in watts; required with "
     "--stage-profile (the artifact measured 70.38 on A40, 83.64 on A100 SXM)",
     "30 for the built-in model", 0, 10000},
    {"pace", 0, CLI_OPT_DOUBLE, &job_sh.pace_s, "S",
     "start iteration i no earlier than i x S seconds of real time after the first: a real job's "
     "iterations take seconds, during which the server solves Perseus' frontier; without a pace the "
     "simulated job may end before the solve does", "0", 0, 3600},
    {"straggler", 0, CLI_OPT_STRING, &opt_straggler, "D:FACTOR[@ITER[-END]]",
     "every instruction of data-parallel pipeline D takes FACTOR times as long and as much energy (its power "
     "stays) in iterations ITER (default 0) to END-1 (default: to the end); several separated by commas"},
    {0},
};

static const cli_command cmd = {
    .name = "pipeline_sim",
    .program = "pipeline_sim",
    .usage = "pipeline_sim --server URL --pp P [--dp D] [--tp T] --microbatches M --iterations N\n"
             "             [--iters-per-round K] [--job-metadata TEXT] [--json]\n"
             "             [--stage-profile FILE --blocking-power W] [--straggler D:FACTOR[@ITER[-END]]]\n"
             "             [--pace S]",
    .about = "Simulates a pipeline-parallel training job (synchronous 1F1B, M microbatches) whose\n"
             "D x P x T ranks are threads, each with its own simulated GPU on a virtual clock and its\n"
             "own Perseus client, against a running Perseus server (zeus pfo-server). Ranks waiting\n"
             "for a neighbour idle their GPU until the neighbour's send time; all ranks meet at the\n"
             "end of each iteration. The first and last stages' GPUs are slower per unit of work\n"
             "than the middle ones, or (--stage-profile) every instruction takes the time and energy\n"
             "a measured profile gives for its stage and clock. Prints each round's mean iteration\n"
             "time and the energy of one iteration summed over all GPUs and over each data-parallel\n"
             "pipeline's GPUs.",
    .opts = opts,
    .more = "Environment: the client's settings ZEUS_PFO_SERVER_URL, ZEUS_PFO_ITERS_PER_ROUND,\n"
            "ZEUS_PFO_CONNECT_TIMEOUT, ZEUS_PFO_REQUEST_TIMEOUT, ZEUS_PFO_SCHEDULE_TIMEOUT,\n"
            "ZEUS_PFO_RETRIES, ZEUS_PFO_RETRY_BACKOFF, ZEUS_PFO_TOKEN, ZEUS_PFO_PROFILE_INSTRUCTIONS,\n"
            "ZEUS_PFO_INSTRUCTION_ENERGY, ZEUS_PFO_CLOCK_LATENCY (each also as PERSEUS_<NAME>);\n"
            "ZEUS_SIM_HARDWARE=h100 makes every GPU behave like the measured H100 (100 ms counter ticks,\n"
            "3.3 ms counter reads, clock locks in effect 8.1 ms after the call; docs/perseus-latency.md);\n"
            "ZEUS_LOG_LEVEL for log lines on stderr.\n\n"
            "Example:\n"
            "  zeus pfo-server --port 7787 --scheduler InstructionProfiler \\\n"
            "      --scheduler-args '{\"warmup_iters\": 1, \"min_frequency\": 1200}' --dump-data &\n"
            "  pipeline_sim --server http://127.0.0.1:7787 --pp 4 --microbatches 8 \\\n"
            "      --iterations 200 --iters-per-round 5\n"
            "  # then: dump/<job_id>/instruction_profile.csv\n"
            "  zeus pfo-server --port 7787 --scheduler Perseus --scheduler-args '{\"warmup_iters\": 0}' &\n"
            "  pipeline_sim --server http://127.0.0.1:7787 --pp 8 --dp 2 --microbatches 12 \\\n"
            "      --iterations 120 --iters-per-round 1 --stage-profile gpt3-175b+a40_bf16.csv \\\n"
            "      --blocking-power 70.38 --straggler 1:1.2@75-100\n"
            "  # pipeline 0 slows down to meet pipeline 1 in iterations 76..100 (docs/perseus.md)\n",
    .args = CLI_ARGS_NONE,
};

/* One round's figures: the job's (slowest rank's time, every GPU's energy) and each pipeline's. */
static void round_figures(const shared *sh, long rd, double *t, double *e, long *n, double *pt, double *pe,
                          double *te, double *pte) {
  *t = *e = *te = 0;
  for (int d = 0; d < sh->dp; d++) pte[d] = 0;
  *n = 0;
  for (int d = 0; d < sh->dp; d++) pt[d] = pe[d] = 0;
  for (int r = 0; r < sh->world; r++) {
    const zeus_pfo_round_stats *st = &sh->stats[rd * sh->world + r];
    int d = r / (sh->pp * sh->tp);
    if (st->iter_time_s > *t) *t = st->iter_time_s;
    if (st->iter_time_s > pt[d]) pt[d] = st->iter_time_s;
    *e += st->iter_energy_j;
    pe[d] += st->iter_energy_j;
    *te += sh->truth[rd * sh->world + r];
    pte[d] += sh->truth[rd * sh->world + r];
    *n = st->iterations;
  }
  /* Sums of per-rank figures: written at the resolution they were measured at (docs/output.md). */
  *t = zeus_round_decimals(*t, 9);
  *e = zeus_round_decimals(*e, 3);
  *te = zeus_round_decimals(*te, 3);
  for (int d = 0; d < sh->dp; d++) {
    pt[d] = zeus_round_decimals(pt[d], 9);
    pe[d] = zeus_round_decimals(pe[d], 3);
    pte[d] = zeus_round_decimals(pte[d], 3);
  }
}

int main(int argc, char **argv) {
  int rc = cli_parse(&cmd, argc, argv, NULL, NULL);
  if (rc != CLI_CONTINUE) return rc;
  shared sh = job_sh;
  long pp = opt_pp, dp = opt_dp, tp = opt_tp, mb = opt_mb, iters = opt_iters, k = opt_k;
  bool json = opt_json;
  if (dp * pp * tp > 512) {
    fprintf(stderr, "pipeline_sim: %ld ranks is too many for one process (at most 512)\n", dp * pp * tp);
    return 2;
  }
  if (opt_profile && sh.blocking_power_w < 0) {
    fprintf(stderr, "pipeline_sim: --stage-profile needs --blocking-power W, the power a GPU draws while it waits "
            "(the Perseus artifact measured 70.38 W on A40, 83.64 W on A100 SXM)\n");
    return 2;
  }
  if (opt_straggler && !parse_stragglers(opt_straggler, (int)dp, &sh.stragglers, &sh.nstragglers)) return 2;
  if (opt_profile && !(sh.profile = stage_profile_load(opt_profile, (int)pp))) {
    free(sh.stragglers);
    return 2;
  }
  if (zeus_log_init_stderr(NULL)) {
    fprintf(stderr, "pipeline_sim: %s\n", zeus_errmsg());
    return 2;
  }
  zeus_pfo_optimizer_opts defaults;
  zeus_pfo_optimizer_opts_init(&defaults);
  if (zeus_pfo_optimizer_opts_from_env(&defaults)) {
    fprintf(stderr, "pipeline_sim: %s\n", zeus_errmsg());
    return 2;
  }
  if (!sh.server && !defaults.server_url) {
    fprintf(stderr, "pipeline_sim: give the Perseus server with --server URL or ZEUS_PFO_SERVER_URL\n");
    return 2;
  }
  sh.dp = (int)dp, sh.pp = (int)pp, sh.tp = (int)tp, sh.world = (int)(dp * pp * tp);
  sh.microbatches = (int)mb, sh.iterations = iters, sh.iters_per_round = k;
  long per_round = k > 0 ? k : defaults.iters_per_round;
  sh.max_rounds = iters / per_round;
  sh.stats = calloc((size_t)(sh.max_rounds ? sh.max_rounds : 1) * (size_t)sh.world, sizeof *sh.stats);
  sh.truth = calloc((size_t)(sh.max_rounds ? sh.max_rounds : 1) * (size_t)sh.world, sizeof *sh.truth);
  rank_arg *args = calloc((size_t)sh.world, sizeof *args);
  pthread_t *th = calloc((size_t)sh.world, sizeof *th);
  if (!sh.stats || !sh.truth || !args || !th || psim_job_open(&sh.job, sh.dp, sh.pp, sh.tp, sh.microbatches) ||
      zeus_thread_group_open(&sh.tg, sh.world)) {
    fprintf(stderr, "pipeline_sim: %s\n", zeus_errmsg());
    return 1;
  }
  int started = 0;
  for (int r = 0; r < sh.world; r++) {
    args[r] = (rank_arg){.sh = &sh, .rank = r};
    if (pthread_create(&th[r], NULL, rank_main, &args[r]) != 0) {
      fprintf(stderr, "pipeline_sim: cannot start the thread of rank %d\n", r);
      return 1; /* the started ranks wait in the collective; exiting ends them */
    }
    started++;
  }
  for (int r = 0; r < started; r++) pthread_join(th[r], NULL);
  int status = 0;
  for (int r = 0; r < sh.world; r++)
    if (args[r].rc) {
      fprintf(stderr, "pipeline_sim: rank %d: %s\n", r, args[r].err);
      status = 1;
    }
  double *pt = calloc((size_t)sh.dp, sizeof *pt), *pe = calloc((size_t)sh.dp, sizeof *pe);
  double *pte = calloc((size_t)sh.dp, sizeof *pte), te;
  if (!status && (!pt || !pe || !pte)) {
    fprintf(stderr, "pipeline_sim: out of memory\n");
    status = 1;
  }
  if (!status && json) {
    json_t *rounds = json_array();
    for (long rd = 0; rd < sh.max_rounds && rounds; rd++) {
      double t, e;
      long n;
      round_figures(&sh, rd, &t, &e, &n, pt, pe, &te, pte);
      json_t *pl = json_array();
      for (int d = 0; d < sh.dp && pl; d++)
        json_array_append_new(pl, json_pack("{sisfsfsf}", "dp", d, "iter_time_s", pt[d], "iter_energy_j", pe[d],
                                            "true_iter_energy_j", pte[d]));
      double frac = 1; /* the lowest rank's fraction of instruction time at the planned clock */
      for (int r = 0; r < sh.world; r++) {
        double f = sh.stats[rd * sh.world + r].planned_clock_fraction;
        if (f < frac) frac = f;
      }
      frac = zeus_round_significant(frac, ZEUS_DERIVED_DIGITS);
      json_array_append_new(rounds, json_pack("{sIsIsfsfsfsfso}", "round", (json_int_t)rd, "iterations", (json_int_t)n,
                                              "iter_time_s", t, "iter_energy_j", e, "true_iter_energy_j", te,
                                              "planned_clock_fraction", frac, "pipelines", pl));
    }
    char *text = rounds ? zeus_json_dumps(rounds, JSON_INDENT(2)) : NULL;
    if (text) printf("%s\n", text);
    else status = 1, fprintf(stderr, "pipeline_sim: %s\n", zeus_errmsg());
    zeus_free(text);
    json_decref(rounds);
  } else if (!status) {
    printf("%-6s %-11s %-14s %-14s", "round", "iterations", "iter_time_s", "iter_energy_j");
    for (int d = 0; sh.dp > 1 && d < sh.dp; d++) {
      char col[32];
      snprintf(col, sizeof col, "dp%d_energy_j", d);
      printf(" %-14s", col);
    }
    printf(" %-14s\n", "true_energy_j");
    for (long rd = 0; rd < sh.max_rounds; rd++) {
      double t, e;
      long n;
      round_figures(&sh, rd, &t, &e, &n, pt, pe, &te, pte);
      printf("%-6ld %-11ld %-14.6f %-14.3f", rd, n, t, e);
      for (int d = 0; sh.dp > 1 && d < sh.dp; d++) printf(" %-14.3f", pe[d]);
      printf(" %-14.3f\n", te);
    }
  }
  free(pt);
  free(pe);
  free(pte);
  zeus_thread_group_close(sh.tg);
  psim_job_close(sh.job);
  stage_profile_free(sh.profile);
  free(sh.stragglers);
  free(sh.stats);
  free(sh.truth);
  free(args);
  free(th);
  return status;
}
