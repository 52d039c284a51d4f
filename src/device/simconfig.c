/* Simulated-GPU configurations: from ZEUS_SIM_* settings, a profile CSV, or a JSON model file. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/csv.h"
#include "core/json.h"
#include "zeus/sim.h"

void zeus_sim_config_free(zeus_sim_config *cfg) {
  if (!cfg) return;
  if (cfg->gpus)
    for (unsigned i = 0; i < cfg->num_gpus; i++) free((void *)cfg->gpus[i].table);
  free(cfg->gpus);
  free(cfg);
}

static int alloc_config(unsigned n, zeus_sim_config **out) {
  zeus_sim_config *c = calloc(1, sizeof *c);
  if (!c || !(c->gpus = calloc(n ? n : 1, sizeof *c->gpus))) {
    free(c);
    return zeus__oom("building a simulated-GPU configuration");
  }
  c->num_gpus = n;
  *out = c;
  return ZEUS_OK;
}

/* Power-limit profile CSV: one row per limit (window names end in _<W>), one GPU per
 * gpu<i>_energy column. */
static int load_profile_csv(const char *path, unsigned units_per_row, zeus_sim_config **out) {
  zeus__csv *csv;
  int rc = zeus__csv_read_file_as(path, "simulated GPU profile (CSV)", &csv);
  if (rc) return rc;
  zeus_sim_config *cfg = NULL;
  size_t c_name, c_time;
  if ((rc = zeus__csv_require_col(csv, "window_name", &c_name)) ||
      (rc = zeus__csv_require_col(csv, "elapsed_time", &c_time)))
    goto done;
  unsigned ngpu = 0;
  long gcol[ZEUS_MAX_GPUS];
  for (;; ngpu++) {
    char col[32];
    snprintf(col, sizeof col, "gpu%u_energy", ngpu);
    long j = zeus__csv_find_col(csv, col);
    if (j < 0) break;
    if (ngpu == ZEUS_MAX_GPUS) {
      rc = zeus__error(ZEUS_EPARSE, "%s: more than %d gpu<i>_energy columns", path, ZEUS_MAX_GPUS);
      goto done;
    }
    gcol[ngpu] = j;
  }
  if (ngpu == 0) {
    rc = zeus__error(ZEUS_EPARSE, "%s: no gpu0_energy column (expected start_time,window_name,elapsed_time,gpu<i>_energy...)", path);
    goto done;
  }
  size_t nrows = zeus__csv_nrows(csv);
  if (nrows == 0) {
    rc = zeus__error(ZEUS_EPARSE, "%s: no rows after the header, expected one row per power limit", path);
    goto done;
  }
  if ((rc = alloc_config(ngpu, &cfg))) goto done;
  double upr = units_per_row ? units_per_row : 40;
  for (unsigned g = 0; g < ngpu; g++) {
    zeus_sim_table_row *rows = calloc(nrows, sizeof *rows);
    if (!rows) { rc = zeus__oom("loading a profile"); goto done; }
    cfg->gpus[g].model = ZEUS_SIM_TABLE;
    cfg->gpus[g].table = rows;
    cfg->gpus[g].table_len = nrows;
    const char *base = strrchr(path, '/');
    snprintf(cfg->gpus[g].name, sizeof cfg->gpus[g].name, "Zeus Simulated GPU (table %s)", base ? base + 1 : path);
  }
  for (size_t r = 0; r < nrows; r++) {
    const char *wn = zeus__csv_cell(csv, r, c_name);
    const char *us = strrchr(wn, '_');
    char *end = NULL;
    double limit = us ? strtod(us + 1, &end) : 0;
    if (!us || end == us + 1 || *end || !(limit > 0)) {
      rc = zeus__error(ZEUS_EPARSE, "%s:%zu: window_name '%s' does not end in _<power limit in W>", path,
                       zeus__csv_line(csv, r), wn);
      goto done;
    }
    double t;
    if ((rc = zeus__csv_double(csv, r, c_time, &t))) goto done;
    if (!(t > 0)) {
      rc = zeus__error(ZEUS_EPARSE, "%s:%zu: elapsed_time must be positive, got %g", path, zeus__csv_line(csv, r), t);
      goto done;
    }
    for (unsigned g = 0; g < ngpu; g++) {
      double e;
      if ((rc = zeus__csv_double(csv, r, (size_t)gcol[g], &e))) goto done;
      if (!(e > 0)) {
        rc = zeus__error(ZEUS_EPARSE, "%s:%zu: gpu%u_energy must be positive, got %g", path, zeus__csv_line(csv, r), g, e);
        goto done;
      }
      zeus_sim_table_row *row = (zeus_sim_table_row *)&cfg->gpus[g].table[r];
      row->power_limit_w = limit;
      row->time_per_unit_s = t / upr;
      row->energy_per_unit_j = e / upr;
    }
  }
done:
  zeus__csv_free(csv);
  if (rc) zeus_sim_config_free(cfg);
  else *out = cfg;
  return rc;
}

