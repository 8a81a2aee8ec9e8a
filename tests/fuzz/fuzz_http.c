// SPDX-License-Identifier: MIT
/*
 * libFuzzer target for the pure HTTP layer: the request parser, then
 * preconditions, ranges, If-Range, dates, the renderer and a directory
 * redirect's Location on whatever it accepted. Every invariant that must hold for any input is checked with
 * __builtin_trap(), so a violation is a crash the fuzzer reports.
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "http_cond.h"
#include "http_parse.h"
#include "http_render.h"
#include "path.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define CHECK(x)                          \
	do {                              \
		if (!(x))                 \
			__builtin_trap(); \
	} while (0)

static const struct http_limits lim_small = {64, 256, 8};
static const struct http_limits lim_large = {8192, 65536, 1000};

/* A NUL-terminated heap copy of a parsed string, for fields that take C
 * strings. */
static char *cstr(struct http_str s)
{
	char *p = malloc(s.n + 1);

	CHECK(p);
	if (s.n)
		memcpy(p, s.p, s.n);
	p[s.n] = '\0';
	return p;
}

static bool inside(const char *buf, size_t len, struct http_str s)
{
	return s.n == 0 || (s.p >= buf && s.p + s.n <= buf + len);
}

/* A single-value field: in the buffer, or spoilt by a second line. */
static bool single(const char *buf, size_t len, struct http_str s)
{
	return inside(buf, len, s) || (s.p == HTTP_FIELD_REPEATED.p &&
				       s.n == HTTP_FIELD_REPEATED.n);
}

static void check_date(struct http_str s)
{
	char out[HTTP_DATE_LEN + 1];
	time_t t, back;

	if (http_date_parse(s, &t))
		return;
	/* Whatever parses, formats back to a date that parses the same. */
	http_date_format(t, out);
	CHECK(strlen(out) == HTTP_DATE_LEN);
	CHECK(http_date_parse((struct http_str){out, HTTP_DATE_LEN}, &back) ==
	      0);
	CHECK(back == t);
}

static void check_render(const struct http_response *r, size_t cap)
{
	char *buf = malloc(cap ? cap : 1);
	ssize_t n;

	CHECK(buf);
	n = http_render_head(r, buf, cap);
	CHECK(n == -ENOSPC || (n > 0 && (size_t)n <= cap));
	if (n > 0)
		CHECK(n >= 4 && memcmp(buf + n - 4, "\r\n\r\n", 4) == 0);
	free(buf);
}

static void check_semantics(const struct http_request *req, size_t size)
{
	static const uint64_t sizes[] = {0, 1, 1000, UINT64_MAX};
	const time_t mtime = 784111777, now = 1800000000;
	char etag[HTTP_ETAG_MAX], body[64];
	struct http_response r;
	uint64_t first, last;
	int status;
	bool ir;

	http_etag_make(size, size * 31, (int64_t)size, 5, etag);
	status = http_precondition_at(req, etag, mtime, now);
	CHECK(status == 200 || status == 304 || status == 412);
	ir = http_if_range_ok(req->if_range, etag, mtime);
	/* Step 5 is If-Range itself, for a request with a Range. */
	CHECK(http_range_applies(req, etag, mtime) ==
	      (req->method <= HTTP_METHOD_HEAD && req->range.n && ir));
	check_date(req->if_modified_since);
	check_date(req->if_unmodified_since);
	check_date(req->if_range);

	for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
		enum http_range_result rr =
			http_range_parse(req->range, sizes[i], &first, &last);

		CHECK(rr == HTTP_RANGE_NONE || rr == HTTP_RANGE_OK ||
		      rr == HTTP_RANGE_UNSATISFIABLE || rr == HTTP_RANGE_MULTI);
		if (rr == HTTP_RANGE_OK)
			CHECK(first <= last && last < sizes[i]);
		if (req->range.n == 0)
			CHECK(rr == HTTP_RANGE_NONE);
	}

	/* A head echoing the request's own strings: the parser never lets
	 * a control byte through, so rendering must not refuse them. */
	memset(&r, 0, sizeof(r));
	r.status = status;
	r.version_minor = req->version_minor;
	r.keep_alive = req->keep_alive;
	r.now = now;
	r.server = cstr(req->user_agent);
	r.content_type = cstr(req->referer);
	r.location = cstr(req->path);
	r.allow = cstr(req->method_str);
	r.etag = etag;
	r.last_modified = mtime;
	r.has_last_modified = mtime & 1;
	r.accept_ranges = ir;
	r.content_length = (int64_t)(size & 0xffff);
	if (http_range_parse(req->range, 1000, &first, &last) ==
	    HTTP_RANGE_OK) {
		r.content_range = true;
		r.range_first = first;
		r.range_last = last;
		r.range_total = 1000;
	}
	{
		size_t big = 1024 + 4 * size;
		char *buf = malloc(big);
		ssize_t n;

		CHECK(buf);
		n = http_render_head(&r, buf, big);
		CHECK(n > 0 && (size_t)n <= big);
		free(buf);
	}
	check_render(&r, 0);
	check_render(&r, 64);
	check_render(&r, 200);
	free((void *)r.server);
	free((void *)r.content_type);
	free((void *)r.location);
	free((void *)r.allow);

	CHECK(http_error_body(status, body, sizeof(body)) <= sizeof(body));
}

