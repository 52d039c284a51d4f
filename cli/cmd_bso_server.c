/* zeus bso-server: the batch-size optimizer server for recurring jobs on many nodes. */
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "zeus/bso_server.h"

static zeus_bso_server_opts o;
static int port_opt;
static long max_body;
static const char *log_level;
static bool port_given, max_body_given, lease_given, db_timeout_given;

static const cli_opt server_opts[] = {
    {"host", 0, CLI_OPT_STRING, &o.host, "ADDR", "address to listen on", "127.0.0.1"},
    {"port", 0, CLI_OPT_INT, &port_opt, "N", "port; 0 picks a free one and prints it", "7788", 0,
     65535, .seen = &port_given},
    {"database", 0, CLI_OPT_STRING, &o.database, "URL",
     "where jobs and trials live: sqlite:///ABSOLUTE/PATH or sqlite://RELATIVE/PATH (one file,\n"
     "for one machine), or postgresql://USER@HOST:PORT/DB (any libpq connection URI, e.g.\n"
     "postgresql:///zeus?host=/run/postgresql for a Unix socket) shared by servers on many\n"
     "nodes. The schema is created or migrated at start",
     "sqlite://zeus-bso.db"},
    {"log-level", 0, CLI_OPT_STRING, &log_level, "LEVEL", "error | warn | info | debug", "info"},
    {"token-file", 0, CLI_OPT_STRING, &o.token_file, "FILE",
     "require 'Authorization: Bearer TOKEN' (401 otherwise), TOKEN being the first line of FILE",
     .heading = "Access:"},
    {"token", 0, CLI_OPT_STRING, &o.token, "TOKEN",
     "the same with the token on the command line (every local user can read it in the\n"
     "process list: prefer --token-file)"},
    {"threads", 0, CLI_OPT_INT, &o.threads, "N",
     "HTTP threads (with PostgreSQL, one database connection each)", "8", 1, 256,
     .heading = "Bounds:"},
    {"max-connections", 0, CLI_OPT_INT, &o.max_connections, "N", "connections at once", "1024", 16,
     1000000},
    {"max-body", 0, CLI_OPT_LONG, &max_body, "BYTES", "largest request body (larger: 413)", "65536",
     1024, 16777216, .seen = &max_body_given},
    {"idle-timeout", 0, CLI_OPT_DOUBLE, &o.idle_timeout_s, "S", "close a connection idle this long",
     "60", 1, 86400},
    {"trial-lease", 0, CLI_OPT_DOUBLE, &o.trial_lease_s, "S",
     "a trial handed out and then neither reported nor ended (PATCH /trials) for S seconds,\n"
     "counted from its start or its latest report, ends as failed, so that pruning moves on\n"
     "(its client was preempted or killed); 0: never, as the original's server",
     "86400", 0, 1e9, .seen = &lease_given},
    {"db-timeout", 0, CLI_OPT_DOUBLE, &o.db_timeout_s, "S",
     "PostgreSQL: a connection attempt or a statement that gets no answer for S seconds (the\n"
     "database stopped, the network cut) gives up that connection and the request gets 503;\n"
     "connecting waits 2 s at least (libpq); also turns TCP keepalives on; 0: no bound",
     "4", 0, 86400, .seen = &db_timeout_given},
    {"max-connections-per-client", 0, CLI_OPT_INT, &o.max_connections_per_client, "N",
     "connections one client holds at once, counted before any header is read (a client: the uid\n"
     "of a loopback connection, any address of 127.0.0.0/8, else the address); more get 503, and\n"
     "the last 1/16 of --max-connections is kept for clients that hold none",
     "64", 1, 1000000},
    {"request-timeout", 0, CLI_OPT_DOUBLE, &o.request_timeout_s, "S",
     "a whole request (headers and body) must arrive within S seconds of the connection's opening\n"
     "or its previous reply, or the connection is closed: a client that trickles its headers in\n"
     "keeps no slot", "10", 0.1, 3600},
    {0},
};

