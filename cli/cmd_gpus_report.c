/* zeus gpus report: the report of scripts/gpu-check.sh. Reads a manifest of the steps it ran
 * (each step's outcome and the JSON document its zeus command wrote) and writes one Markdown
 * report and one JSON document with every figure. */
#include <jansson.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli.h"

#define CMD "gpus report"
#define MAX_STEPS 64

static const char *md_path, *json_path, *title = "zeus gpu-check";

static const cli_opt opts[] = {
    {"markdown", 'o', CLI_OPT_STRING, &md_path, "FILE", "write the Markdown report to FILE",
     "standard output"},
    {"json-out", 0, CLI_OPT_STRING, &json_path, "FILE", "write the JSON document to FILE", "none"},
    {"title", 0, CLI_OPT_STRING, &title, "TEXT", "the report's title", "zeus gpu-check"},
    {0},
};

static const cli_command report_cmd = {
    .name = "gpus report",
    .usage = "zeus gpus report MANIFEST [-o FILE.md] [--json-out FILE.json] [--title TEXT]",
    .about =
        "Writes the report of scripts/gpu-check.sh ('make gpu-check') from MANIFEST, one line\n"
        "per step it ran, fields separated by tabs:\n"
        "  <step> <status> <json file or -> <note>\n"
        "status is passed, failed or skipped; the JSON file is the document the step's zeus\n"
        "command printed with --json (gpus, gpus probe, gpus check, gpus set, gpus\n"
        "clock-latency, or the optimizer step's). Steps named gpus-before and gpus-after (the\n"
        "output of 'zeus gpus --json' before and after the run) are compared: every GPU's\n"
        "power limit must be back as it was. The Markdown report has a summary table and one\n"
        "section per kind of step with every figure; the JSON document holds every step's\n"
        "document under \"steps\".\n"
        "\n"
        "Exits with 1 when a step failed or a GPU is not back as it was, 2 for a bad manifest.",
    .opts = opts,
    .more =
        "JSON: {\"title\", \"date\", \"zeus_version\", \"steps\": [{\"step\", \"status\", "
        "\"note\",\n"
        "\"result\" (the step's document, or null)}], \"restored\" (true, false, or null without\n"
        "both gpus-before and gpus-after), \"passed\", \"failed\", \"skipped\", \"ok\"}.\n"
        "\n"
        "Example:\n"
        "  zeus gpus report out/manifest.tsv -o out/report.md --json-out out/report.json\n",
    .args = CLI_ARGS_ANY,
    .min_args = 1,
    .max_args = 1,
    .args_name = "MANIFEST",
};

typedef struct step {
  char name[64], status[16], note[512];
  json_t *doc;
} step;

static const json_t *get(const json_t *o, const char *k) { return json_object_get(o, k); }

/* A number as text with `fmt`, or "n/a". */
static const char *num(const json_t *v, const char *fmt, double scale, char *buf, size_t n) {
  if (!json_is_number(v))
    snprintf(buf, n, "n/a");
  else
    snprintf(buf, n, fmt, json_number_value(v) * scale);
  return buf;
}

static const char *tri(const json_t *v) {
  return json_is_null(v) || !v ? "n/a" : json_is_true(v) ? "pass" : "**FAIL**";
}

/* Markdown-safe: a cell's text with | and newlines replaced. */
static void cell(FILE *f, const char *s) {
  for (; s && *s; s++) fputc(*s == '|' ? '/' : *s == '\n' ? ' ' : *s, f);
}

static step *find_step(step *st, size_t n, const char *name) {
  for (size_t k = 0; k < n; k++)
    if (strcmp(st[k].name, name) == 0 && st[k].doc) return &st[k];
  return NULL;
}