/* The Location a directory at this path would be redirected to stays on
 * this server, is plain URI text, and names the same directory again. */
static void check_location(const struct http_request *req)
{
	char rel[512], back[512], loc[2048];
	const char *q;
	bool trailing;
	int n;

	if (path_normalize(req->path.p, req->path.n, rel, sizeof(rel),
			   &trailing))
		return;
	n = path_dir_location(rel, req->query.p, req->query.n, loc,
			      sizeof(loc));
	if (n < 0) {
		CHECK(n == -ENAMETOOLONG);
		return;
	}
	CHECK((size_t)n == strlen(loc));
	CHECK(loc[0] == '/' && loc[1] != '/');
	for (int i = 0; i < n; i++)
		CHECK(loc[i] > 0x20 && loc[i] < 0x7f && loc[i] != '\\' &&
		      loc[i] != '#');
	q = memchr(loc, '?', (size_t)n);
	CHECK(path_normalize(loc, q ? (size_t)(q - loc) : (size_t)n, back,
			     sizeof(back), &trailing) == 0);
	CHECK(trailing && strcmp(back, rel) == 0);
}

/* Parsed on from where a first piece stopped (http_parse_more, as the
 * connection core does while a head trickles in): the same outcome and
 * the same request as in one go. */
static void check_more(const char *buf, size_t size,
		       const struct http_limits *lim, enum http_parse_result res,
		       int status, const struct http_request *req)
{
	struct http_parse_state st = {0};
	struct http_request more;
	enum http_parse_result r;
	int mstatus;
	size_t cut = size ? (unsigned char)buf[size - 1] * 257u % size : 0;

	r = http_parse_more(buf, cut, lim, &more, &mstatus, &st);
	if (r == HTTP_PARSE_INCOMPLETE)
		r = http_parse_more(buf, size, lim, &more, &mstatus, &st);
	CHECK(r == res && mstatus == status);
	if (r != HTTP_PARSE_INCOMPLETE)
		CHECK(memcmp(&more, req, sizeof(more)) == 0);
}

static void run(const char *buf, size_t size, const struct http_limits *lim)
{
	struct http_request req, pre;
	enum http_parse_result res, pres;
	int status, pstatus;
	size_t cut;

	res = http_parse_request(buf, size, lim, &req, &status);
	check_more(buf, size, lim, res, status, &req);
	switch (res) {
	case HTTP_PARSE_INCOMPLETE:
		return;
	case HTTP_PARSE_ERROR:
		CHECK(status == 400 || status == 414 || status == 431 ||
		      status == 505);
		break;
	case HTTP_PARSE_OK:
		CHECK(status == 0);
		CHECK(req.head_len > 0 && req.head_len <= size);
		CHECK(req.head_len <= lim->max_header_bytes);
		CHECK(req.version_minor == 0 || req.version_minor == 1);
		CHECK(req.request_line.n <= lim->max_request_line);
		CHECK(inside(buf, size, req.request_line));
		CHECK(inside(buf, size, req.target));
		CHECK(inside(buf, size, req.query));
		CHECK(inside(buf, size, req.host));
		CHECK(single(buf, size, req.range));
		CHECK(req.if_none_match.n <= HTTP_LIST_LINES &&
		      req.if_match.n <= HTTP_LIST_LINES);
		for (unsigned k = 0; k < req.if_match.n; k++)
			CHECK(inside(buf, size, req.if_match.line[k]) &&
			      req.if_match.line[k].n);
		for (unsigned k = 0; k < req.if_none_match.n; k++)
			CHECK(inside(buf, size, req.if_none_match.line[k]) &&
			      req.if_none_match.line[k].n);
		CHECK(single(buf, size, req.if_unmodified_since));
		CHECK(req.method > HTTP_METHOD_HEAD ||
		      req.content_length == 0);
		CHECK(req.version_minor == 0 || req.has_host);
		CHECK(!(req.keep_alive && req.content_length));
		break;
	default:
		__builtin_trap();
	}

	/* A prefix is judged like the whole: INCOMPLETE or the same answer
	 * (the parser decides every outcome at one byte position). */
	for (int k = 0; k < 2 && size; k++) {
		cut = k == 0 ? size - 1 : (unsigned char)buf[0] * 131u % size;
		pres = http_parse_request(buf, cut, lim, &pre, &pstatus);
		if (pres == HTTP_PARSE_INCOMPLETE)
			continue;
		CHECK(pres == res && pstatus == status);
		if (pres == HTTP_PARSE_OK)
			CHECK(pre.head_len == req.head_len);
	}

	if (res == HTTP_PARSE_OK) {
		check_semantics(&req, size);
		check_location(&req);
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	/* An exact-size copy, so ASan sees any read past the end. */
	char *buf = malloc(size ? size : 1);

	CHECK(buf);
	if (size)
		memcpy(buf, data, size);
	run(buf, size, &lim_small);
	run(buf, size, &lim_large);
	free(buf);
	return 0;
}
