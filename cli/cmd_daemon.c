/* zeus daemon serve: the privileged daemon (zeusd's HTTP API, with leases);
 * zeus daemon token issue: HS256 tokens for it. */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli.h"

static const char *const MODES[] = {"uds", "tcp", "both", NULL};

static struct {
  int mode;
  const char *socket_path, *socket_perm, *tcp_addr, *enable, *key_path, *state_path, *overrides;
  long socket_uid, socket_gid, num_workers, max_conn, conn_timeout, max_ttl, anon_ttl;
  long max_leases, leases_per_client, reserved_leases, conn_per_client, reserved_conn, streams_per_client,
      request_timeout;
  double gpu_hz, cpu_hz;
  bool allow_unauth_tcp, no_state, uid_given, gid_given;
  const char *log_level;
} sv = {.socket_path = "/run/zeusd/zeusd.sock", .socket_perm = "666", .tcp_addr = "127.0.0.1:4938",
        .state_path = "/run/zeusd/state.json", .max_conn = 256, .conn_timeout = 30, .max_ttl = 3600,
        .gpu_hz = 20, .cpu_hz = 10, .max_leases = 1024, .leases_per_client = 64, .reserved_leases = 64,
        .conn_per_client = 32, .reserved_conn = 16, .streams_per_client = 8, .request_timeout = 10};