static int hw_from_json(const char *ctx, json_t *o, zeus_sim_hardware *out);

static int json_gpu(const char *path, size_t idx, json_t *o, zeus_sim_gpu_config *g) {
  char ctx[600];
  snprintf(ctx, sizeof ctx, "%s: gpus[%zu]", path, idx);
  if (!json_is_object(o)) return zeus__error(ZEUS_EPARSE, "%s: expected an object, got %s", ctx, zeus__json_type_name(o));
  static const struct { const char *key; size_t off; bool is_uint; } nums[] = {
#define U(f) {#f, offsetof(zeus_sim_dvfs, f), true}
#define D(f) {#f, offsetof(zeus_sim_dvfs, f), false}
      U(max_clock_mhz), U(min_clock_mhz), U(clock_step_mhz), U(mem_clock_mhz), D(min_power_limit_w),
      D(max_power_limit_w), D(default_power_limit_w), D(idle_power_w), D(static_power_w), D(dynamic_power_w),
      D(time_per_unit_s), D(mem_bound_fraction),
#undef U
#undef D
  };
  const char *key;
  json_t *v;
  json_object_foreach(o, key, v) {
    bool known = false;
    for (size_t k = 0; k < ZEUS__ARRAY_LEN(nums); k++) {
      if (strcmp(key, nums[k].key) != 0) continue;
      known = true;
      if (!json_is_number(v) || json_number_value(v) < 0)
        return zeus__error(ZEUS_EPARSE, "%s: field '%s' must be a number >= 0, got %s", ctx, key, zeus__json_type_name(v));
      double x = json_number_value(v);
      char *dst = (char *)&g->dvfs + nums[k].off;
      if (nums[k].is_uint) {
        if (x > 100000 || x != floor(x))
          return zeus__error(ZEUS_EPARSE, "%s: field '%s' must be a whole number of MHz up to 100000, got %g", ctx, key, x);
        *(unsigned *)dst = (unsigned)x;
      } else {
        *(double *)dst = x;
      }
    }
    if (known) continue;
    if (strcmp(key, "model") == 0) {
      const char *m = json_string_value(v);
      if (m && strcmp(m, "dvfs") == 0) g->model = ZEUS_SIM_DVFS;
      else if (m && strcmp(m, "table") == 0) g->model = ZEUS_SIM_TABLE;
      else return zeus__error(ZEUS_EPARSE, "%s: field 'model' must be \"dvfs\" or \"table\"", ctx);
    } else if (strcmp(key, "name") == 0) {
      if (!json_is_string(v)) return zeus__error(ZEUS_EPARSE, "%s: field 'name' must be a string", ctx);
      snprintf(g->name, sizeof g->name, "%s", json_string_value(v));
    } else if (strcmp(key, "energy_counter") == 0) {
      if (!json_is_boolean(v)) return zeus__error(ZEUS_EPARSE, "%s: field 'energy_counter' must be true or false", ctx);
      g->no_energy_counter = !json_is_true(v);
    } else if (strcmp(key, "counter_period_s") == 0 || strcmp(key, "time_scale") == 0) {
      if (!json_is_number(v) || json_number_value(v) < 0)
        return zeus__error(ZEUS_EPARSE, "%s: field '%s' must be a number >= 0", ctx, key);
      if (key[0] == 'c') g->counter_period_s = json_number_value(v);
      else g->time_scale = json_number_value(v);
    } else if (strcmp(key, "hardware") == 0) {
      int rc = hw_from_json(ctx, v, &g->hw);
      if (rc) return rc;
    } else if (strcmp(key, "table") == 0) {
      if (!json_is_array(v) || json_array_size(v) == 0)
        return zeus__error(ZEUS_EPARSE, "%s: field 'table' must be a non-empty list of [limit_w, time_per_unit_s, energy_per_unit_j]", ctx);
      zeus_sim_table_row *rows = calloc(json_array_size(v), sizeof *rows);
      if (!rows) return zeus__oom("loading a model file");
      free((void *)g->table);
      g->table = rows;
      g->table_len = json_array_size(v);
      size_t r;
      json_t *row;
      json_array_foreach(v, r, row) {
        if (!json_is_array(row) || json_array_size(row) != 3 || !json_is_number(json_array_get(row, 0)) ||
            !json_is_number(json_array_get(row, 1)) || !json_is_number(json_array_get(row, 2)))
          return zeus__error(ZEUS_EPARSE, "%s: table[%zu] must be [limit_w, time_per_unit_s, energy_per_unit_j]", ctx, r);
        rows[r].power_limit_w = json_number_value(json_array_get(row, 0));
        rows[r].time_per_unit_s = json_number_value(json_array_get(row, 1));
        rows[r].energy_per_unit_j = json_number_value(json_array_get(row, 2));
      }
    } else {
      return zeus__error(ZEUS_EPARSE, "%s: unknown field '%s'", ctx, key);
    }
  }
  return ZEUS_OK;
}

