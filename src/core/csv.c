/* CSV tables. All fields live in one buffer; rows index into it. */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/csv.h"

struct zeus__csv {
  char *name;
  char *store;        /* all fields, NUL-separated */
  size_t *field_off;  /* offset of each field in `store`, row-major, header first */
  size_t *line;       /* input line of each row, header first */
  size_t ncols;
  size_t nrows_total; /* header included */
};

typedef struct {
  size_t *v;
  size_t n, cap;
} sizevec;

static int sv_push(sizevec *s, size_t x) {
  int rc = zeus__grow(&s->v, &s->cap, s->n + 1, sizeof *s->v, "reading CSV");
  if (rc) return rc;
  s->v[s->n++] = x;
  return ZEUS_OK;
}

int zeus__csv_parse(const char *data, size_t len, const char *name, zeus__csv **out) {
  zeus__csv *c = calloc(1, sizeof *c);
  zeus__buf store = {0};
  sizevec offs = {0}, lines = {0};
  int rc = ZEUS_OK;
  if (!c || !(c->name = strdup(name ? name : "CSV input"))) { free(c); return zeus__oom("reading CSV"); }
  /* A UTF-8 byte-order mark (spreadsheets write one) is not part of the first column's name:
   * kept, it would make 'missing column' errors name a column that looks present. */
  size_t i = len >= 3 && memcmp(data, "\xEF\xBB\xBF", 3) == 0 ? 3 : 0, line = 1;
  size_t row_fields = 0;
  while (i < len) {
    /* skip blank lines */
    if (data[i] == '\n' || data[i] == '\r') {
      if (data[i] == '\n') line++;
      i++;
      continue;
    }
    size_t row_line = line;
    row_fields = 0;
    for (;;) { /* one field */
      if ((rc = sv_push(&offs, store.len))) goto fail;
      if (i < len && data[i] == '"') {
        size_t qline = line;
        i++;
        for (;;) {
          if (i >= len) {
            rc = zeus__error(ZEUS_EPARSE, "%s:%zu: unterminated quoted field", c->name, qline);
            goto fail;
          }
          if (data[i] == '"') {
            if (i + 1 < len && data[i + 1] == '"') {
              if ((rc = zeus__buf_append(&store, "\"", 1))) goto fail;
              i += 2;
              continue;
            }
            i++;
            break;
          }
          if (data[i] == '\n') line++;
          if ((rc = zeus__buf_append(&store, &data[i], 1))) goto fail;
          i++;
        }
        if (i < len && data[i] != ',' && data[i] != '\n' && data[i] != '\r') {
          rc = zeus__error(ZEUS_EPARSE, "%s:%zu: unexpected character after a quoted field", c->name, line);
          goto fail;
        }
      } else {
        size_t s = i;
        while (i < len && data[i] != ',' && data[i] != '\n' && data[i] != '\r') i++;
        if ((rc = zeus__buf_append(&store, data + s, i - s))) goto fail;
      }
      if ((rc = zeus__buf_append(&store, "", 1))) goto fail; /* the field's NUL, kept in the store */
      row_fields++;
      if (i < len && data[i] == ',') { i++; continue; }
      break;
    }
    /* end of row */
    if (i < len && data[i] == '\r') i++;
    if (i < len && data[i] == '\n') { i++; line++; }
    if (c->nrows_total == 0) {
      c->ncols = row_fields;
    } else if (row_fields != c->ncols) {
      rc = zeus__error(ZEUS_EPARSE, "%s:%zu: expected %zu fields as in the header, got %zu", c->name,
                       row_line, c->ncols, row_fields);
      goto fail;
    }
    if ((rc = sv_push(&lines, row_line))) goto fail;
    c->nrows_total++;
  }
  if (c->nrows_total == 0) {
    rc = zeus__error(ZEUS_EPARSE, "%s: empty, expected a header line", c->name);
    goto fail;
  }
  c->store = store.data;
  c->field_off = offs.v;
  c->line = lines.v;
  *out = c;
  return ZEUS_OK;
fail:
  zeus__buf_free(&store);
  free(offs.v);
  free(lines.v);
  free(c->name);
  free(c);
  return rc;
}

int zeus__csv_read_file(const char *path, zeus__csv **out) { return zeus__csv_read_file_as(path, NULL, out); }