static const cli_opt serve_opts[] = {
    {"mode", 0, CLI_OPT_CHOICE, &sv.mode, NULL, "where to listen: the Unix socket, TCP, or both",
     "uds", .choices = MODES},
    {"socket-path", 0, CLI_OPT_STRING, &sv.socket_path, "PATH",
     "[uds] the socket to create (its folder too)", "/run/zeusd/zeusd.sock"},
    {"socket-permissions", 0, CLI_OPT_STRING, &sv.socket_perm, "OCTAL",
     "[uds] mode of the socket file", "666"},
    {"socket-uid", 0, CLI_OPT_LONG, &sv.socket_uid, "UID", "[uds] owner of the socket file",
     "unchanged", 0, 4294967294.0, .seen = &sv.uid_given},
    {"socket-gid", 0, CLI_OPT_LONG, &sv.socket_gid, "GID", "[uds] group of the socket file",
     "unchanged", 0, 4294967294.0, .seen = &sv.gid_given},
    {"tcp-bind-address", 0, CLI_OPT_STRING, &sv.tcp_addr, "HOST:PORT",
     "[tcp] address (port 0: a free one, printed)", "127.0.0.1:4938"},
    {"allow-unauthenticated-tcp", 0, CLI_OPT_FLAG, &sv.allow_unauth_tcp, NULL,
     "[tcp] serve a non-loopback address without --signing-key-path"},
    {"enable", 0, CLI_OPT_STRING, &sv.enable, "LIST",
     "API groups: gpu-control, gpu-read, cpu-read (comma-separated)", "all three"},
    {"signing-key-path", 0, CLI_OPT_STRING, &sv.key_path, "FILE",
     "require JWT bearer tokens signed (HS256) with this key file's bytes", "no authentication"},
    {"gpu-command-overrides", 0, CLI_OPT_STRING, &sv.overrides, "FILE",
     "[gpu-control] run these commands (zeusd's TOML file) instead of\nNVML for the GPU writes it names; then no root is needed",
     "none"},
    {"state-file", 0, CLI_OPT_STRING, &sv.state_path, "FILE",
     "where replaced values are recorded, to give them back after a crash",
     "/run/zeusd/state.json"},
    {"no-state-file", 0, CLI_OPT_FLAG, &sv.no_state, NULL,
     "keep no state file (a crash then loses replaced values)"},
    {"gpu-power-poll-hz", 0, CLI_OPT_DOUBLE, &sv.gpu_hz, "HZ",
     "GPU power readings per second of /gpu/stream_power (an event when one changed)", "20", 0.1, 1000},
    {"cpu-power-poll-hz", 0, CLI_OPT_DOUBLE, &sv.cpu_hz, "HZ",
     "CPU power readings per second (/cpu/get_power, /cpu/stream_power)", "10", 0.1, 1000},
    {"max-connections", 0, CLI_OPT_LONG, &sv.max_conn, "N",
     "connections served at once (one thread each)", "256", 1, 100000},
    {"connection-timeout", 0, CLI_OPT_LONG, &sv.conn_timeout, "S",
     "close connections idle this long", "30", 1, 86400},
    {"max-lease-ttl", 0, CLI_OPT_LONG, &sv.max_ttl, "S", "longest lease a client may ask for",
     "3600", 1, 86400 * 30},
    {"max-connections-per-client", 0, CLI_OPT_LONG, &sv.conn_per_client, "N",
     "connections one client (a uid; over TCP an address) may hold;\nroot is not limited", "32", 1, 100000},
    {"reserved-connections", 0, CLI_OPT_LONG, &sv.reserved_conn, "N",
     "[uds] of --max-connections, kept for root", "16", 1, 100000},
    {"max-streams-per-client", 0, CLI_OPT_LONG, &sv.streams_per_client, "N",
     "power streams one client may hold at once", "8", 1, 100000},
    {"request-timeout", 0, CLI_OPT_LONG, &sv.request_timeout, "S",
     "a whole request (headers and body) must arrive within S s of\nthe connection opening or of its last reply",
     "10", 1, 3600},
    {"max-leases", 0, CLI_OPT_LONG, &sv.max_leases, "N", "leases (holders of changed settings) at once", "1024", 2,
     1000000},
    {"max-leases-per-client", 0, CLI_OPT_LONG, &sv.leases_per_client, "N",
     "leases one client (a uid, a token's subject, an address) may hold", "64", 1, 1000000},
    {"reserved-leases", 0, CLI_OPT_LONG, &sv.reserved_leases, "N", "of --max-leases, kept for root", "64", 1,
     1000000},
    {"tcp-anonymous-ttl", 0, CLI_OPT_LONG, &sv.anon_ttl, "S",
     "[tcp] changes made without a lease (original zeusd clients):\n"
     "0 keeps them until the daemon stops; S gives them back S seconds\n"
     "after the last request from that address",
     "0", 0, 86400 * 30},
    {"num-workers", 0, CLI_OPT_LONG, &sv.num_workers, "N",
     "accepted for zeusd compatibility; ignored (one thread per\n"
     "connection, see --max-connections)",
     NULL, 0, 100000},
    {"log-level", 0, CLI_OPT_STRING, &sv.log_level, "LEVEL", "error | warn | info | debug",
     "info (or ZEUS_LOG_LEVEL)"},
    {0},
};