static int load_json(const char *path, zeus_sim_config **out) {
  json_t *root;
  int rc = zeus__json_load_file_max(path, ZEUS__READ_MAX, "simulated GPU model (JSON)", &root);
  if (rc) return rc;
  zeus_sim_config *cfg = NULL;
  json_t *gpus = json_object_get(root, "gpus");
  if (!json_is_object(root) || !json_is_array(gpus) || json_array_size(gpus) == 0 ||
      json_array_size(gpus) > ZEUS_MAX_GPUS) {
    rc = zeus__error(ZEUS_EPARSE, "%s: expected an object with a 'gpus' list of 1 to %d GPU models", path, ZEUS_MAX_GPUS);
    goto done;
  }
  if ((rc = alloc_config((unsigned)json_array_size(gpus), &cfg))) goto done;
  json_t *clock = json_object_get(root, "clock");
  if (clock) {
    const char *c = json_string_value(clock);
    if (c && strcmp(c, "virtual") == 0) cfg->clock = ZEUS_SIM_CLOCK_VIRTUAL;
    else if (c && strcmp(c, "wall") == 0) cfg->clock = ZEUS_SIM_CLOCK_WALL;
    else { rc = zeus__error(ZEUS_EPARSE, "%s: 'clock' must be \"virtual\" or \"wall\"", path); goto done; }
  }
  json_t *hw = json_object_get(root, "hardware");
  size_t i;
  json_t *g;
  json_array_foreach(gpus, i, g) {
    if (hw && (rc = hw_from_json(path, hw, &cfg->gpus[i].hw))) goto done;
    if ((rc = json_gpu(path, i, g, &cfg->gpus[i]))) goto done;
  }
done:
  json_decref(root);
  if (rc) zeus_sim_config_free(cfg);
  else *out = cfg;
  return rc;
}

