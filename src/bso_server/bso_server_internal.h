/* src/bso_server/bso_server_internal.h: the server's routes over the store (not API). */
#ifndef ZEUS_BSO_SERVER_INTERNAL_H
#define ZEUS_BSO_SERVER_INTERNAL_H

#include <jansson.h>

#include "bso_server/db.h"

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
} bso_req;

enum { BSO_R_REGISTER = 1, BSO_R_DELETE, BSO_R_PREDICT, BSO_R_REPORT, BSO_R_END };

/* Checks the request's body before the transaction: BSO_DB_OK, or a 422 reply naming the field
 * (the original's FastAPI validation errors: {"detail": [{"loc": ["body", FIELD], "msg", "type"}]}).
 * May rewrite req->body into its normal form. */
int bso_validate(bso_req *req, bso_reply *reply);
/* Runs the route inside the transaction the caller began. Returns a BSO_DB_* code; with
 * BSO_DB_OK the reply is set (status >= 400: the caller rolls back). err gets the store's
 * message otherwise. */
int bso_route(bso_db *db, const char *lock_suffix, bso_req *req, bso_reply *reply, char *err, size_t errlen);

json_t *bso_message(const char *fmt, ...);

#endif
