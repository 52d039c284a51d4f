/* Job ids in the original's shape, safe as directory names whatever the metadata holds. */
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "pfo/pfo_internal.h"

#define PFO_METADATA_MAX 64

static bool safe_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' ||
         c == '_' || c == '-';
}

int zeus_pfo_make_job_id(const zeus_pfo_job_info *job, const char *scheduler, long long when,
                         char **out) {
  if (!job || !scheduler || !out) return zeus__error(ZEUS_EINVAL, "zeus_pfo_make_job_id: NULL argument");
  time_t t = (time_t)when;
  struct tm tm;
  if (!localtime_r(&t, &tm)) return zeus__error(ZEUS_EINVAL, "job id: bad time %lld", when);
  zeus__buf b = {0};
  char stamp[32];
  strftime(stamp, sizeof stamp, "%Y-%m-%d-%H-%M-%S", &tm);
  int rc = zeus__buf_printf(&b, "%s+dp%d+pp%d+tp%d+", stamp, job->dp_degree, job->pp_degree, job->tp_degree);
  /* The scheduler name comes from our registry, but sanitise it all the same. */
  for (const char *p = scheduler; !rc && *p; p++) rc = zeus__buf_append(&b, safe_char(*p) ? p : "_", 1);
  if (!rc && job->job_metadata && job->job_metadata[0]) {
    rc = zeus__buf_puts(&b, "+");
    size_t k = 0;
    for (const char *p = job->job_metadata; !rc && *p && k < PFO_METADATA_MAX; p++, k++)
      rc = zeus__buf_append(&b, safe_char(*p) ? p : "_", 1);
  }
  if (rc) { zeus__buf_free(&b); return rc; }
  *out = b.data;
  return ZEUS_OK;
}
