/* tests/fake_common/fake_common.h: what the fake vendor libraries (tests/fake_nvml,
 * tests/fake_amdsmi) share, header-only so each fake compiles its own copy: fault-injection specs,
 * the setter log, the state file that keeps the knobs between processes, the busy file, and the
 * lies of a GPU that lies (FAKE_NVML_LIE, FAKE_AMDSMI_LIE).
 * Status codes are carried as long long so that NVML's int codes and amdsmi's 32-bit unsigned ones
 * both fit. `who` ("fake NVML") and `var` (the environment variable) name the fake and the setting
 * in messages on stderr. None of these functions locks: the callers hold their own mutex where the
 * state they pass is shared. */
#ifndef ZEUS_TEST_FAKE_COMMON_H
#define ZEUS_TEST_FAKE_COMMON_H

#include <fcntl.h>
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "zeus/sim.h"

/* One spec of <VAR>_INJECT: <function>:<code>[:<gpu>[:<after>]]. */
typedef struct fake_inject {
  char fn[64];      /* exported name, or "*" for every device function */
  long long code;
  int gpu;          /* -1: every GPU */
  unsigned after;   /* matching calls let through before firing */
  unsigned seen;    /* matching calls so far */
  bool fired;
} fake_inject;

/* Parses `value` (specs separated by ';') into specs[0..cap), *n the count. parse_code reads a
 * code given as a number or a name. False, with a line on stderr, when malformed. */
static inline bool fake_parse_inject(const char *who, const char *var, const char *value, fake_inject *specs,
                                     unsigned cap, unsigned *n, bool (*parse_code)(const char *, long long *)) {
  *n = 0;
  if (!value || !*value) return true;
  char buf[2048];
  snprintf(buf, sizeof buf, "%s", value);
  char *save = NULL;
  for (char *spec = strtok_r(buf, ";", &save); spec; spec = strtok_r(NULL, ";", &save)) {
    if (*n == cap) {
      fprintf(stderr, "%s: %s has more than %u specs\n", who, var, cap);
      return false;
    }
    fake_inject *s = &specs[*n];
    memset(s, 0, sizeof *s);
    s->gpu = -1;
    char *field[4] = {0};
    int nf = 0;
    for (char *p = spec; nf < 4;) {
      field[nf++] = p;
      char *colon = strchr(p, ':');
      if (!colon) break;
      *colon = '\0';
      p = colon + 1;
    }
    if (nf < 2 || !*field[0] || strlen(field[0]) >= sizeof s->fn || !parse_code(field[1], &s->code)) {
      fprintf(stderr, "%s: %s spec '%s' is not <function>:<code>[:<gpu>[:<after>]] with a known code\n", who, var,
              spec);
      return false;
    }
    snprintf(s->fn, sizeof s->fn, "%s", field[0]);
    char *end;
    if (nf >= 3 && *field[2] && strcmp(field[2], "*") != 0) {
      long g = strtol(field[2], &end, 10);
      if (*end || g < 0 || g >= ZEUS_MAX_GPUS) {
        fprintf(stderr, "%s: %s gpu '%s' is not an index or *\n", who, var, field[2]);
        return false;
      }
      s->gpu = (int)g;
    }
    if (nf >= 4 && *field[3]) {
      long a = strtol(field[3], &end, 10);
      if (*end || a < 0) {
        fprintf(stderr, "%s: %s after-count '%s' is not a number >= 0\n", who, var, field[3]);
        return false;
      }
      s->after = (unsigned)a;
    }
    (*n)++;
  }
  return true;
}

/* Whether a spec fires for this call of `fn` on `gpu` (< 0: a function without a device; "*"
 * matches only device functions); its code in *code. Once fired, a spec answers every later
 * matching call. */
static inline bool fake_inject_fire(fake_inject *specs, unsigned n, const char *fn, int gpu, long long *code) {
  for (unsigned k = 0; k < n; k++) {
    fake_inject *s = &specs[k];
    if (strcmp(s->fn, "*") == 0 ? gpu < 0 : strcmp(s->fn, fn) != 0) continue;
    if (s->gpu >= 0 && s->gpu != gpu) continue;
    if (!s->fired && s->seen++ < s->after) continue;
    s->fired = true;
    *code = s->code;
    return true;
  }
  return false;
}

/* Appends "<fn> <gpu|?>[ <args>] -> <code>" to the setter log `path` ("" when off) with one
 * write(), so that several processes may share the file. */