/* ---- hardware profiles ---- */

/* Measured on one H100 80GB HBM3 (SXM), driver 580.159.04: ../shared/gpu/H100.md. Medians; the
 * tick's p10-p90 of 97.5-102.5 ms is a uniform jitter of about +-3 ms. */
static const zeus_sim_hardware hw_h100 = {
    .name = "h100",
    .tick_s = 0.0999,
    .tick_jitter_s = 0.003,
    .power_at_ticks = true,
    .power_noise = 0.002,
    .energy_read_s = 3.3e-3,
    .power_read_s = 3.3e-6,
    .average_power_read_s = 3.4e-6,
    .clock_read_s = 1.2e-6,
    .power_limit_read_s = 142e-6,
    .clock_lock_call_s = 11.4e-3,
    .clock_lock_effect_s = 8.1e-3,
    .power_limit_call_s = 8.6e-3,
    .power_limit_down_effect_s = 0.100,
    .power_limit_up_effect_s = 0.038,
};

/* Measured on one H200 (141 GB), driver 580.159.04, 2026-12-04: ../shared/gpu/H200.md and the
 * gpu-check report beside it (2026-12-04-H200-gpu-check.md). Sensors: the counter's 100.0 ms
 * period and the power's 101.3-101.9 ms (101.6 taken), the phase 75 ms at the start of the
 * drift's record ("75 -> 23 ms over 3 s"); the drift of 1.3-2 ms a tick is the periods'
 * difference with +-0.3 ms jitter on each clock (assumed: the jitter itself was not measured
 * apart from the 2.3 ms reads). Read costs: the probe's medians (counter 2.3 ms, power 0.3 us,
 * clocks 0.5 us, limit 85 us). Actuation, measured through the work: a clock lock's call 12.4 ms
 * (clock-latency, 20 changes) and effect 8.0 ms; a power limit's call 16 ms (the mean of 24.1 ms
 * down and 8.0 ms up: the model has one figure), effect 10.5 ms down and 36 ms up. Limits and
 * clocks: 200-700 W (default 700), 345-1980 MHz in 15 MHz steps (110), memory 3201 MHz (2201
 * also exists; memory locks are not supported there). Powers: idle 130 W (the probe, before the
 * load); 440 W at the highest clock (the load's 433-443 W in gpus check), split as 150 W static and
 * 290 W dynamic (assumed: no sweep of power against clock was made). Power noise as the H100's. */
static const zeus_sim_hardware hw_h200 = {
    .name = "h200",
    .tick_s = 0.1000,
    .tick_jitter_s = 0.0003,
    .power_at_ticks = true,
    .power_tick_s = 0.1016,
    .power_tick_jitter_s = 0.0003,
    .power_phase_s = 0.075,
    .power_noise = 0.002,
    .energy_read_s = 2.3e-3,
    .power_read_s = 0.3e-6,
    .average_power_read_s = 0.3e-6,
    .clock_read_s = 0.5e-6,
    .power_limit_read_s = 85e-6,
    .clock_lock_call_s = 12.4e-3,
    .clock_lock_effect_s = 8.0e-3,
    .power_limit_call_s = 16e-3,
    .power_limit_down_effect_s = 0.0105,
    .power_limit_up_effect_s = 0.036,
    .gpu = {.max_clock_mhz = 1980, .min_clock_mhz = 345, .clock_step_mhz = 15, .mem_clock_mhz = 3201,
            .min_power_limit_w = 200, .max_power_limit_w = 700, .default_power_limit_w = 700,
            .idle_power_w = 130, .static_power_w = 150, .dynamic_power_w = 290},
};