static void md_probe(FILE *f, const json_t *d) {
  char a[64], b[64];
  fprintf(f,
          "## What it found (gpus probe)\n\nBackend `%s`, driver `%s`, NVML `%s`; every call made "
          "%s times.\n\n",
          json_string_value(get(d, "backend")) ? json_string_value(get(d, "backend")) : "?",
          json_string_value(get(d, "driver_version")) ? json_string_value(get(d, "driver_version"))
                                                      : "n/a",
          json_string_value(get(d, "library_version"))
              ? json_string_value(get(d, "library_version"))
              : "n/a",
          num(get(d, "calls_per_function"), "%.0f", 1, a, sizeof a));
  fprintf(f,
          "| GPU | name | UUID | architecture | power limit | range | default | SM clocks | memory "
          "clocks | energy counter |\n"
          "|---|---|---|---|---|---|---|---|---|---|\n");
  size_t i;
  const json_t *g;
  json_array_foreach(get(d, "gpus"), i, g) {
    const json_t *gr = get(g, "graphics_clocks_mhz"), *mem = get(g, "memory_clocks_mhz");
    size_t ng = json_array_size(gr), nm = json_array_size(mem);
    char lim[32], lo[32], hi[32], def[32];
    fprintf(f, "| %lld | ", (long long)json_integer_value(get(g, "index")));
    cell(f, json_string_value(get(g, "name")));
    fprintf(f, " | `%s` | %s | %s W | %s-%s W | %s W | ",
            json_string_value(get(g, "uuid")) ? json_string_value(get(g, "uuid")) : "n/a",
            json_string_value(get(g, "architecture_name"))
                ? json_string_value(get(g, "architecture_name"))
                : "n/a",
            num(get(g, "power_limit_w"), "%.1f", 1, lim, sizeof lim),
            num(get(g, "power_limit_min_w"), "%.1f", 1, lo, sizeof lo),
            num(get(g, "power_limit_max_w"), "%.1f", 1, hi, sizeof hi),
            num(get(g, "power_limit_default_w"), "%.1f", 1, def, sizeof def));
    if (ng)
      fprintf(f, "%s-%s MHz (%zu) | ", num(json_array_get(gr, ng - 1), "%.0f", 1, a, sizeof a),
              num(json_array_get(gr, 0), "%.0f", 1, b, sizeof b), ng);
    else
      fprintf(f, "n/a | ");
    if (nm)
      fprintf(f, "%s-%s MHz (%zu) | ", num(json_array_get(mem, nm - 1), "%.0f", 1, a, sizeof a),
              num(json_array_get(mem, 0), "%.0f", 1, b, sizeof b), nm);
    else
      fprintf(f, "n/a | ");
    fprintf(f, "%s |\n",
            json_is_true(get(g, "energy_counter"))    ? "yes"
            : json_is_false(get(g, "energy_counter")) ? "no"
                                                      : "n/a");
  }
  json_array_foreach(get(d, "gpus"), i, g) {
    fprintf(f,
            "\n### GPU %lld: every call\n\n| call | library function | status | median | worst | "
            "value |\n|---|---|---|---|---|---|\n",
            (long long)json_integer_value(get(g, "index")));
    size_t k;
    const json_t *c;
    const json_t *lists[2] = {get(d, "system_calls"), get(g, "calls")};
    for (int l = i == 0 ? 0 : 1; l < 2; l++) {
      json_array_foreach(lists[l], k, c) {
        fprintf(f, "| %s | `%s` | %s | %s us | %s us | ", json_string_value(get(c, "call")),
                json_string_value(get(c, "function")),
                strcmp(json_string_value(get(c, "status")), "ok") == 0 ||
                        strcmp(json_string_value(get(c, "status")), "not_supported") == 0
                    ? json_string_value(get(c, "status"))
                    : "**FAIL**",
                num(get(c, "median_latency_s"), "%.1f", 1e6, a, sizeof a),
                num(get(c, "max_latency_s"), "%.1f", 1e6, b, sizeof b));
        const json_t *v = get(c, "value");
        if (json_is_object(v)) {
          char *s = zeus_json_dumps(v, JSON_COMPACT);
          if (s && strlen(s) > 120) strcpy(s + 117, "...");
          fputc('`', f);
          cell(f, s);
          fputc('`', f);
          zeus_free(s);
        }
        if (json_is_string(get(c, "error"))) {
          fprintf(f, " ");
          cell(f, json_string_value(get(c, "error")));
        }
        fprintf(f, " |\n");
      }
    }
  }
  fprintf(f, "\n");
}