static inline void fake_log_setter(const char *who, const char *var, const char *path, const char *fn, int gpu,
                                   const char *args, long long code) {
  if (!path[0]) return;
  char line[256], gpustr[16];
  if (gpu >= 0) snprintf(gpustr, sizeof gpustr, "%d", gpu);
  else snprintf(gpustr, sizeof gpustr, "?");
  int n = snprintf(line, sizeof line, "%s %s%s%s -> %lld\n", fn, gpustr, args[0] ? " " : "", args, code);
  if (n <= 0) return;
  if ((size_t)n >= sizeof line) n = (int)sizeof line - 1;
  int fd = open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0) {
    fprintf(stderr, "%s: cannot open %s '%s'\n", who, var, path);
    return;
  }
  ssize_t w = write(fd, line, (size_t)n);
  (void)w;
  close(fd);
}

/* Applies the state file `path` ("" when off) to a new node: one line per GPU, "gpu <i>
 * power_limit_mw <mW> persistence <0|1> sm_lock <min> <max> mem_lock <min> <max>" (0 0: not
 * locked). A missing file is the GPUs' defaults. False (with a line on stderr) when malformed. */
static inline bool fake_state_load(const char *who, const char *var, const char *path, zeus_sim_node *n) {
  if (!path[0]) return true;
  int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
  if (fd < 0) return true; /* no file yet: defaults */
  FILE *f = fdopen(fd, "r");
  if (!f) {
    close(fd);
    return true;
  }
  char line[256];
  int lineno = 0;
  bool ok = true;
  while (ok && fgets(line, sizeof line, f)) {
    lineno++;
    unsigned gpu, mw, pm, lo, hi, mlo, mhi;
    if (line[0] == '\n' || line[0] == '#') continue;
    if (sscanf(line, "gpu %u power_limit_mw %u persistence %u sm_lock %u %u mem_lock %u %u", &gpu, &mw, &pm, &lo, &hi,
               &mlo, &mhi) != 7) {
      fprintf(stderr, "%s: %s '%s' line %d is not 'gpu <i> power_limit_mw <mW> persistence <0|1> sm_lock <min> "
              "<max> mem_lock <min> <max>'\n", who, var, path, lineno);
      ok = false;
      break;
    }
    if (gpu >= zeus_sim_node_gpu_count(n)) continue; /* written by a node with more GPUs */
    if (zeus_sim_gpu_set_power_limit(n, gpu, mw) || zeus_sim_gpu_set_persistence_mode(n, gpu, pm != 0) ||
        (hi ? zeus_sim_gpu_set_locked_clocks(n, gpu, lo, hi) : zeus_sim_gpu_reset_locked_clocks(n, gpu)) ||
        (mhi ? zeus_sim_gpu_set_memory_locked_clocks(n, gpu, mlo, mhi)
             : zeus_sim_gpu_reset_memory_locked_clocks(n, gpu))) {
      fprintf(stderr, "%s: %s '%s' line %d: %s\n", who, var, path, lineno, zeus_errmsg());
      ok = false;
    }
  }
  fclose(f);
  return ok;
}

/* Writes the knobs of GPUs 0..count-1 to the state file `path` ("" when off): a temporary file,
 * then rename. */
static inline void fake_state_save(const char *who, const char *var, const char *path, zeus_sim_node *n,
                                   unsigned count) {
  if (!path[0] || !n) return;
  char text[ZEUS_MAX_GPUS * 128];
  size_t len = 0;
  for (unsigned i = 0; i < count && len < sizeof text; i++) {
    unsigned mw = 0, lo = 0, hi = 0, mlo = 0, mhi = 0;
    bool pm = false;
    zeus_sim_gpu_get_power_limit(n, i, &mw);
    zeus_sim_gpu_get_persistence_mode(n, i, &pm);
    zeus_sim_gpu_get_locked_clocks(n, i, &lo, &hi, &mlo, &mhi);
    int k = snprintf(text + len, sizeof text - len,
                     "gpu %u power_limit_mw %u persistence %d sm_lock %u %u mem_lock %u %u\n", i, mw, pm ? 1 : 0, lo,
                     hi, mlo, mhi);
    if (k < 0) return;
    len += (size_t)k;
  }
  if (len > sizeof text) len = sizeof text;
  char tmp[1100];
  snprintf(tmp, sizeof tmp, "%s.%ld.tmp", path, (long)getpid());
  int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0644);
  if (fd < 0) {
    fprintf(stderr, "%s: cannot write %s beside '%s'\n", who, var, path);
    return;
  }
  bool ok = write(fd, text, len) == (ssize_t)len;
  ok = close(fd) == 0 && ok;
  if (!ok || rename(tmp, path) != 0) {
    fprintf(stderr, "%s: cannot write %s '%s'\n", who, var, path);
    unlink(tmp);
  }
}