static const cli_command server_cmd = {
    .name = "bso-server",
    .usage =
        "zeus bso-server [--host ADDR] [--port N] [--database URL] [--log-level LEVEL]\n"
        "                [--token-file FILE | --token TOKEN] [--threads N]\n"
        "                [--max-connections N] [--max-body BYTES] [--idle-timeout S]\n"
        "                [--trial-lease S] [--db-timeout S] [--max-connections-per-client N]\n"
        "                [--request-timeout S]",
    .about =
        "Serves the batch-size optimizer to recurring training jobs that run on whichever node a\n"
        "cluster scheduler gives them, with the original Zeus server's routes and JSON bodies:\n"
        "POST /jobs (register; 201 new, 200 the same again, 409 different), GET\n"
        "/jobs/batch_size?job_id= (a trial: the batch size to train with), POST /report (each\n"
        "epoch's time, energy and metric: keep training or stop), PATCH /trials (the trial\n"
        "ended), DELETE /jobs?job_id=; and GET /metrics (connections open, refused and cut at\n"
        "--request-timeout, in the Prometheus text format). Clients: the original's BatchSizeOptimizer, or zeusc's\n"
        "(zeusc.optimizer.batch_size.client, standard library only). Pruning exploration and\n"
        "Gaussian Thompson sampling are those of 'zeus run' (src/bso). Every request is one\n"
        "transaction, so several servers may share one PostgreSQL database; when the database\n"
        "goes away requests get 503 and the server reconnects on the next one.\n"
        "When to use which: 'zeus run' alone drives a recurring job on one machine from its own\n"
        "state file; this server shares one job between nodes. docs/bso-server.md.",
    .opts = server_opts,
    .more =
        "Examples:\n"
        "  zeus bso-server --database sqlite:///var/lib/zeus/bso.db\n"
        "  zeus bso-server --host 10.0.0.5 --token-file ~/.config/zeus-bso-token \\\n"
        "      --database 'postgresql://zeus@db.example/zeus'\n"
        "  zeus bso-server --port 0 --database 'postgresql:///zeus?host=/tmp/pg'\n",
    .args = CLI_ARGS_NONE,
};

int cmd_bso_server(int argc, char **argv) {
  const char *cmd = "bso-server";
  o = (zeus_bso_server_opts){0};
  log_level = "info";
  port_opt = 7788;
  int rc = cli_parse(&server_cmd, argc, argv, NULL, NULL);
  if (rc != CLI_CONTINUE) return rc;
  o.port = port_given && port_opt == 0 ? -1 : port_opt;
  if (max_body_given) o.max_body_bytes = (size_t)max_body;
  if (lease_given && o.trial_lease_s == 0) o.trial_lease_s = -1; /* 0 on the command line: never */
  if (db_timeout_given && o.db_timeout_s == 0) o.db_timeout_s = -1; /* 0: no bound */
  if (o.token && o.token_file) {
    cli_error(cmd, false, "give --token or --token-file, not both");
    return CLI_EXIT_USAGE;
  }
  char *token_copy = NULL;
  if (o.token) {
    if (!*o.token) {
      cli_error(cmd, false, "--token: an empty token would turn authentication off");
      return CLI_EXIT_USAGE;
    }
    if (!(token_copy = strdup(o.token))) return CLI_EXIT_FAIL;
    memset((char *)o.token, 'x', strlen(o.token));
    o.token = token_copy;
  }
  int lvl;
  if (zeus_log_level_parse(log_level, &lvl)) {
    cli_error(cmd, true, "--log-level");
    free(token_copy);
    return CLI_EXIT_USAGE;
  }
  zeus_set_log_callback(zeus_log_stderr_sink, NULL);
  zeus_set_log_level(lvl);
  cli_serve_block_signals();
  zeus_bso_server *srv;
  if (zeus_bso_server_open(&srv, &o)) {
    cli_error(cmd, true, "cannot start");
    free(token_copy);
    return CLI_EXIT_FAIL;
  }
  printf("zeus bso-server: listening on %s port %d\n", o.host ? o.host : "127.0.0.1",
         zeus_bso_server_port(srv));
  fflush(stdout);
  cli_serve_wait();
  fprintf(stderr, "zeus bso-server: shutting down\n");
  zeus_bso_server_close(srv);
  free(token_copy);
  return CLI_EXIT_OK;
}