static void md_check(FILE *f, const json_t *d) {
  char a[32], b[32], c[32], e[32], p[32], l[32], m[32];
  fprintf(f,
          "## Readings against each other (gpus check)\n\nSampled for %s s, tolerance %s %%.\n\n",
          num(get(d, "duration_s"), "%.2f", 1, a, sizeof a),
          num(get(d, "tolerance_pct"), "%g", 1, b, sizeof b));
  fprintf(f,
          "| GPU | samples | counter update period | counter energy | integrated power | "
          "difference | power mean / max | limit | monotonic | energy agrees | within limit |\n"
          "|---|---|---|---|---|---|---|---|---|---|---|\n");
  size_t i;
  const json_t *g;
  json_array_foreach(get(d, "gpus"), i, g) {
    const json_t *ct = get(g, "counter"), *pw = get(g, "power"), *ck = get(g, "checks");
    fprintf(f, "| %lld | %lld | %s ms | %s J | %s J | %s %% | %s / %s W | %s W | %s | %s | %s |\n",
            (long long)json_integer_value(get(g, "index")),
            (long long)json_integer_value(get(g, "samples")),
            num(get(ct, "update_period_s"), "%.1f", 1e3, a, sizeof a),
            num(get(ct, "energy_j"), "%.3f", 1, b, sizeof b),
            num(get(pw, "energy_j"), "%.3f", 1, c, sizeof c),
            num(get(g, "agreement_pct"), "%+.2f", 1, e, sizeof e),
            num(get(pw, "instant_mean_w"), "%.1f", 1, p, sizeof p),
            num(get(pw, "instant_max_w"), "%.1f", 1, l, sizeof l),
            num(get(g, "power_limit_w"), "%.1f", 1, m, sizeof m), tri(get(ck, "counter_monotonic")),
            tri(get(ck, "energy_agrees")), tri(get(ck, "power_within_limit")));
  }
  fprintf(f, "\n");
  /* A Grace Hopper module's readings cover CPU + memory + GPU: said under the table, which keeps
   * its columns for every GPU. */
  bool any = false;
  json_array_foreach(get(d, "gpus"), i, g) {
    const json_t *sc = get(g, "power_scope");
    if (!json_is_string(sc) || strcmp(json_string_value(sc), "module") != 0) continue;
    fprintf(f, "%s %lld", any ? ", GPU" : "Module scope (the whole superchip: CPU + memory + GPU) on GPU",
            (long long)json_integer_value(get(g, "index")));
    any = true;
  }
  if (any)
    fprintf(f, ": the counter and the power above are the module's, and the GPU's power limit does "
               "not bound them (within limit n/a; docs/grace-hopper.md).\n\n");
}

/* A setting's value under its unit's key ("read_back" -> "read_back_w" or "read_back_mhz"). */
static const json_t *uget(const json_t *s, const char *base, bool limit) {
  char key[64];
  snprintf(key, sizeof key, "%s_%s", base, limit ? "w" : "mhz");
  return json_object_get(s, key);
}

static void md_set_rows(FILE *f, const char *stepname, const json_t *d) {
  size_t i, k;
  const json_t *g, *s;
  char a[32], b[32], c[32], e[32], pb[32], pa[32];
  json_array_foreach(get(d, "gpus"), i, g) {
    const json_t *af = get(g, "after"), *bf = get(g, "before");
    json_array_foreach(get(g, "settings"), k, s) {
      bool limit = strcmp(json_string_value(get(s, "setting")), "power_limit") == 0;
      const char *u = limit ? "W" : "MHz";
      fprintf(f, "| %s | %lld | %s | %s %s | %s %s (%s-%s) | %s | %s -> %s W, %s | ", stepname,
              (long long)json_integer_value(get(g, "index")), json_string_value(get(s, "setting")),
              num(uget(s, "requested", limit), "%.1f", 1, a, sizeof a), u,
              num(uget(s, "read_back", limit), "%.1f", 1, b, sizeof b), u,
              num(uget(s, "read_min", limit), "%.0f", 1, c, sizeof c),
              num(uget(s, "read_max", limit), "%.0f", 1, e, sizeof e),
              json_is_true(get(s, "supported")) ? tri(get(s, "ok")) : "not supported",
              num(get(bf, "power_limit_w"), "%.1f", 1, pb, sizeof pb),
              num(get(af, "power_limit_w"), "%.1f", 1, pa, sizeof pa),
              json_is_true(get(af, "restored")) ? "restored" : "**NOT RESTORED**");
      cell(f, json_string_value(get(s, "error")));
      fprintf(f, " |\n");
    }
  }
}

