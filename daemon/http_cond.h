/* SPDX-License-Identifier: MIT */
/*
 * Validators and preconditions (RFC 9110 sections 8.8, 13, 14): HTTP dates,
 * ETags, If-None-Match / If-Modified-Since / If-Range, Range. Pure code.
 */
#ifndef ORCD_HTTP_COND_H
#define ORCD_HTTP_COND_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include "http_parse.h"

#define HTTP_DATE_LEN 29 /* "Sun, 06 Nov 1994 08:49:37 GMT" */
/* 3 x 16 hex digits, 2 dashes, 2 quotes, NUL = 53 (48 did not fit). */
#define HTTP_ETAG_MAX 56

/* Writes IMF-fixdate plus NUL into out (at least HTTP_DATE_LEN + 1). */
void http_date_format(time_t t, char *out);
/* Parses IMF-fixdate, RFC 850 and asctime forms. 0 or -EINVAL. */
int http_date_parse(struct http_str s, time_t *out);

/* Strong ETag "\"<hex mtime ns>-<hex size>-<hex ino>\"" into out (>= HTTP_ETAG_MAX). */
void http_etag_make(uint64_t ino, uint64_t size, int64_t mtime_sec,
		    long mtime_nsec, char *out);

/*
 * Evaluate If-None-Match and If-Modified-Since for a GET/HEAD of a
 * representation with the given strong etag and mtime.
 * If-None-Match (weak comparison, list, "*") takes precedence; then
 * If-Modified-Since is used only when If-None-Match is absent, and an
 * unparsable date, or one later than the current time, is ignored.
 * Returns 304 or 200 (always 200 for other methods).
 */
int http_precondition(const struct http_request *req, const char *etag,
		      time_t mtime);
/* The same with the current time given (for tests and callers that have
 * it at hand); http_precondition uses time(NULL). */
int http_precondition_at(const struct http_request *req, const char *etag,
			 time_t mtime, time_t now);

enum http_range_result {
	HTTP_RANGE_NONE,     /* no (usable) Range: serve the whole 200 */
	HTTP_RANGE_OK,       /* single satisfiable range: 206 */
	HTTP_RANGE_UNSATISFIABLE, /* 416 with Content-Range: bytes * /size */
	HTTP_RANGE_MULTI,    /* several ranges: we answer a plain 200 */
};

/*
 * Interpret a Range field for a representation of `size` bytes.
 * Unknown units and syntactically invalid fields -> HTTP_RANGE_NONE (RFC
 * 9110 14.2: ignore). first/last inclusive on HTTP_RANGE_OK.
 */
enum http_range_result http_range_parse(struct http_str range, uint64_t size,
					uint64_t *first, uint64_t *last);

/*
 * If-Range (RFC 9110 13.1.5): true when the Range may be honoured,
 * i.e. the field is absent, or it is a strong ETag equal to etag, or an
 * HTTP-date exactly equal to mtime. Weak ETags never match.
 */
bool http_if_range_ok(struct http_str if_range, const char *etag,
		      time_t mtime);

#endif