static const cli_command serve_cmd = {
    .name = "daemon serve",
    .usage = "zeus daemon serve [--mode uds|tcp|both] [--socket-path PATH] [--enable LIST]\n"
             "                  [--signing-key-path FILE] [--state-file FILE] [options]",
    .about =
        "Runs the privileged daemon: it holds the privilege that GPU power limits, locked clocks\n"
        "and persistence mode (and CPU RAPL counters) need, and unprivileged processes ask it\n"
        "over HTTP. It speaks the original zeusd API (GET /discover, /time, /auth/whoami;\n"
        "/gpu/set_power_limit, /gpu/set_persistence_mode,\n"
        "/gpu/{set,reset}_{gpu,mem}_locked_clocks, /gpu/reset_locked_clocks,\n"
        "/gpu/get_{cumulative_energy,power,power_limit,power_limit_constraints,persistence_mode},\n"
        "/gpu/stream_power; /cpu/get_cumulative_energy, /cpu/get_power, /cpu/stream_power), so\n"
        "the original Python package and libzeus (ZEUSD_SOCK_PATH / ZEUSD_HOST_PORT) use it\n"
        "alike. The power streams follow zeusd's per-device format (ml-energy/zeus master,\n"
        "c001bd84, 2026-06-09): one server-sent event per device whose reading changed,\n"
        "data: {\"timestamp_ms\",\"gpu_id\",\"power_mw\"} or {\"timestamp_ms\",\"cpu_id\",\"cpu_mw\",\n"
        "\"dram_mw\"}, chosen with ?gpu_ids= / ?cpu_ids= (comma-separated; absent: all).\n"
        "\n"
        "Unlike zeusd it gives changes back: every setting a client changes is recorded with the\n"
        "value it replaced; when the client process exits (Unix socket; SIGKILL included) or its\n"
        "lease lapses (TCP), the value is put back within a second. A setting another live client\n"
        "holds gets 409 naming the holder, unless the request says override=true. GET /leases\n"
        "lists who holds what. SIGTERM or SIGINT puts back everything and stops. A daemon killed\n"
        "outright replays --state-file at its next start (see docs/daemon.md).\n"
        "\n"
        "gpu-control needs root or CAP_SYS_ADMIN and cpu-read root or CAP_DAC_READ_SEARCH: the\n"
        "daemon refuses to start a group it cannot serve, saying which. Where root is never\n"
        "granted, --gpu-command-overrides FILE (zeusd's format) sends the GPU writes it names to\n"
        "external commands (a sudoers entry for nvidia-smi, say), run without a shell, each with\n"
        "a timeout; gives-back go through them too (docs/daemon.md, \"Command overrides\").",
    .opts = serve_opts,
    .more =
        "Examples:\n"
        "  sudo zeus daemon serve                      # /run/zeusd/zeusd.sock, mode 666\n"
        "  sudo zeus daemon serve --socket-permissions 660 \\\n"
        "       --socket-gid $(getent group gpu | cut -d: -f3)\n"
        "  sudo zeus daemon serve --mode tcp --tcp-bind-address 127.0.0.1:4938 \\\n"
        "       --signing-key-path /etc/zeusd/signing.key\n"
        "  ZEUSD_SOCK_PATH=/run/zeusd/zeusd.sock python train.py   # the optimizers use it\n"
        "  zeus daemon serve --enable gpu-read,gpu-control \\\n"
        "       --gpu-command-overrides /etc/zeusd/overrides.toml   # without root\n\n"
        "Environment: ZEUS_GPU_BACKEND, ZEUS_NVML_LIBRARY, ZEUS_SIM_*, ZEUS_RAPL_ROOT (which\n"
        "devices), ZEUS_LOG_LEVEL. The daemon itself never uses ZEUSD_SOCK_PATH or\n"
        "ZEUSD_HOST_PORT.\n",
    .args = CLI_ARGS_NONE,
};

static struct {
  const char *key_path, *user, *scope, *expires;
} tk;

static const cli_opt token_opts[] = {
    {"signing-key-path", 0, CLI_OPT_STRING, &tk.key_path, "FILE", "the daemon's signing key file",
     .required = true},
    {"user", 0, CLI_OPT_STRING, &tk.user, "NAME", "who the token is for (the 'sub' claim)",
     .required = true},
    {"scope", 0, CLI_OPT_STRING, &tk.scope, "LIST",
     "API groups it grants: gpu-control, gpu-read, cpu-read, cpu-control", .required = true},
    {"expires", 0, CLI_OPT_STRING, &tk.expires, "DURATION",
     "lifetime: 30s, 15m, 1h, 7d, 30d, or never", .required = true},
    {0},
};