/* A GH200 Grace Hopper superchip (docs/grace-hopper.md): no GH200 was measured here. Its GPU is a
 * Hopper GH100 (an H100 with 96 GB HBM3), so its sensors, read costs and actuation are the
 * measured H100's above (assumed: the same tick and costs on the superchip). NVML refuses its
 * GPU-scope power and answers the module scope, and its energy counter counts the module (the
 * original's PR #172 and zeus/device/gpu/nvidia.py, _resolve_power_field_scope). The module adds
 * the Grace CPU and its LPDDR5X to the GPU: NVIDIA gives the module a programmable 450-1000 W TDP
 * (CPU + GPU + memory, GH200 datasheet) and a Grace CPU Superchip of two Grace CPUs with their
 * memory 500 W (GTC 2022), so one Grace with its memory up to ~250 W. During GPU training the
 * Grace mostly waits on the GPU: the rest of the module is modelled as a constant 100 W
 * (assumed: no GH200 was measured). GPU limits: 100-900 W, default 900 W (assumed: the GPU's
 * share of the 1000 W module, less the CPU's floor). */
static const zeus_sim_hardware hw_gh200 = {
    .name = "gh200",
    .tick_s = 0.0999,
    .tick_jitter_s = 0.003,
    .power_at_ticks = true,
    .power_noise = 0.002,
    .energy_read_s = 3.3e-3,
    .power_read_s = 3.3e-6,
    .average_power_read_s = 3.4e-6,
    .clock_read_s = 1.2e-6,
    .power_limit_read_s = 142e-6,
    .clock_lock_call_s = 11.4e-3,
    .clock_lock_effect_s = 8.1e-3,
    .power_limit_call_s = 8.6e-3,
    .power_limit_down_effect_s = 0.100,
    .power_limit_up_effect_s = 0.038,
    .module_other_w = 100,
    .module_power_only = true,
    .gpu = {.min_power_limit_w = 100, .max_power_limit_w = 900, .default_power_limit_w = 900},
};

/* An AMD Instinct MI300X (docs/amd.md), for the fake amdsmi: none was measured here. Published
 * figures: 750 W total board power and a 2100 MHz peak engine clock (AMD Instinct MI300X data
 * sheet); a 750 W power cap and about 190 W of socket power while idle (rocm-smi on an MI300X in
 * ROCm/legacy-rocm-build issue #5231, 2025). The memory clock of 1300 MHz is derived from the
 * data sheet's 5.3 TB/s over an 8192-bit HBM3 bus (5.2 Gb/s a pin, amd-smi's MCLK being a quarter
 * of it): an estimate. Estimates, not published: the lowest cap of 400 W (amdgpu takes the floor
 * from the board's firmware; issue #5231 could not go below 750 W on one system), the lowest GFX
 * clock of 500 MHz in 25 MHz steps (amdsmi reports only the range), the split of the load's power
 * into 200 W static and 550 W dynamic at the highest clock, the 10 ms sensor tick and every read
 * cost and actuation delay (sysfs reads of the SMU's metrics table: tenths of a millisecond; a
 * power cap or clock range written through sysfs: about 10 ms, taking effect 20-50 ms later). The
 * counter's resolution (15.259 uJ, 1/65536 J, as amdsmi_get_energy_count reports on MI200/MI300)
 * belongs to the fake amdsmi, not to this profile. */
static const zeus_sim_hardware hw_mi300x = {
    .name = "mi300x",
    .tick_s = 0.010,
    .tick_jitter_s = 0.0005,
    .power_at_ticks = true,
    .power_noise = 0.005,
    .energy_read_s = 0.3e-3,
    .power_read_s = 0.3e-3,
    .average_power_read_s = 0.3e-3,
    .clock_read_s = 0.1e-3,
    .power_limit_read_s = 0.1e-3,
    .clock_lock_call_s = 10e-3,
    .clock_lock_effect_s = 20e-3,
    .power_limit_call_s = 10e-3,
    .power_limit_down_effect_s = 0.050,
    .power_limit_up_effect_s = 0.050,
    .gpu = {.max_clock_mhz = 2100, .min_clock_mhz = 500, .clock_step_mhz = 25, .mem_clock_mhz = 1300,
            .min_power_limit_w = 400, .max_power_limit_w = 750, .default_power_limit_w = 750,
            .idle_power_w = 190, .static_power_w = 200, .dynamic_power_w = 550},
};

