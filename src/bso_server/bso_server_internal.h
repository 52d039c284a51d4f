/* src/bso_server/bso_server_internal.h: the server's routes over the store (not API). */
#ifndef ZEUS_BSO_SERVER_INTERNAL_H
#define ZEUS_BSO_SERVER_INTERNAL_H

#include <jansson.h>
#include <pthread.h>
#include <stdbool.h>

#include "store/store.h"

/* What a route answers: an HTTP status and a JSON body (owned). */
typedef struct bso_reply {
  int status;
  json_t *body;
} bso_reply;

/* A parsed request: the route's input, checked before any transaction. */
typedef struct bso_req {
  int route;          /* BSO_R_* */
  json_t *body;       /* the parsed body (owned), for register/report/end */
  const char *job_id; /* query parameter (delete, predict) */
  double trial_lease_s; /* a dispatched trial without a report or end for this long fails; <= 0: never */
} bso_req;

enum { BSO_R_REGISTER = 1, BSO_R_DELETE, BSO_R_PREDICT, BSO_R_REPORT, BSO_R_END };

/* Checks the request's body before the transaction: STORE_OK, or a 422 reply naming the field
 * (the original's FastAPI validation errors: {"detail": [{"loc": ["body", FIELD], "msg", "type"}]}).
 * May rewrite req->body into its normal form. */
int bso_validate(bso_req *req, bso_reply *reply);
/* Runs the route inside the transaction the caller began. Returns a STORE_* code; with
 * STORE_OK the reply is set (status >= 400: the caller rolls back). err gets the store's
 * message otherwise. */
int bso_route(zeus__store *db, const char *lock_suffix, bso_req *req, bso_reply *reply, char *err, size_t errlen);

json_t *bso_message(const char *fmt, ...);

/* uri_check.c: 1 with msg set (what is wrong, naming the query parameter) when the request target
 * uri (raw, with its query) is not UTF-8 or holds a NUL byte once its percent escapes are
 * decoded; 0 when it is sound. */
int bso_uri_problem(const char *uri, char *msg, size_t msglen);

/* At most one log line per client (an address) a period, over a fixed table of clients: when
 * every slot logged within the period, a new client is not logged either (counted in dropped). */
#define BSO_RATELOG_CLIENTS 256
#define BSO_RATELOG_PERIOD_S 60.0
typedef struct bso_ratelog {
  pthread_mutex_t mu;
  struct {
    bool used;
    char client[64];
    double last_s;
    unsigned long suppressed; /* refusals not logged since its last line */
  } e[BSO_RATELOG_CLIENTS];
  unsigned long dropped;
} bso_ratelog;
void bso_ratelog_init(bso_ratelog *rl);
void bso_ratelog_destroy(bso_ratelog *rl);
/* Whether client may log now (monotonic seconds); *suppressed: its refusals not logged since its
 * last line. Thread safe. */
bool bso_ratelog_allow(bso_ratelog *rl, const char *client, double now_s, unsigned long *suppressed);

#endif