/* Marks GPUs 0..count-1 busy while the file `path` ("" when off) exists; *busy is what they are
 * marked now. */
static inline void fake_busy_poll(const char *path, zeus_sim_node *n, unsigned count, bool *busy) {
  if (!path[0] || !n) return;
  bool now = access(path, F_OK) == 0;
  if (now == *busy) return;
  for (unsigned i = 0; i < count; i++) zeus_sim_gpu_set_load(n, i, now);
  *busy = now;
}

/* ---- a GPU that lies (<VAR>_LIE=<lie>[,<lie>...]) ----
 * Every GPU of the node lies alike; the engine's ground truth stays true. The lies act on the
 * engine's figures before a fake converts them to its vendor's units: the energy counter in mJ,
 * power in mW, the SM (GFX) clock in MHz. */
#define FAKE_LATE_MAX 8 /* counter_late, power_late: changes waiting to show, per GPU and reading */
/* power_late: the readings it delays (each its own changes, the same delay for one tick's). */
enum { FAKE_POWER_INSTANT, FAKE_POWER_AVERAGE, FAKE_POWER_KINDS };
/* power_late: one power reading of one GPU: the value shown, and the changes not shown yet. */
typedef struct fake_late_power {
  bool seen;                 /* a first reading was taken */
  unsigned raw, shown;       /* the engine's reading at the last change, the reading shown (mW) */
  double tick;               /* the node time of the last change's tick */
  unsigned v[FAKE_LATE_MAX]; /* changes waiting: value (mW), node time it shows */
  double at[FAKE_LATE_MAX];
  unsigned n;
} fake_late_power;
typedef struct fake_lie {
  bool skip, counter_frozen, clock_frozen;
  double late_s;                        /* counter_late: the most a change shows late (s); 0: off */
  double power_late_s;                  /* power_late: the most a change shows late (s); 0: off */
  fake_late_power plate[ZEUS_MAX_GPUS][FAKE_POWER_KINDS];
  double power;                         /* power_scaled factor; 1: off */
  double gain;                          /* counter_gains: per second; 0: off */
  double t0;                            /* node time at init (counter_gains) */
  double shown[ZEUS_MAX_GPUS];          /* counter_gains: the counter shown (mJ) */
  uint64_t raw[ZEUS_MAX_GPUS];          /* the engine's counter at the last read */
  uint64_t lost[ZEUS_MAX_GPUS];         /* energy hidden so far (mJ) */
  unsigned long changes[ZEUS_MAX_GPUS]; /* changes of the engine's counter seen */
  bool seen[ZEUS_MAX_GPUS];             /* a first counter reading was taken */
  unsigned clock[ZEUS_MAX_GPUS];        /* the first SM clock shown; 0: none yet */
  /* counter_late: the value shown, and the changes not shown yet (value, node time they show) */
  uint64_t late_shown[ZEUS_MAX_GPUS];
  uint64_t late_v[ZEUS_MAX_GPUS][FAKE_LATE_MAX];
  double late_at[ZEUS_MAX_GPUS][FAKE_LATE_MAX];
  unsigned late_n[ZEUS_MAX_GPUS];
} fake_lie;

/* Parses `value` into *l (reset first; t0 is the caller's to set). False, with a line on stderr,
 * when malformed. */
static inline bool fake_parse_lie(const char *who, const char *var, const char *value, fake_lie *l) {
  memset(l, 0, sizeof *l);
  l->power = 1.0;
  if (!value || !*value) return true;
  char buf[256];
  snprintf(buf, sizeof buf, "%s", value);
  char *save = NULL;
  for (char *lie = strtok_r(buf, ",", &save); lie; lie = strtok_r(NULL, ",", &save)) {
    if (strcmp(lie, "counter_skips_tick") == 0) {
      l->skip = true;
    } else if (strcmp(lie, "counter_frozen") == 0) {
      l->counter_frozen = true;
    } else if (strcmp(lie, "clock_frozen") == 0) {
      l->clock_frozen = true;
    } else if (strncmp(lie, "counter_gains:", 14) == 0) {
      char *end;
      double f = strtod(lie + 14, &end);
      if (*end || !(f > 0) || f > 10) {
        fprintf(stderr, "%s: %s counter_gains '%s' is not a number in (0, 10] per second\n", who, var, lie + 14);
        return false;
      }
      l->gain = f;
    } else if (strncmp(lie, "counter_late:", 13) == 0) {
      char *end;
      double ms = strtod(lie + 13, &end);
      if (*end || !(ms > 0) || ms > 10000) {
        fprintf(stderr, "%s: %s counter_late '%s' is not a number of ms in (0, 10000]\n", who, var, lie + 13);
        return false;
      }
      l->late_s = ms / 1000.0;
    } else if (strncmp(lie, "power_late:", 11) == 0) {
      char *end;
      double ms = strtod(lie + 11, &end);
      if (*end || !(ms > 0) || ms > 10000) {
        fprintf(stderr, "%s: %s power_late '%s' is not a number of ms in (0, 10000]\n", who, var, lie + 11);
        return false;
      }
      l->power_late_s = ms / 1000.0;
    } else if (strncmp(lie, "power_scaled:", 13) == 0) {
      char *end;
      double f = strtod(lie + 13, &end);
      if (*end || !(f > 0) || f > 10) {
        fprintf(stderr, "%s: %s power_scaled factor '%s' is not a number in (0, 10]\n", who, var, lie + 13);
        return false;
      }
      l->power = f;
    } else {
      fprintf(stderr, "%s: %s '%s' is not counter_skips_tick, counter_frozen, counter_gains:<f>, counter_late:<ms>, "
              "clock_frozen, power_scaled:<factor> or power_late:<ms>\n", who, var, lie);
      return false;
    }
  }
  return true;
}