#define HW_D(f) {#f, offsetof(zeus_sim_hardware, f)}
static const struct {
  const char *key;
  size_t off;
} hw_fields[] = {
    HW_D(tick_s),        HW_D(tick_jitter_s),          HW_D(power_noise),
    HW_D(energy_read_s), HW_D(power_read_s),           HW_D(average_power_read_s),
    HW_D(clock_read_s),  HW_D(power_limit_read_s),     HW_D(clock_lock_call_s),
    HW_D(clock_lock_effect_s), HW_D(power_limit_call_s), HW_D(power_limit_down_effect_s),
    HW_D(power_limit_up_effect_s), HW_D(power_tick_s), HW_D(power_tick_jitter_s), HW_D(power_phase_s), HW_D(module_other_w),
};
#undef HW_D
/* The measured limits, clocks and powers, flat in a profile's object. */
#define HW_G(f, u) {#f, offsetof(zeus_sim_dvfs, f), u}
static const struct {
  const char *key;
  size_t off;
  bool is_uint;
} hw_gpu_fields[] = {
    HW_G(min_power_limit_w, false), HW_G(max_power_limit_w, false), HW_G(default_power_limit_w, false),
    HW_G(min_clock_mhz, true),      HW_G(max_clock_mhz, true),      HW_G(clock_step_mhz, true),
    HW_G(mem_clock_mhz, true),      HW_G(idle_power_w, false),      HW_G(static_power_w, false),
    HW_G(dynamic_power_w, false),
};
#undef HW_G

static int hw_named(const char *name, zeus_sim_hardware *out) {
  if (strcmp(name, "ideal") == 0) {
    *out = (zeus_sim_hardware){.name = "ideal"};
    return ZEUS_OK;
  }
  if (strcmp(name, "h100") == 0) {
    *out = hw_h100;
    return ZEUS_OK;
  }
  if (strcmp(name, "h200") == 0) {
    *out = hw_h200;
    return ZEUS_OK;
  }
  if (strcmp(name, "gh200") == 0) {
    *out = hw_gh200;
    return ZEUS_OK;
  }
  if (strcmp(name, "mi300x") == 0) {
    *out = hw_mi300x;
    return ZEUS_OK;
  }
  return zeus__error(ZEUS_EINVAL, "unknown simulated hardware profile '%s' (expected ideal, h100, h200, gh200, mi300x, or the path "
                     "of a JSON profile)", name);
}