int zeus__csv_read_file_as(const char *path, const char *what, zeus__csv **out) {
  char *data;
  size_t len;
  int rc = zeus__read_file_max(path, ZEUS__READ_MAX, what ? what : "CSV file", &data, &len);
  if (rc) return rc;
  rc = zeus__csv_parse(data, len, path, out);
  free(data);
  return rc;
}

void zeus__csv_free(zeus__csv *c) {
  if (!c) return;
  free(c->name);
  free(c->store);
  free(c->field_off);
  free(c->line);
  free(c);
}

size_t zeus__csv_ncols(const zeus__csv *c) { return c->ncols; }
size_t zeus__csv_nrows(const zeus__csv *c) { return c->nrows_total - 1; }
const char *zeus__csv_name(const zeus__csv *c) { return c->name; }

const char *zeus__csv_header(const zeus__csv *c, size_t col) {
  return col < c->ncols ? c->store + c->field_off[col] : NULL;
}

long zeus__csv_find_col(const zeus__csv *c, const char *name) {
  for (size_t j = 0; j < c->ncols; j++)
    if (strcmp(zeus__csv_header(c, j), name) == 0) return (long)j;
  return -1;
}

int zeus__csv_require_col(const zeus__csv *c, const char *name, size_t *col) {
  long j = zeus__csv_find_col(c, name);
  if (j >= 0) { *col = (size_t)j; return ZEUS_OK; }
  zeus__buf hdr = {0};
  for (size_t k = 0; k < c->ncols; k++) zeus__buf_printf(&hdr, "%s%s", k ? "," : "", zeus__csv_header(c, k));
  int rc = zeus__error(ZEUS_EPARSE, "%s:%zu: missing column '%s' (the header is '%s')", c->name, c->line[0],
                       name, hdr.data ? hdr.data : "");
  zeus__buf_free(&hdr);
  return rc;
}

const char *zeus__csv_cell(const zeus__csv *c, size_t row, size_t col) {
  if (row + 1 >= c->nrows_total || col >= c->ncols) return NULL;
  return c->store + c->field_off[(row + 1) * c->ncols + col];
}

size_t zeus__csv_line(const zeus__csv *c, size_t row) { return c->line[row + 1]; }

int zeus__csv_double(const zeus__csv *c, size_t row, size_t col, double *out) {
  const char *s = zeus__csv_cell(c, row, col);
  if (!s) return zeus__error(ZEUS_EINVAL, "%s: no cell at row %zu, column %zu", c->name, row, col);
  char *end;
  errno = 0;
  double v = strtod(s, &end);
  while (*end == ' ' || *end == '\t') end++;
  if (end == s || *end || isnan(v) || errno == ERANGE)
    return zeus__error(ZEUS_EPARSE, "%s:%zu:%zu: column '%s': expected a number, got '%s'", c->name,
                       zeus__csv_line(c, row), col + 1, zeus__csv_header(c, col), s);
  *out = v;
  return ZEUS_OK;
}

int zeus__csv_long(const zeus__csv *c, size_t row, size_t col, long *out) {
  const char *s = zeus__csv_cell(c, row, col);
  if (!s) return zeus__error(ZEUS_EINVAL, "%s: no cell at row %zu, column %zu", c->name, row, col);
  char *end;
  errno = 0;
  long v = strtol(s, &end, 10);
  while (*end == ' ' || *end == '\t') end++;
  if (end == s || *end || errno == ERANGE)
    return zeus__error(ZEUS_EPARSE, "%s:%zu:%zu: column '%s': expected an integer, got '%s'", c->name,
                       zeus__csv_line(c, row), col + 1, zeus__csv_header(c, col), s);
  *out = v;
  return ZEUS_OK;
}

int zeus__csv_put_field(zeus__buf *b, const char *field) {
  if (!strpbrk(field, ",\"\r\n")) return zeus__buf_puts(b, field);
  int rc = zeus__buf_append(b, "\"", 1);
  for (const char *p = field; !rc && *p; p++)
    rc = *p == '"' ? zeus__buf_append(b, "\"\"", 2) : zeus__buf_append(b, p, 1);
  return rc ? rc : zeus__buf_append(b, "\"", 1);
}
