/* src/core/csv.h: a CSV table read whole into memory, with errors that name file, line and
 * column. RFC 4180 quoting ("a,b" and "" inside quotes); CRLF or LF line ends; blank lines
 * skipped. The first row is the header. */
#ifndef ZEUS_CORE_CSV_H
#define ZEUS_CORE_CSV_H

#include "core/core.h"

typedef struct zeus__csv zeus__csv;

/* Parses `len` bytes; `name` names the input in errors. Every row must have as many fields
 * as the header (ZEUS_EPARSE "<name>:<line>: expected N fields, got M"). */
int zeus__csv_parse(const char *data, size_t len, const char *name, zeus__csv **out /* out */);
/* Reads a file through zeus__read_file_max (a regular file of at most ZEUS__READ_MAX bytes; `what`
 * names the kind of file in errors, NULL: "CSV file") and parses it. */
int zeus__csv_read_file_as(const char *path, const char *what, zeus__csv **out /* out */);
int zeus__csv_read_file(const char *path, zeus__csv **out /* out */);
void zeus__csv_free(zeus__csv *c);

size_t zeus__csv_ncols(const zeus__csv *c);
size_t zeus__csv_nrows(const zeus__csv *c); /* data rows, header excluded */
const char *zeus__csv_name(const zeus__csv *c);
const char *zeus__csv_header(const zeus__csv *c, size_t col);
/* Index of the column named `name`, or -1. */
long zeus__csv_find_col(const zeus__csv *c, const char *name);
/* Like find_col, but a missing column is ZEUS_EPARSE "<name>: missing column 'x' (header: ...)". */
int zeus__csv_require_col(const zeus__csv *c, const char *name, size_t *col /* out */);
const char *zeus__csv_cell(const zeus__csv *c, size_t row, size_t col);
/* 1-based line of a data row in the input. */
size_t zeus__csv_line(const zeus__csv *c, size_t row);
/* A cell as a number: ZEUS_EPARSE "<name>:<line>:<col>: column 'x': expected a number, got 'y'". */
int zeus__csv_double(const zeus__csv *c, size_t row, size_t col, double *out);
int zeus__csv_long(const zeus__csv *c, size_t row, size_t col, long *out);

/* Appends one field to `b`, quoted when it holds a comma, quote or line break. */
int zeus__csv_put_field(zeus__buf *b, const char *field);

#endif