static void md_latency(FILE *f, const json_t *d) {
  char a[32], b[32], c[32], e[32], h[32], l[32];
  fprintf(f,
          "## Clock change latency (gpus clock-latency)\n\nHow long a locked SM clock takes to "
          "show in the clock read "
          "back, under load: the physical limit of the Perseus controller.\n\n"
          "| GPU | clocks | changes | median | min | worst | call median | timeouts | ok "
          "|\n|---|---|---|---|---|---|---|---|---|\n");
  size_t i;
  const json_t *g;
  json_array_foreach(get(d, "gpus"), i, g) {
    fprintf(f, "| %lld | %s <-> %s MHz | %zu | %s ms | %s ms | %s ms | %s ms | %lld | %s |\n",
            (long long)json_integer_value(get(g, "index")),
            num(get(g, "high_mhz"), "%.0f", 1, h, sizeof h),
            num(get(g, "low_mhz"), "%.0f", 1, l, sizeof l), json_array_size(get(g, "latencies_s")),
            num(get(g, "median_latency_s"), "%.1f", 1e3, a, sizeof a),
            num(get(g, "min_latency_s"), "%.1f", 1e3, b, sizeof b),
            num(get(g, "max_latency_s"), "%.1f", 1e3, c, sizeof c),
            num(get(g, "median_call_s"), "%.3f", 1e3, e, sizeof e),
            (long long)json_integer_value(get(g, "timeouts")),
            json_is_true(get(g, "ok")) ? "pass" : "**FAIL**");
  }
  fprintf(f, "\n");
}

/* Every GPU's power limit in gpus-after equals gpus-before; writes the table. */
static json_t *md_restored(FILE *f, const json_t *before, const json_t *after) {
  if (!before || !after) return json_null();
  bool ok = true;
  char a[32], b[32];
  fprintf(f,
          "## Settings after the run\n\n| GPU | power limit before | after | back as it was "
          "|\n|---|---|---|---|\n");
  size_t i;
  const json_t *g;
  json_array_foreach(get(before, "gpus"), i, g) {
    const json_t *g2 = json_array_get(get(after, "gpus"), i);
    const json_t *pb = get(g, "power_limit_w"), *pa = g2 ? get(g2, "power_limit_w") : NULL;
    bool same = g2 && json_equal(get(g, "uuid"), get(g2, "uuid")) &&
                ((json_is_null(pb) && json_is_null(pa)) ||
                 (json_is_number(pb) && json_is_number(pa) &&
                  fabs(json_number_value(pb) - json_number_value(pa)) < 0.0005));
    ok &= same;
    fprintf(f, "| %lld | %s W | %s W | %s |\n", (long long)json_integer_value(get(g, "index")),
            num(pb, "%.1f", 1, a, sizeof a), num(pa, "%.1f", 1, b, sizeof b),
            same ? "yes" : "**NO**");
  }
  if (json_array_size(get(before, "gpus")) != json_array_size(get(after, "gpus"))) ok = false;
  fprintf(
      f,
      "\nLocked clocks cannot be read back through NVML; every step that locks them unlocks them "
      "and says so in its row above.\n\n");
  return json_boolean(ok);
}

static void md_plo(FILE *f, const json_t *d) {
  char a[32], b[32], c[32], e[32], s1[32], s2[32];
  const json_t *bl = get(d, "baseline"), *op = get(d, "at_optimum"), *ck = get(d, "checks");
  fprintf(f, "## Power-limit optimizer on real work (plo)\n\nWork: ");
  cell(f, json_string_value(get(d, "work")));
  fprintf(f, ". Profiled limits: ");
  size_t i;
  const json_t *v;
  json_array_foreach(get(d, "power_limits_w"), i, v)
      fprintf(f, "%s%s W", i ? ", " : "", num(v, "%.0f", 1, a, sizeof a));
  fprintf(f, " (%s optimizer steps, profile windows of %s s); optimum **%s W** (a clean sweep of the same work: %s W).\n\n",
          num(get(d, "optimizer_steps"), "%.0f", 1, a, sizeof a),
          num(get(d, "profile_window_s"), "%.2f", 1, c, sizeof c),
          num(get(d, "optimal_power_limit_w"), "%.1f", 1, b, sizeof b),
          num(get(d, "sweep_optimum_w"), "%.1f", 1, e, sizeof e));
  fprintf(f,
          "| window | time | energy |\n|---|---|---|\n| baseline (limit before) | %s s | %s J |\n| "
          "at the optimum | %s s | %s J |\n\n",
          num(get(bl, "time_s"), "%.3f", 1, a, sizeof a),
          num(get(bl, "energy_j"), "%.2f", 1, b, sizeof b),
          num(get(op, "time_s"), "%.3f", 1, c, sizeof c),
          num(get(op, "energy_j"), "%.2f", 1, e, sizeof e));
  if (json_is_true(get(ck, "energy_saved_meaningful")))
    fprintf(f, "Energy saved **%s +- %s %%**", num(get(d, "energy_saved_pct"), "%.1f", 1, s1, sizeof s1),
            num(get(d, "energy_saved_uncertainty_pct"), "%.1f", 1, a, sizeof a));
  else if (!json_is_number(get(d, "energy_saved_pct")) && json_is_string(get(d, "energy_saved_note")))
    fprintf(f, "Energy saved **%s**", json_string_value(get(d, "energy_saved_note"))); /* no optimum to measure */
  else
    fprintf(f, "Energy saved **not measured** (%s +- %s %%: its uncertainty makes it meaningless)",
            num(get(d, "energy_saved_pct"), "%.1f", 1, s1, sizeof s1),
            num(get(d, "energy_saved_uncertainty_pct"), "%.1f", 1, a, sizeof a));
  fprintf(f, ", slowdown **%s +- %s** (baseline and optimum windows of %s s, counter tick %s ms, at most %s "
          "optimizer steps a run).\n\n| check | result |\n|---|---|\n",
          num(get(d, "slowdown"), "%.3f", 1, s2, sizeof s2),
          num(get(d, "slowdown_uncertainty"), "%.3f", 1, b, sizeof b), num(get(d, "window_s"), "%.1f", 1, c, sizeof c),
          num(get(d, "counter_tick_s"), "%.1f", 1000, e, sizeof e), num(get(d, "step_cap"), "%.0f", 1, a, sizeof a));
  const char *k;
  json_object_foreach((json_t *)ck, k, v) fprintf(f, "| %s | %s |\n", k, tri(v));
  fprintf(f, "\n");
}