/* A number in [0, 1) that depends only on k (splitmix64's finalizer): the same lie in every run. */
static inline double fake_lie_unit(uint64_t k) {
  k += 0x9e3779b97f4a7c15ull;
  k = (k ^ (k >> 30)) * 0xbf58476d1ce4e5b9ull;
  k = (k ^ (k >> 27)) * 0x94d049bb133111ebull;
  k ^= k >> 31;
  return (double)(k >> 11) * 0x1.0p-53;
}

/* The energy counter (mJ) as the lying GPU shows it, from the engine's reading `raw` at node time
 * `now` (`tick`: the node time of the engine's last tick, which counter_late needs; `now` where it
 * is not asked for):
 *   counter_skips_tick  every 5th change is not shown and its energy is lost;
 *   counter_frozen      the counter never moves from its first reading;
 *   counter_gains:<f>   each increment is shown 1 + f x (seconds since init) times its size;
 *   counter_late:<ms>   each change shows late, by a delay drawn anew for every change in
 *                       [0, ms) after the engine's tick (nothing is lost: a change's value shows
 *                       whole, only its time is off). */
static inline uint64_t fake_lie_counter(fake_lie *l, unsigned gpu, uint64_t raw, double now, double tick) {
  /* Two threads may read the engine in one order and get here in the other: a reading older than
   * the last one seen adds nothing (and is shown as the last one). */
  if (l->seen[gpu] && raw < l->raw[gpu]) raw = l->raw[gpu];
  if (l->gain > 0) {
    if (l->seen[gpu]) l->shown[gpu] += (double)(raw - l->raw[gpu]) * (1 + l->gain * (now - l->t0));
    else l->shown[gpu] = (double)raw;
    l->raw[gpu] = raw;
    l->seen[gpu] = true;
    raw = (uint64_t)llround(l->shown[gpu]);
  } else if (l->counter_frozen) {
    if (!l->seen[gpu]) l->raw[gpu] = raw, l->seen[gpu] = true;
    raw = l->raw[gpu];
  } else if (l->late_s > 0) {
    if (!l->seen[gpu]) {
      l->late_shown[gpu] = l->raw[gpu] = raw;
      l->seen[gpu] = true;
    } else if (raw > l->raw[gpu]) {
      unsigned n = l->late_n[gpu];
      if (n == FAKE_LATE_MAX) { /* too many waiting: the oldest shows now */
        l->late_shown[gpu] = l->late_v[gpu][0];
        memmove(&l->late_v[gpu][0], &l->late_v[gpu][1], (n - 1) * sizeof l->late_v[gpu][0]);
        memmove(&l->late_at[gpu][0], &l->late_at[gpu][1], (n - 1) * sizeof l->late_at[gpu][0]);
        n--;
      }
      l->late_v[gpu][n] = raw;
      l->late_at[gpu][n] = fmin(tick, now) + l->late_s * fake_lie_unit(++l->changes[gpu] * ZEUS_MAX_GPUS + gpu);
      l->late_n[gpu] = n + 1;
      l->raw[gpu] = raw;
    }
    /* The newest change due by now shows (with every older one: the counter is cumulative). */
    unsigned due = 0;
    for (unsigned i = 0; i < l->late_n[gpu]; i++)
      if (l->late_at[gpu][i] <= now) due = i + 1;
    if (due) {
      l->late_shown[gpu] = l->late_v[gpu][due - 1];
      l->late_n[gpu] -= due;
      memmove(&l->late_v[gpu][0], &l->late_v[gpu][due], l->late_n[gpu] * sizeof l->late_v[gpu][0]);
      memmove(&l->late_at[gpu][0], &l->late_at[gpu][due], l->late_n[gpu] * sizeof l->late_at[gpu][0]);
    }
    raw = l->late_shown[gpu];
  } else if (l->skip) {
    if (l->seen[gpu] && raw > l->raw[gpu] && ++l->changes[gpu] % 5 == 0) l->lost[gpu] += raw - l->raw[gpu];
    l->raw[gpu] = raw;
    l->seen[gpu] = true;
    raw -= l->lost[gpu];
  }
  return raw;
}

