/* schema.c: the schema of the database zeus bso-server and zeus run --state postgresql://...
 * share, as migrations that zeus__store_migrate applies in order. Types both SQLite and PostgreSQL
 * accept; doubles may be infinite. Trials are deleted with their job by the server (no reliance on
 * foreign-key enforcement, off by default in SQLite). A change to the schema is a new migration at
 * the end, never an edit of one that was released. */
#include "store/store.h"

const char *const zeus__store_schema[] = {
    /* 1: jobs and trials of the batch-size optimizer server */
    "CREATE TABLE bso_job ("
    " job_id TEXT PRIMARY KEY,"
    " spec TEXT NOT NULL,"        /* the registered JobSpecFromClient, normalised JSON */
    " seed BIGINT NOT NULL,"      /* mab_seed, or a random one when none was given */
    " stage INTEGER NOT NULL,"    /* 0 pruning, 1 Thompson sampling */
    " min_cost DOUBLE PRECISION," /* least cost reported so far */
    " min_cost_bs BIGINT,"
    " mab TEXT," /* the bandit: arms and generator, JSON */
    " created_s DOUBLE PRECISION NOT NULL);"
    "CREATE TABLE bso_trial ("
    " job_id TEXT NOT NULL,"
    " trial_number BIGINT NOT NULL,"
    " batch_size BIGINT NOT NULL,"
    " type INTEGER NOT NULL,"   /* 0 exploration, 1 concurrent, 2 Thompson sampling */
    " status INTEGER NOT NULL," /* 0 dispatched, 1 succeeded, 2 failed */
    " time_s DOUBLE PRECISION,"
    " energy_j DOUBLE PRECISION,"
    " converged INTEGER,"
    " start_s DOUBLE PRECISION NOT NULL,"
    " end_s DOUBLE PRECISION,"
    " PRIMARY KEY (job_id, trial_number));"
    "CREATE INDEX bso_trial_by_bs ON bso_trial (job_id, batch_size, status, trial_number);",
    /* 2: zeus run --state postgresql://...: each job identity's state (an SQLite image) */
    "CREATE TABLE run_state (job_key TEXT PRIMARY KEY, image BYTEA NOT NULL, updated_s DOUBLE PRECISION NOT NULL);",
    /* 3: the trial lease: a dispatched trial's last sign of life (its latest report; NULL: its
     * start), from which --trial-lease counts */
    "ALTER TABLE bso_trial ADD COLUMN seen_s DOUBLE PRECISION;"
    /* every request of a job looks at its dispatched trials (the lease) and its unsound rows
     * (reports outside the bounds): few, found without reading the job's whole history */
    "CREATE INDEX bso_trial_attention ON bso_trial (job_id) WHERE " BSO_TRIAL_ATTENTION ";",
};
const int zeus__store_schema_n = (int)(sizeof zeus__store_schema / sizeof *zeus__store_schema);