static void md_window(FILE *f, const json_t *d) {
  char a[32], b[32], c[32], e[32], g[32];
  const json_t *ref = get(d, "reference");
  fprintf(f,
          "## Window accuracy (window-accuracy)\n\nGPU %s under the load; reference: %s W, the counter's mean "
          "power over %s s. Error of each window's energy against that power times its "
          "length, the raw counter difference beside the sampled source (docs/real-gpus.md).\n\n",
          num(get(d, "gpu"), "%.0f", 1, a, sizeof a), num(get(ref, "mean_power_w"), "%.1f", 1, b, sizeof b),
          num(get(ref, "seconds"), "%.2f", 1, c, sizeof c));
  const json_t *cn = get(d, "counter"), *pw = get(d, "power"), *ph = get(d, "phase");
  if (json_is_true(get(cn, "continuous")))
    fprintf(f, "The energy counter moves at every read (no tick). ");
  else if (json_is_object(cn))
    fprintf(f, "The energy counter ticks every %s ms (jitter +-%s ms, %s ticks). ",
            num(get(cn, "period_s"), "%.2f", 1000, a, sizeof a), num(get(cn, "jitter_s"), "%.2f", 1000, b, sizeof b),
            num(get(cn, "ticks"), "%.0f", 1, c, sizeof c));
  if (json_is_object(ph)) {
    fprintf(f, "The instant power ticks every %s ms, %s ms after a counter tick at the start, drifting %s ms per "
            "tick",
            num(get(ph, "power_period_s"), "%.2f", 1000, a, sizeof a), num(get(ph, "phase_s"), "%.1f", 1000, b, sizeof b),
            num(get(ph, "drift_s_per_tick"), "%+.3f", 1000, c, sizeof c));
    if (json_is_number(get(ph, "cycle_s")))
      fprintf(f, ": a whole phase cycle every %s s, %s cycles seen in %s s.\n\n",
              num(get(ph, "cycle_s"), "%.1f", 1, a, sizeof a), num(get(ph, "cycles_covered"), "%.1f", 1, b, sizeof b),
              num(get(d, "span_s"), "%.1f", 1, c, sizeof c));
    else
      fprintf(f, ": the phase did not move in %s s%s.\n\n", num(get(d, "span_s"), "%.1f", 1, a, sizeof a),
              json_is_true(get(ph, "power_with_counter")) ? " (power ticks with the counter)" : "");
  } else {
    fprintf(f, "No phase between the counter and the power to measure (the power %s) in %s s.\n\n",
            !json_is_object(pw) ? "showed no tick" : json_is_true(get(pw, "continuous")) ? "moves at every read" : "or the counter has no tick",
            num(get(d, "span_s"), "%.1f", 1, a, sizeof a));
  }
  fprintf(f, "| window | raw: median | raw: worst | sampled: median | sampled: worst |\n|---|---|---|---|---|\n");
  size_t i;
  const json_t *w;
  json_array_foreach(get(d, "windows"), i, w) {
    fprintf(f, "| %s ms | %s %% | %s %% | %s %% | %s %% |\n", num(get(w, "window_s"), "%.0f", 1000, a, sizeof a),
            num(get(w, "raw_median_pct"), "%.2f", 1, b, sizeof b), num(get(w, "raw_worst_pct"), "%.2f", 1, c, sizeof c),
            num(get(w, "sampled_median_pct"), "%.3f", 1, e, sizeof e),
            num(get(w, "sampled_worst_pct"), "%.3f", 1, g, sizeof g));
  }
  fprintf(f, "\n| check | result |\n|---|---|\n");
  const char *k;
  const json_t *v;
  json_object_foreach((json_t *)get(d, "checks"), k, v) fprintf(f, "| %s | %s |\n", k, tri(v));
  fprintf(f, "\n");
}

