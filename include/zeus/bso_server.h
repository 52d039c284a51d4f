/* zeus/bso_server.h: the batch-size optimizer server (`zeus bso-server`).
 *
 * The original's batch-size optimizer server for recurring jobs trained on many nodes: training
 * scripts (the original's client, or zeusc.optimizer.batch_size.client.BatchSizeOptimizer) ask it
 * for a batch size, report each epoch's time, energy and metric, and learn when to stop. Routes,
 * JSON bodies and status codes are the original's: POST /jobs, DELETE /jobs?job_id=, GET
 * /jobs/batch_size?job_id=, POST /report, PATCH /trials (docs/bso-server.md). Pruning exploration
 * and Gaussian Thompson sampling are src/bso/'s (zeus/bso.h). State lives in one database,
 * SQLite (a file) or PostgreSQL (any libpq URI, an optional component), every request one
 * transaction, so several servers may share one database.
 *
 * Part of the optional component ZEUS_WITH_BSO_SERVER (libmicrohttpd, sqlite3). Thread-safe.
 */
#ifndef ZEUS_BSO_SERVER_H
#define ZEUS_BSO_SERVER_H

#include "zeus/common.h"

ZEUS_BEGIN_DECLS

/* Zero (or NULL) means the default. */
typedef struct zeus_bso_server_opts {
  const char *host;     /* default "127.0.0.1"; another address without a token: a warning */
  int port;             /* default 7788; -1: any free port (zeus_bso_server_port) */
  const char *database; /* "sqlite:///PATH" (default sqlite:///zeus-bso.db) or "postgresql://..." */
  const char *token;    /* bearer token required on every request; NULL: none; "" refused */
  const char *token_file; /* the same, from the first line of this file */
  int threads;            /* HTTP threads, each with its database connection (default 8) */
  int max_connections;    /* default 1024 */
  size_t max_body_bytes;  /* default 65536; larger bodies get 413 */
  double idle_timeout_s;  /* default 60 */
  /* Connections one client holds at once (a client: the uid of a loopback connection, any address
   * of 127.0.0.0/8, else the address): default 64; more are answered 503 before any header is
   * read, and the last max_connections / 16 slots are kept for clients that hold none. */
  int max_connections_per_client;
  /* A whole request (headers and body) must arrive within this of the connection's opening or its
   * previous reply, or the connection is closed (a trickling client keeps no slot): default 10. */
  double request_timeout_s;
} zeus_bso_server_opts;

typedef struct zeus_bso_server zeus_bso_server;

/* Opens the database (creating or migrating its schema) and starts serving. ZEUS_EINVAL for a bad
 * option, ZEUS_EIO naming the database when it cannot be opened, ZEUS_ENET when the address
 * cannot be bound. */
ZEUS_EXTERN int zeus_bso_server_open(zeus_bso_server **out /* out */,
                                     const zeus_bso_server_opts *opts);
/* The port served (the one picked for port -1). */
ZEUS_EXTERN int zeus_bso_server_port(const zeus_bso_server *s);
/* Stops serving and closes the database connections. */
ZEUS_EXTERN void zeus_bso_server_close(zeus_bso_server *s);

ZEUS_END_DECLS
#endif