/* The node time of the power readings' last tick on GPU `gpu`, for power_late: the engine's newest
 * power tick where the readings refresh at ticks (zeus_sim_gpu_power_ticks_since), else `now`
 * (a reading that moves with the work changes when it is read). Call it after the reading. */
static inline double fake_power_tick(zeus_sim_node *n, unsigned gpu, double now) {
  zeus_sim_hardware hw;
  zeus_sim_tick tk;
  if (zeus_sim_gpu_hardware(n, gpu, &hw) != ZEUS_OK || !hw.power_at_ticks) return now;
  if (zeus_sim_gpu_power_ticks_since(n, gpu, -INFINITY, &tk, 1) != 1) return now;
  return fmin(tk.t_s, now);
}

/* A power reading (mW; `kind` FAKE_POWER_INSTANT or FAKE_POWER_AVERAGE) as a GPU with
 * power_late:<ms> shows it, from the engine's reading `mw` at node time `now` (`tick`: the node
 * time of the power's last tick, fake_power_tick): each change shows late, by a delay drawn anew
 * for every change in [0, ms) after its tick, a function of the tick's time and the GPU only (so
 * the same in every run on the same ticks, and the same for one tick's instant and average power).
 * A change is a reading that differs from the last change's, at a tick after the last change's: a
 * reader that raced another to the lock with an older reading adds none. Too many changes waiting
 * (a delay longer than FAKE_LATE_MAX ticks): the oldest shows now. */
static inline unsigned fake_lie_power_late(fake_lie *l, unsigned gpu, unsigned kind, unsigned mw, double now,
                                           double tick) {
  if (!(l->power_late_s > 0) || gpu >= ZEUS_MAX_GPUS || kind >= FAKE_POWER_KINDS) return mw;
  fake_late_power *s = &l->plate[gpu][kind];
  tick = fmin(tick, now);
  if (!s->seen) {
    s->seen = true;
    s->raw = s->shown = mw;
    s->tick = tick;
    return mw;
  }
  if (mw != s->raw && tick > s->tick) {
    if (s->n == FAKE_LATE_MAX) {
      s->shown = s->v[0];
      memmove(&s->v[0], &s->v[1], (s->n - 1) * sizeof s->v[0]);
      memmove(&s->at[0], &s->at[1], (s->n - 1) * sizeof s->at[0]);
      s->n--;
    }
    uint64_t key = (uint64_t)llround(tick * 1e6) * ZEUS_MAX_GPUS + gpu;
    s->v[s->n] = mw;
    s->at[s->n] = tick + l->power_late_s * fake_lie_unit(key ^ 0x706f7765726c6174ull /* "powerlat" */);
    s->n++;
    s->raw = mw;
    s->tick = tick;
  }
  /* The newest change due by now shows (a power reading is its last tick's, not a sum). */
  unsigned due = 0;
  for (unsigned i = 0; i < s->n; i++)
    if (s->at[i] <= now) due = i + 1;
  if (due) {
    s->shown = s->v[due - 1];
    s->n -= due;
    memmove(&s->v[0], &s->v[due], s->n * sizeof s->v[0]);
    memmove(&s->at[0], &s->at[due], s->n * sizeof s->at[0]);
  }
  return s->shown;
}

/* A power reading (mW) as the lying GPU shows it (power_scaled:<f>). */
static inline unsigned fake_lie_power(const fake_lie *l, unsigned mw) {
  if (l->power == 1.0) return mw;
  double v = mw * l->power;
  return v > 4e9 ? 4000000000u : (unsigned)llround(v);
}

/* The SM clock read back (MHz) as the lying GPU shows it (clock_frozen: its first reading). */
static inline unsigned fake_lie_clock(fake_lie *l, unsigned gpu, unsigned mhz) {
  if (!l->clock_frozen) return mhz;
  if (!l->clock[gpu]) l->clock[gpu] = mhz;
  return l->clock[gpu];
}

#endif