static void md_actuation(FILE *f, const json_t *d) {
  char a[32], b[32], c[32], e[32];
  fprintf(f, "## Actuation latency through the work (actuation-latency)\n\nWork: ");
  cell(f, json_string_value(get(d, "work")));
  fprintf(f, ". The effect is the first of three kernels in a row more than 10 %% off the ones before the call "
             "(the read-back's figure is the clock-latency step's).\n\n"
             "| change | way | call returns (median) | in the work after (median, min-max) |\n|---|---|---|---|\n");
  const char *k;
  const json_t *v;
  json_object_foreach((json_t *)get(d, "changes"), k, v) {
    for (int w = 0; w < 2; w++) {
      const json_t *x = get(v, w ? "up" : "down"), *we = get(x, "work_effect");
      fprintf(f, "| %s | %s | %s ms | %s ms (%s-%s) |\n", k, w ? "back" : "change",
              num(get(get(x, "call"), "median_s"), "%.1f", 1000, a, sizeof a),
              num(get(we, "median_s"), "%.1f", 1000, b, sizeof b), num(get(we, "min_s"), "%.1f", 1000, c, sizeof c),
              num(get(we, "max_s"), "%.1f", 1000, e, sizeof e));
    }
  }
  fprintf(f, "\n");
}

static void md_pfo(FILE *f, const json_t *d) {
  char a[32], b[32], c[32], e[32], s1[32], s2[32];
  const json_t *mx = get(d, "all_max_frequency"), *pl = get(d, "plan"), *ck = get(d, "checks");
  fprintf(f, "## Perseus client on real work (pfo)\n\nWork: ");
  cell(f, json_string_value(get(d, "work")));
  fprintf(f,
          "; one stage, %s microbatches, %s rounds of %s iterations, against a local `zeus "
          "pfo-server`.\n\n",
          num(get(d, "microbatches"), "%.0f", 1, a, sizeof a),
          num(get(d, "rounds"), "%.0f", 1, b, sizeof b),
          num(get(d, "iters_per_round"), "%.0f", 1, c, sizeof c));
  fprintf(f,
          "| schedule | clock | time per iteration | energy per iteration |\n|---|---|---|---|\n");
  fprintf(f, "| AllMaxFrequency | %s MHz | %s s | %s J |\n",
          num(get(mx, "highest_mhz"), "%.0f", 1, a, sizeof a),
          num(get(mx, "iter_time_s"), "%.4f", 1, b, sizeof b),
          num(get(mx, "iter_energy_j"), "%.3f", 1, c, sizeof c));
  fprintf(f, "| PointSolution plan | %s MHz | %s s | %s J |\n\n",
          num(get(d, "plan_mhz"), "%.0f", 1, a, sizeof a),
          num(get(pl, "iter_time_s"), "%.4f", 1, b, sizeof b),
          num(get(pl, "iter_energy_j"), "%.3f", 1, e, sizeof e));
  fprintf(f, "Each run's last round: %s s with %s counter ticks (AllMaxFrequency), %s s with %s (plan); the "
          "client's energy against the counter: %s %% and %s %%.\n\n",
          num(get(mx, "round_s"), "%.2f", 1, a, sizeof a), num(get(mx, "counter_ticks_in_round"), "%.0f", 1, b, sizeof b),
          num(get(pl, "round_s"), "%.2f", 1, c, sizeof c), num(get(pl, "counter_ticks_in_round"), "%.0f", 1, e, sizeof e),
          num(get(mx, "energy_vs_counter_pct"), "%+.1f", 1, s1, sizeof s1),
          num(get(pl, "energy_vs_counter_pct"), "%+.1f", 1, s2, sizeof s2));
  if (json_is_true(get(ck, "round_ticks")) && json_is_true(get(ck, "energy_saved_meaningful")) &&
      json_is_true(get(ck, "energy_measured")))
    fprintf(f, "Energy saved **%s +- %s %%** (at most %s %% at these clocks)",
            num(get(d, "energy_saved_pct"), "%.1f", 1, s1, sizeof s1),
            num(get(d, "energy_saved_uncertainty_pct"), "%.1f", 1, a, sizeof a),
            num(get(d, "energy_saved_max_pct"), "%.1f", 1, b, sizeof b));
  else
    fprintf(f, "Energy saved **not measured** (too few counter ticks in a round, no energy, or an uncertainty above "
            "5 points)");
  fprintf(f, ", slowdown **%s**.\n\n| check | result |\n|---|---|\n", num(get(d, "slowdown"), "%.3f", 1, s2, sizeof s2));
  const char *k;
  const json_t *v;
  json_object_foreach((json_t *)ck, k, v) fprintf(f, "| %s | %s |\n", k, tri(v));
  fprintf(f, "\n");
}