static const cli_command token_cmd = {
    .name = "daemon token issue",
    .usage = "zeus daemon token issue --signing-key-path FILE --user NAME --scope LIST\n"
             "                        --expires DURATION",
    .about =
        "Prints a JWT (HS256) for the daemon's --signing-key-path: claims sub (the user),\n"
        "scopes (the API groups it grants) and exp (absent for --expires never), as zeusd\n"
        "token issue makes them.\n"
        "Hand it to a client in ZEUSD_TOKEN.",
    .opts = token_opts,
    .more =
        "Example:\n"
        "  openssl rand -base64 32 | sudo tee /etc/zeusd/signing.key >/dev/null\n"
        "  sudo chmod 600 /etc/zeusd/signing.key\n"
        "  sudo zeus daemon token issue --signing-key-path /etc/zeusd/signing.key --user alice \\\n"
        "       --scope gpu-read,gpu-control --expires 7d\n",
    .args = CLI_ARGS_NONE,
};

/* "never", "0", or a number with s, m, h or d. */
static bool parse_expires(const char *text, long long *exp) {
  if (strcmp(text, "never") == 0 || strcmp(text, "0") == 0) { *exp = 0; return true; }
  char *end;
  errno = 0;
  long long v = strtoll(text, &end, 10);
  long long mult = 0;
  if (end != text && v > 0 && !errno) {
    if (!strcmp(end, "s") || !*end) mult = 1;
    else if (!strcmp(end, "m")) mult = 60;
    else if (!strcmp(end, "h")) mult = 3600;
    else if (!strcmp(end, "d")) mult = 86400;
  }
  if (!mult || v > 100LL * 365 * 86400 / mult) {
    cli_error("daemon token issue", false,
              "--expires: expected a duration such as 30s, 15m, 1h, 7d or never, got '%s'", text);
    return false;
  }
  *exp = (long long)time(NULL) + v * mult;
  return true;
}

static int token_issue(int argc, char **argv) {
  int rc = cli_parse(&token_cmd, argc, argv, NULL, NULL);
  if (rc != CLI_CONTINUE) return rc;
  unsigned scopes;
  if (zeus_daemon_parse_groups(tk.scope, &scopes)) {
    cli_error(token_cmd.name, false, "--scope: %s", zeus_errmsg());
    return CLI_EXIT_USAGE;
  }
  long long exp;
  if (!parse_expires(tk.expires, &exp)) return CLI_EXIT_USAGE;
  char *token;
  if (zeus_daemon_token_issue(tk.key_path, tk.user, scopes, exp, &token)) {
    cli_error(token_cmd.name, true, "no token");
    return CLI_EXIT_FAIL;
  }
  printf("%s\n", token);
  zeus_free(token);
  return CLI_EXIT_OK;
}