/* A profile object: {"base": "h100", "<field>": number, "power_at_ticks": bool, "seed": n}. */
static int hw_from_json(const char *ctx, json_t *o, zeus_sim_hardware *out) {
  if (json_is_string(o)) return hw_named(json_string_value(o), out);
  if (!json_is_object(o))
    return zeus__error(ZEUS_EPARSE, "%s: expected a profile name or an object, got %s", ctx, zeus__json_type_name(o));
  zeus_sim_hardware h = {.name = "file"};
  json_t *base = json_object_get(o, "base");
  if (base) {
    if (!json_is_string(base)) return zeus__error(ZEUS_EPARSE, "%s: field 'base' must be a profile name", ctx);
    int rc = hw_named(json_string_value(base), &h);
    if (rc) return zeus__error_ctx(rc, "%s", ctx);
    snprintf(h.name, sizeof h.name, "file"); /* the file's name, unless it gives one */
  }
  const char *key;
  json_t *v;
  json_object_foreach(o, key, v) {
    if (strcmp(key, "base") == 0) continue;
    if (strcmp(key, "name") == 0) {
      if (!json_is_string(v)) return zeus__error(ZEUS_EPARSE, "%s: field 'name' must be a string", ctx);
      snprintf(h.name, sizeof h.name, "%s", json_string_value(v));
      continue;
    }
    if (strcmp(key, "power_at_ticks") == 0) {
      if (!json_is_boolean(v)) return zeus__error(ZEUS_EPARSE, "%s: field 'power_at_ticks' must be true or false", ctx);
      h.power_at_ticks = json_is_true(v);
      continue;
    }
    if (strcmp(key, "module_power_only") == 0) {
      if (!json_is_boolean(v)) return zeus__error(ZEUS_EPARSE, "%s: field 'module_power_only' must be true or false", ctx);
      h.module_power_only = json_is_true(v);
      continue;
    }
    if (strcmp(key, "seed") == 0) {
      if (!json_is_integer(v) || json_integer_value(v) < 0 || json_integer_value(v) > 4294967295LL)
        return zeus__error(ZEUS_EPARSE, "%s: field 'seed' must be a whole number in [0, 4294967295]", ctx);
      h.seed = (unsigned)json_integer_value(v);
      continue;
    }
    bool known = false;
    for (size_t k = 0; k < ZEUS__ARRAY_LEN(hw_fields); k++) {
      if (strcmp(key, hw_fields[k].key) != 0) continue;
      known = true;
      if (!json_is_number(v) || !(json_number_value(v) >= 0))
        return zeus__error(ZEUS_EPARSE, "%s: field '%s' must be a number of seconds >= 0 (power_noise: a fraction)",
                           ctx, key);
      *(double *)((char *)&h + hw_fields[k].off) = json_number_value(v);
    }
    for (size_t k = 0; k < ZEUS__ARRAY_LEN(hw_gpu_fields) && !known; k++) {
      if (strcmp(key, hw_gpu_fields[k].key) != 0) continue;
      known = true;
      double x = json_is_number(v) ? json_number_value(v) : -1;
      char *dst = (char *)&h.gpu + hw_gpu_fields[k].off;
      if (hw_gpu_fields[k].is_uint) {
        if (!(x >= 0 && x <= 100000 && x == floor(x)))
          return zeus__error(ZEUS_EPARSE, "%s: field '%s' must be a whole number of MHz in [0, 100000]", ctx, key);
        *(unsigned *)dst = (unsigned)x;
      } else {
        if (!(x >= 0 && x <= 100000))
          return zeus__error(ZEUS_EPARSE, "%s: field '%s' must be a number of W in [0, 100000]", ctx, key);
        *(double *)dst = x;
      }
    }
    if (!known) return zeus__error(ZEUS_EPARSE, "%s: unknown field '%s'", ctx, key);
  }
  *out = h;
  return ZEUS_OK;
}

int zeus_sim_hardware_profile(const char *name, zeus_sim_hardware *out) {
  if (!name || !out) return zeus__error(ZEUS_EINVAL, "zeus_sim_hardware_profile: a name and out are required");
  size_t n = strlen(name);
  if (!strchr(name, '/') && !(n > 5 && strcmp(name + n - 5, ".json") == 0)) return hw_named(name, out);
  json_t *root;
  int rc = zeus__json_load_file_max(name, ZEUS__READ_MAX, "simulated hardware profile (JSON)", &root);
  if (rc) return rc;
  rc = hw_from_json(name, root, out);
  if (!rc && strcmp(out->name, "file") == 0) {
    const char *base = strrchr(name, '/');
    snprintf(out->name, sizeof out->name, "%s", base ? base + 1 : name);
  }
  json_decref(root);
  return rc;
}

int zeus_sim_config_load(zeus_sim_config **out, const char *path, unsigned units_per_row) {
  if (!path || !out) return zeus__error(ZEUS_EINVAL, "zeus_sim_config_load: path and out are required");
  size_t n = strlen(path);
  if (n > 5 && strcmp(path + n - 5, ".json") == 0) return load_json(path, out);
  return load_profile_csv(path, units_per_row, out);
}