/* Any other step's document: its top-level numbers and strings, as a list. */
static void md_generic(FILE *f, const step *s) {
  fprintf(f, "## %s\n\n", s->name);
  const char *k;
  const json_t *v;
  json_object_foreach(s->doc, k, v) {
    if (json_is_object(v) || json_is_array(v)) {
      char *t = zeus_json_dumps(v, JSON_COMPACT);
      fprintf(f, "- %s: `", k);
      cell(f, t);
      fprintf(f, "`\n");
      zeus_free(t);
    } else {
      char *t = zeus_json_dumps(v, JSON_ENCODE_ANY | JSON_COMPACT);
      fprintf(f, "- %s: %s\n", k, t ? t : "?");
      zeus_free(t);
    }
  }
  fprintf(f, "\n");
}

static bool read_manifest(const char *path, step *st, size_t *n) {
  FILE *f = fopen(path, "r");
  if (!f) {
    cli_error(CMD, false, "cannot open the manifest '%s'", path);
    return false;
  }
  char line[2048];
  int lineno = 0;
  *n = 0;
  while (fgets(line, sizeof line, f)) {
    lineno++;
    line[strcspn(line, "\n")] = '\0';
    if (!line[0] || line[0] == '#') continue;
    char *fields[4] = {line, NULL, NULL, NULL};
    for (int k = 1; k < 4; k++) {
      char *t = fields[k - 1] ? strchr(fields[k - 1], '\t') : NULL;
      if (t) *t = '\0', fields[k] = t + 1;
    }
    if (!fields[2] || *n == MAX_STEPS ||
        (strcmp(fields[1], "passed") && strcmp(fields[1], "failed") &&
         strcmp(fields[1], "skipped"))) {
      cli_error(
          CMD, false,
          "%s line %d: expected '<step>\\t<passed|failed|skipped>\\t<json file or ->\\t<note>'%s",
          path, lineno, *n == MAX_STEPS ? " (at most 64 steps)" : "");
      fclose(f);
      return false;
    }
    step *s = &st[(*n)++];
    snprintf(s->name, sizeof s->name, "%s", fields[0]);
    snprintf(s->status, sizeof s->status, "%s", fields[1]);
    snprintf(s->note, sizeof s->note, "%s", fields[3] ? fields[3] : "");
    s->doc = NULL;
    if (strcmp(fields[2], "-") != 0) {
      json_error_t err;
      s->doc = json_load_file(fields[2], 0, &err);
      if (!s->doc) {
        /* A step that died before writing its document is a failed step, not a bad manifest. */
        snprintf(s->status, sizeof s->status, "failed");
        snprintf(s->note + strlen(s->note), sizeof s->note - strlen(s->note),
                 "%s(its JSON '%s' is unreadable: %s)", s->note[0] ? " " : "", fields[2], err.text);
      }
    }
  }
  fclose(f);
  return true;
}