static int serve(int argc, char **argv) {
  int rc = cli_parse(&serve_cmd, argc, argv, NULL, NULL);
  if (rc != CLI_CONTINUE) return rc;
  const char *cmd = serve_cmd.name;
  int level = ZEUS_LOG_INFO;
  const char *lv = sv.log_level ? sv.log_level : getenv("ZEUS_LOG_LEVEL");
  if (lv && zeus_log_level_parse(lv, &level)) {
    cli_error(cmd, true, "--log-level");
    return CLI_EXIT_USAGE;
  }
  zeus_set_log_level(level);
  zeus_daemon_opts o;
  zeus_daemon_opts_init(&o);
  char *end;
  unsigned long perm = strtoul(sv.socket_perm, &end, 8);
  if (!*sv.socket_perm || *end || perm > 0777) {
    cli_error(cmd, false,
              "--socket-permissions: expected an octal mode such as 666 or 660, got '%s'",
              sv.socket_perm);
    return CLI_EXIT_USAGE;
  }
  if (sv.enable && zeus_daemon_parse_groups(sv.enable, &o.groups)) {
    cli_error(cmd, false, "--enable: %s", zeus_errmsg());
    return CLI_EXIT_USAGE;
  }
  if (o.groups & ZEUS_DAEMON_CPU_CONTROL) {
    cli_error(cmd, false,
              "--enable: cpu-control is a token scope; this daemon has no CPU control routes");
    return CLI_EXIT_USAGE;
  }
  if (sv.num_workers)
    fprintf(stderr, "zeus %s: --num-workers is ignored: each connection has its own thread\n", cmd);
  o.socket_path = sv.mode != 1 ? sv.socket_path : NULL;
  o.socket_mode = (unsigned)perm;
  o.socket_uid = sv.uid_given ? sv.socket_uid : -1;
  o.socket_gid = sv.gid_given ? sv.socket_gid : -1;
  o.tcp_address = sv.mode != 0 ? sv.tcp_addr : NULL;
  o.allow_unauthenticated_tcp = sv.allow_unauth_tcp;
  o.signing_key_path = sv.key_path;
  o.gpu_command_overrides = sv.overrides;
  o.state_path = sv.no_state ? NULL : sv.state_path;
  o.max_connections = (unsigned)sv.max_conn;
  o.connection_timeout_s = (unsigned)sv.conn_timeout;
  o.gpu_poll_hz = sv.gpu_hz;
  o.cpu_poll_hz = sv.cpu_hz;
  o.max_lease_ttl_s = (unsigned)sv.max_ttl;
  o.tcp_anonymous_ttl_s = (unsigned)sv.anon_ttl;
  o.max_leases = (unsigned)sv.max_leases;
  o.max_leases_per_client = (unsigned)sv.leases_per_client;
  o.reserved_leases = (unsigned)sv.reserved_leases;
  o.max_connections_per_client = (unsigned)sv.conn_per_client;
  o.reserved_connections = (unsigned)sv.reserved_conn;
  o.max_streams_per_client = (unsigned)sv.streams_per_client;
  o.request_timeout_s = (unsigned)sv.request_timeout;
  if (sv.reserved_leases >= sv.max_leases || sv.reserved_conn >= sv.max_conn) {
    cli_error(cmd, false, "--reserved-leases and --reserved-connections must be fewer than --max-leases and "
              "--max-connections");
    return CLI_EXIT_USAGE;
  }
  /* Every thread the daemon starts inherits this mask; sigwait below takes the signals. */
  sigset_t set, old;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGHUP);
  pthread_sigmask(SIG_BLOCK, &set, &old);
  signal(SIGPIPE, SIG_IGN);
  zeus_daemon *d;
  if (zeus_daemon_open(&d, &o)) {
    cli_error(cmd, true, "cannot start");
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    return CLI_EXIT_FAIL;
  }
  if (o.tcp_address) fprintf(stderr, "zeus %s: TCP port %d\n", cmd, zeus_daemon_tcp_port(d));
  fprintf(stderr, "zeus %s: ready\n", cmd);
  fflush(stderr);
  int sig = 0;
  while (sigwait(&set, &sig) == 0 && sig == SIGHUP) { /* nothing to reload: keep serving */ }
  fprintf(stderr, "zeus %s: %s: giving every change back and stopping\n", cmd,
          sig == SIGINT ? "SIGINT" : "SIGTERM");
  zeus_daemon_close(d);
  pthread_sigmask(SIG_SETMASK, &old, NULL);
  return CLI_EXIT_OK;
}

int cmd_daemon(int argc, char **argv) {
  if (argc > 1 && strcmp(argv[1], "serve") == 0) return serve(argc - 1, argv + 1);
  if (argc > 2 && strcmp(argv[1], "token") == 0 && strcmp(argv[2], "issue") == 0)
    return token_issue(argc - 2, argv + 2);
  FILE *out = cli_wants_help(argc, argv) ? stdout : stderr;
  fprintf(
      out,
      "usage: zeus daemon serve [options]          the privileged daemon (zeusd's API, leases)\n"
      "       zeus daemon token issue [options]    print a JWT for its --signing-key-path\n\n"
      "Run 'zeus daemon serve --help' or 'zeus daemon token issue --help' for their\n"
      "options.\n");
  return out == stdout ? CLI_EXIT_OK : CLI_EXIT_USAGE;
}