int zeus_sim_config_from_env(zeus_sim_config **out) {
  long ngpus, upr, period_ms;
  double variation;
  bool counter;
  int clock, rc;
  static const char *const clocks[] = {"virtual", "wall", NULL};
  if ((rc = zeus__env_long("ZEUS_SIM_UNITS_PER_ROW", 1, 1000000, 40, &upr)) ||
      (rc = zeus__env_choice("ZEUS_SIM_CLOCK", clocks, 0, &clock)) ||
      (rc = zeus__env_bool("ZEUS_SIM_ENERGY_COUNTER", true, &counter)) ||
      (rc = zeus__env_long("ZEUS_SIM_COUNTER_PERIOD_MS", 0, 10000, 0, &period_ms)) ||
      (rc = zeus__env_double("ZEUS_SIM_VARIATION", 0, 10, 0, &variation)))
    return rc;
  zeus_sim_config *cfg = NULL;
  const char *file = zeus__env_str("ZEUS_SIM_MODEL_FILE");
  if (file) {
    if ((rc = zeus_sim_config_load(&cfg, file, (unsigned)upr)))
      return zeus__error_ctx(rc, "ZEUS_SIM_MODEL_FILE");
    if (!strstr(file, ".json")) cfg->clock = (zeus_sim_clock_kind)clock;
  }
  const char *ng = zeus__env_str("ZEUS_SIM_GPUS");
  if (ng || !cfg) {
    if ((rc = zeus__env_long("ZEUS_SIM_GPUS", 1, ZEUS_MAX_GPUS, cfg ? cfg->num_gpus : 1, &ngpus))) {
      zeus_sim_config_free(cfg);
      return rc;
    }
    if (cfg && (unsigned)ngpus != cfg->num_gpus) {
      rc = zeus__error(ZEUS_EINVAL, "ZEUS_SIM_GPUS=%ld disagrees with the %u GPUs of ZEUS_SIM_MODEL_FILE '%s'", ngpus,
                       cfg->num_gpus, file);
      zeus_sim_config_free(cfg);
      return rc;
    }
    if (!cfg && (rc = alloc_config((unsigned)ngpus, &cfg))) return rc;
  }
  if (zeus__env_str("ZEUS_SIM_CLOCK")) cfg->clock = (zeus_sim_clock_kind)clock;
  const char *hwname = zeus__env_str("ZEUS_SIM_HARDWARE");
  zeus_sim_hardware hw = {0};
  if (hwname && (rc = zeus_sim_hardware_profile(hwname, &hw))) {
    zeus_sim_config_free(cfg);
    return zeus__error_ctx(rc, "ZEUS_SIM_HARDWARE");
  }
  for (unsigned i = 0; i < cfg->num_gpus; i++) {
    if (hwname) cfg->gpus[i].hw = hw;
    if (!counter) cfg->gpus[i].no_energy_counter = true;
    if (period_ms && cfg->gpus[i].hw.tick_s > 0) { /* the jitter, phase and power clock scale with it */
      zeus_sim_hardware *h = &cfg->gpus[i].hw;
      double f = period_ms / 1000.0 / h->tick_s;
      h->tick_jitter_s *= f;
      h->tick_s = period_ms / 1000.0;
      h->power_tick_s *= f;
      h->power_tick_jitter_s *= f;
      h->power_phase_s *= f;
    }
    else if (period_ms) cfg->gpus[i].counter_period_s = period_ms / 1000.0;
    if (variation > 0) cfg->gpus[i].time_scale = (cfg->gpus[i].time_scale > 0 ? cfg->gpus[i].time_scale : 1) * (1 + variation * i);
  }
  *out = cfg;
  return ZEUS_OK;
}