int cmd_gpus_report(int argc, char **argv) {
  char **rest;
  int nrest;
  int rc = cli_parse(&report_cmd, argc, argv, &rest, &nrest);
  if (rc != CLI_CONTINUE) return rc;
  step *st = calloc(MAX_STEPS, sizeof *st);
  size_t n = 0;
  if (!st) return CLI_EXIT_FAIL;
  if (!read_manifest(rest[0], st, &n)) {
    free(st);
    return CLI_EXIT_USAGE;
  }
  cli_report rep = {0};
  FILE *f = stdout;
  if (md_path) {
    if (!cli_report_open(CMD, &rep, md_path)) {
      for (size_t k = 0; k < n; k++) json_decref(st[k].doc);
      free(st);
      return CLI_EXIT_FAIL;
    }
    f = rep.f;
  }
  char date[64];
  time_t now = time(NULL);
  struct tm tm;
  strftime(date, sizeof date, "%Y-%m-%dT%H:%M:%SZ", gmtime_r(&now, &tm));
  long passed = 0, failed = 0, skipped = 0;
  for (size_t k = 0; k < n; k++) {
    if (strcmp(st[k].status, "passed") == 0)
      passed++;
    else if (strcmp(st[k].status, "failed") == 0)
      failed++;
    else
      skipped++;
  }
  fprintf(f, "# %s\n\n%s, zeus %s.\n\n", title, date, zeus_version());
  /* Sections first into memory? No: the summary needs the restore verdict, computed below, so
   * the summary comes last in the JSON but first in Markdown, from the steps' own statuses. */
  fprintf(f, "## Summary\n\n| step | result | note |\n|---|---|---|\n");
  for (size_t k = 0; k < n; k++) {
    fprintf(f, "| %s | %s | ", st[k].name,
            strcmp(st[k].status, "failed") == 0 ? "**FAILED**" : st[k].status);
    cell(f, st[k].note);
    fprintf(f, " |\n");
  }
  fprintf(f, "\n");
  step *before = find_step(st, n, "gpus-before"), *after = find_step(st, n, "gpus-after");
  json_t *restored = md_restored(f, before ? before->doc : NULL, after ? after->doc : NULL);
  bool set_header = false;
  for (size_t k = 0; k < n; k++) {
    step *s = &st[k];
    if (!s->doc || s == before || s == after) continue;
    if (strcmp(s->name, "probe") == 0)
      md_probe(f, s->doc);
    else if (strcmp(s->name, "check") == 0)
      md_check(f, s->doc);
    else if (strcmp(s->name, "clock-latency") == 0)
      md_latency(f, s->doc);
    else if (strcmp(s->name, "plo") == 0)
      md_plo(f, s->doc);
    else if (strcmp(s->name, "pfo") == 0)
      md_pfo(f, s->doc);
    else if (strcmp(s->name, "window-accuracy") == 0)
      md_window(f, s->doc);
    else if (strcmp(s->name, "actuation-latency") == 0)
      md_actuation(f, s->doc);
    else if (strncmp(s->name, "set-", 4) == 0) {
      if (!set_header)
        fprintf(f,
                "## Settings changed, read back and restored (gpus set)\n\n"
                "| step | GPU | setting | requested | read back (min-max) | ok | power limit, "
                "restored | error |\n"
                "|---|---|---|---|---|---|---|---|\n");
      set_header = true;
      md_set_rows(f, s->name, s->doc);
      if (k + 1 >= n || strncmp(st[k + 1].name, "set-", 4) != 0)
        fprintf(f, "\n"), set_header = false;
    } else
      md_generic(f, s);
  }
  bool ok = failed == 0 && !json_is_false(restored);
  fprintf(f, "## Verdict\n\n%ld passed, %ld failed, %ld skipped%s: **%s**\n", passed, failed,
          skipped, json_is_false(restored) ? "; settings NOT back as they were" : "",
          !ok           ? "FAILED"
          : passed == 0 ? "NOTHING CHECKED"
                        : "PASSED");
  int status = ok ? CLI_EXIT_OK : CLI_EXIT_FAIL;
  if (md_path && !cli_report_commit(CMD, &rep, md_path)) status = CLI_EXIT_FAIL;
  if (json_path) {
    json_t *steps = json_array();
    for (size_t k = 0; k < n; k++)
      json_array_append_new(
          steps, json_pack("{s:s,s:s,s:s,s:O?}", "step", st[k].name, "status", st[k].status, "note",
                           st[k].note, "result", st[k].doc));
    json_t *doc = json_pack("{s:s,s:s,s:s,s:o,s:O,s:I,s:I,s:I,s:b}", "title", title, "date", date,
                            "zeus_version", zeus_version(), "steps", steps, "restored", restored,
                            "passed", (json_int_t)passed, "failed", (json_int_t)failed, "skipped",
                            (json_int_t)skipped, "ok", ok);
    cli_report jr = {0};
    if (!doc || !cli_report_open(CMD, &jr, json_path) || !cli_write_json(jr.f, doc) ||
        !cli_report_commit(CMD, &jr, json_path)) {
      cli_report_discard(&jr);
      status = CLI_EXIT_FAIL;
    }
    json_decref(doc);
  }
  json_decref(restored);
  for (size_t k = 0; k < n; k++) json_decref(st[k].doc);
  free(st);
  return status;
}
