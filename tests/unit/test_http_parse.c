// SPDX-License-Identifier: MIT
/*
 * Unit tests of the request-head parser (daemon/http_parse.c): good and
 * bad requests, every error status, limits, requests split into pieces,
 * pipelining and request-smuggling attempts.
 *
 * Every input is copied into a heap buffer of exactly its length, so an
 * AddressSanitizer build catches any read past len.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "http_parse.h"

static const struct http_limits lim_default = {
	.max_request_line = 8192,
	.max_header_bytes = 16384,
	.max_headers = 100,
};

struct result {
	enum http_parse_result r;
	int status;
	struct http_request req;
	char *copy; /* the exact-size buffer req points into */
};

static void result_free(struct result *res)
{
	free(res->copy);
	res->copy = NULL;
}

/* Parse buf[0..len) from an exact-size heap copy. */
static struct result parse_n(const char *buf, size_t len,
			     const struct http_limits *lim)
{
	struct result res;

	memset(&res, 0, sizeof(res));
	res.copy = malloc(len ? len : 1);
	assert_non_null(res.copy);
	memcpy(res.copy, buf, len);
	res.status = -1;
	res.r = http_parse_request(res.copy, len, lim, &res.req, &res.status);
	return res;
}

static struct result parse(const char *s)
{
	return parse_n(s, strlen(s), &lim_default);
}

static void assert_str(struct http_str s, const char *want)
{
	assert_int_equal(s.n, strlen(want));
	assert_memory_equal(s.p, want, s.n);
}

/* The whole request must parse with this outcome... */
static void expect_status(const char *s, int status)
{
	struct result res = parse(s);

	assert_int_equal(res.r, HTTP_PARSE_ERROR);
	assert_int_equal(res.status, status);
	result_free(&res);
}

static struct result expect_ok(const char *s)
{
	struct result res = parse(s);

	assert_int_equal(res.r, HTTP_PARSE_OK);
	assert_int_equal(res.status, 0);
	assert_int_equal(res.req.head_len, strlen(s));
	return res;
}

/*
 * A request arriving a byte at a time into one buffer, parsed on from
 * where each call stopped (http_parse_more): the same outcome and the
 * same request as one parse of the whole, and each call looks only at
 * bytes no call looked at before (a CR waiting for its LF is looked at
 * twice), where a parse from the start each time looks at each byte once
 * per call after it arrived.
 */
static void check_parse_more(const char *s, size_t len,
			     const struct http_limits *lim)
{
	char *buf = malloc(len ? len : 1);
	struct http_parse_state st = {0};
	struct http_request whole, more;
	enum http_parse_result r = HTTP_PARSE_INCOMPLETE, rw;
	int status = -1, status_w = -1;
	size_t k;

	assert_non_null(buf);
	memcpy(buf, s, len);
	rw = http_parse_request(buf, len, lim, &whole, &status_w);
	for (k = 1; k <= len && r == HTTP_PARSE_INCOMPLETE; k++) {
		r = http_parse_more(buf, k, lim, &more, &status, &st);
		if (r == HTTP_PARSE_INCOMPLETE)
			assert_true(st.scan == k || st.scan + 1 == k);
	}
	assert_true(st.looked <= 2 * len);
	assert_int_equal(r, rw);
	assert_int_equal(status, status_w);
	if (r != HTTP_PARSE_INCOMPLETE)
		assert_memory_equal(&more, &whole, sizeof(whole));
	free(buf);
}

/*
 * ...and every prefix of it must give INCOMPLETE or exactly the same
 * outcome: a request arriving byte by byte is judged as a whole one.
 */
static void check_prefixes(const char *s, size_t len,
			   const struct http_limits *lim, bool all_incomplete)
{
	struct result full = parse_n(s, len, lim);

	for (size_t k = 0; k < len; k++) {
		struct result pre = parse_n(s, k, lim);

		if (pre.r != HTTP_PARSE_INCOMPLETE) {
			assert_false(all_incomplete);
			assert_int_equal(pre.r, full.r);
			assert_int_equal(pre.status, full.status);
			if (pre.r == HTTP_PARSE_OK)
				assert_int_equal(pre.req.head_len,
						 full.req.head_len);
		}
		result_free(&pre);
	}
	result_free(&full);
	check_parse_more(s, len, lim);
}

/* ---- good requests ---- */

static void test_simple_get(void **state)
{
	(void)state;
	const char *s = "GET /index.html HTTP/1.1\r\nHost: example.com\r\n\r\n";
	struct result res = expect_ok(s);

	assert_int_equal(res.req.method, HTTP_METHOD_GET);
	assert_str(res.req.method_str, "GET");
	assert_str(res.req.target, "/index.html");
	assert_str(res.req.path, "/index.html");
	assert_str(res.req.request_line, "GET /index.html HTTP/1.1");
	assert_int_equal(res.req.version_minor, 1);
	assert_true(res.req.keep_alive);
	assert_true(res.req.has_host);
	assert_str(res.req.host, "example.com");
	assert_false(res.req.has_content_length);
	assert_int_equal(res.req.if_none_match.n, 0);
	assert_int_equal(res.req.if_match.n, 0);
	assert_int_equal(res.req.if_unmodified_since.n, 0);
	assert_int_equal(res.req.range.n, 0);
	result_free(&res);
}

static void test_head_and_other_methods(void **state)
{
	(void)state;
	struct result res = expect_ok("HEAD / HTTP/1.1\r\nHost: a\r\n\r\n");

	assert_int_equal(res.req.method, HTTP_METHOD_HEAD);
	result_free(&res);

	res = expect_ok("POST /x HTTP/1.1\r\nHost: a\r\n\r\n");
	assert_int_equal(res.req.method, HTTP_METHOD_OTHER);
	assert_str(res.req.method_str, "POST");
	result_free(&res);

	/* The methods of RFC 9110 and PATCH are known (405); any other
	 * token is a method orcd does not know (501), and methods are
	 * case-sensitive (RFC 9110 9.1). */
	static const struct {
		const char *m;
		enum http_method want;
	} methods[] = {
		{"PUT", HTTP_METHOD_OTHER}, {"DELETE", HTTP_METHOD_OTHER},
		{"CONNECT", HTTP_METHOD_OTHER}, {"TRACE", HTTP_METHOD_OTHER},
		{"PATCH", HTTP_METHOD_OTHER}, {"OPTIONS", HTTP_METHOD_OTHER},
		{"get", HTTP_METHOD_UNKNOWN}, {"Head", HTTP_METHOD_UNKNOWN},
		{"GETX", HTTP_METHOD_UNKNOWN}, {"HEA", HTTP_METHOD_UNKNOWN},
		{"POS", HTTP_METHOD_UNKNOWN}, {"PATCHX", HTTP_METHOD_UNKNOWN},
		{"M-SEARCH!", HTTP_METHOD_UNKNOWN},
	};
	for (size_t i = 0; i < sizeof(methods) / sizeof(methods[0]); i++) {
		char line[64];

		snprintf(line, sizeof(line),
			 "%s /x HTTP/1.1\r\nHost: a\r\n\r\n", methods[i].m);
		res = expect_ok(line);
		assert_int_equal(res.req.method, methods[i].want);
		assert_str(res.req.method_str, methods[i].m);
		result_free(&res);
	}
}

static void test_path_query_fragment(void **state)
{
	(void)state;
	struct result res =
		expect_ok("GET /a%20b/c?x=1&y=/z HTTP/1.1\r\nHost: a\r\n\r\n");

	assert_str(res.req.target, "/a%20b/c?x=1&y=/z");
	assert_str(res.req.path, "/a%20b/c");
	assert_str(res.req.query, "x=1&y=/z");
	result_free(&res);

	res = expect_ok("GET /p#frag HTTP/1.1\r\nHost: a\r\n\r\n");
	assert_str(res.req.path, "/p");
	assert_int_equal(res.req.query.n, 0);
	result_free(&res);

	res = expect_ok("GET /?q HTTP/1.1\r\nHost: a\r\n\r\n");
	assert_str(res.req.path, "/");
	assert_str(res.req.query, "q");
	result_free(&res);

	/* The query ends at a fragment; '?' after the first is query. */
	res = expect_ok("GET /p?a?b=/c#f?g HTTP/1.1\r\nHost: a\r\n\r\n");
	assert_str(res.req.path, "/p");
	assert_str(res.req.query, "a?b=/c");
	result_free(&res);
	res = expect_ok("GET /p? HTTP/1.1\r\nHost: a\r\n\r\n");
	assert_int_equal(res.req.query.n, 0);
	result_free(&res);
	res = expect_ok("GET /p#a?b HTTP/1.1\r\nHost: a\r\n\r\n");
	assert_int_equal(res.req.query.n, 0);
	result_free(&res);

	/* Raw UTF-8 is not a URI character, but clients send it. */
	res = expect_ok("GET /caf\xc3\xa9 HTTP/1.1\r\nHost: a\r\n\r\n");
	assert_str(res.req.path, "/caf\xc3\xa9");
	result_free(&res);
}

static void test_http10(void **state)
{
	(void)state;
	/* No Host needed, not persistent by default. */
	struct result res = expect_ok("GET / HTTP/1.0\r\n\r\n");

	assert_int_equal(res.req.version_minor, 0);
	assert_false(res.req.keep_alive);
	assert_false(res.req.has_host);
	result_free(&res);

	res = expect_ok("GET / HTTP/1.0\r\nConnection: keep-alive\r\n\r\n");
	assert_true(res.req.keep_alive);
	result_free(&res);

	res = expect_ok("GET / HTTP/1.0\r\nConnection: Keep-Alive\r\n\r\n");
	assert_true(res.req.keep_alive);
	result_free(&res);

	res = expect_ok("GET / HTTP/1.0\r\nConnection: x, keep-alive\r\n\r\n");
	assert_true(res.req.keep_alive);
	result_free(&res);

	res = expect_ok(
		"GET / HTTP/1.0\r\nConnection: keep-alive, close\r\n\r\n");
	assert_false(res.req.keep_alive);
	result_free(&res);

	res = expect_ok("GET / HTTP/1.0\r\nConnection: keep-alive-ish\r\n\r\n");
	assert_false(res.req.keep_alive);
	result_free(&res);

	/* A Host on 1.0 is used, and validated. */
	res = expect_ok("GET / HTTP/1.0\r\nHost: h:8080\r\n\r\n");
	assert_true(res.req.has_host);
	assert_str(res.req.host, "h:8080");
	result_free(&res);
	expect_status("GET / HTTP/1.0\r\nHost: a b\r\n\r\n", 400);
	expect_status("GET / HTTP/1.0\r\nHost: a\r\nHost: a\r\n\r\n", 400);
}

/* RFC 9112 3.2: Host = uri-host [ ":" port ], port = *DIGIT. */
static void test_host_syntax(void **state)
{
	(void)state;
	static const char *const good[] = {
		"example.com",
		"example.com:8080",
		"127.0.0.1:80",
		"[::1]",
		"[::1]:80",
		"[2001:db8::7]:",
		"xn--bcher-kva.example",
		"h:",
		"a%20b",
		"%2D",
		"a!$&'()*+,;=b",
		"[::ffff:192.0.2.1]",
		"[v1.x:y]",
		"[V1f.a]:8",
	};
	static const char *const bad[] = {
		"t:x", "t:80x",	 "t:8:0",    ":80",   "[::1",
		"[]",  "[::1]x", "[::1]:8x", "[::g]", "[::1]]",
		"a[b", "a]b",	 "user@x",   "a/b",
		/* percent-encoding is % and two hex digits */
		"a%zz", "%", "a%2", "a%2:80",
		/* an IP literal is IPv6 or IPvFuture */
		"[:::]", "[1.2]", "[1::2::3]", "[::1%25eth0]", "[v.x]",
		"[vz.x]", "[v1.]", "[v1]", "[v1.a/b]",
	};
	char buf[128];
	size_t i;

	for (i = 0; i < sizeof(good) / sizeof(good[0]); i++) {
		snprintf(buf, sizeof(buf), "GET / HTTP/1.1\r\nHost: %s\r\n\r\n",
			 good[i]);
		struct result res = expect_ok(buf);

		assert_str(res.req.host, good[i]);
		result_free(&res);
	}
	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		snprintf(buf, sizeof(buf), "GET / HTTP/1.1\r\nHost: %s\r\n\r\n",
			 bad[i]);
		expect_status(buf, 400);
		/* In a target, "a/b" is authority "a" and path "/b/". */
		if (strchr(bad[i], '/'))
			continue;
		snprintf(buf, sizeof(buf),
			 "GET http://%s/ HTTP/1.1\r\nHost: a\r\n\r\n", bad[i]);
		expect_status(buf, 400);
	}
}

static void test_connection_11(void **state)
{
	(void)state;
	static const struct {
		const char *fields;
		bool keep_alive;
	} cases[] = {
		{"", true},
		{"Connection: close\r\n", false},
		{"Connection: CLOSE\r\n", false},
		{"connection: Close\r\n", false},
		{"Connection: upgrade,  close\r\n", false},
		{"Connection: close ,upgrade\r\n", false},
		{"Connection: ,,close,,\r\n", false},
		{"Connection: foo\r\nConnection: close\r\n", false},
		{"Connection: keep-alive\r\n", true},
		{"Connection: closed\r\n", true},
		{"Connection: clos\r\n", true},
		{"Connection: \r\n", true},
		{"Connection: upgrade\r\n", true},
	};
	char buf[256];

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		snprintf(buf, sizeof(buf),
			 "GET / HTTP/1.1\r\nHost: a\r\n%s\r\n",
			 cases[i].fields);
		struct result res = expect_ok(buf);

		if (res.req.keep_alive != cases[i].keep_alive)
			fail_msg("case %zu (%s): keep_alive %d", i,
				 cases[i].fields, res.req.keep_alive);
		result_free(&res);
	}
}

static void test_version_minor_above_1(void **state)
{
	(void)state;
	/* RFC 9110 2.5: process a higher minor as the highest we know. */
	struct result res = expect_ok("GET / HTTP/1.2\r\nHost: a\r\n\r\n");

	assert_int_equal(res.req.version_minor, 1);
	assert_true(res.req.keep_alive);
	result_free(&res);
	res = expect_ok("GET / HTTP/1.9\r\nHost: a\r\n\r\n");
	assert_int_equal(res.req.version_minor, 1);
	result_free(&res);
	/* ...and needs a Host like 1.1 does. */
	expect_status("GET / HTTP/1.2\r\n\r\n", 400);
}

static void test_leading_empty_lines(void **state)
{
	(void)state;
	struct result res =
		expect_ok("\r\n\r\n\nGET / HTTP/1.1\r\nHost: a\r\n\r\n");

	assert_int_equal(res.req.method, HTTP_METHOD_GET);
	assert_str(res.req.request_line, "GET / HTTP/1.1");
	result_free(&res);
	/* A CR not followed by LF is not an empty line. */
	expect_status("\rGET / HTTP/1.1\r\nHost: a\r\n\r\n", 400);
	/* Only empty lines so far: wait. */
	res = parse("\r\n\r\n\r");
	assert_int_equal(res.r, HTTP_PARSE_INCOMPLETE);
	result_free(&res);
}

static void test_empty_lines_prefix(void **state)
{
	(void)state;
	assert_int_equal(http_empty_lines("", 0), 0);
	assert_int_equal(http_empty_lines("\r\n", 2), 2);
	assert_int_equal(http_empty_lines("\r\n\n\r\nGET", 8), 5);
	/* A lone CR may be half of one: not yet whole. */
	assert_int_equal(http_empty_lines("\r\n\r", 3), 2);
	assert_int_equal(http_empty_lines("\rGET", 4), 0);
	assert_int_equal(http_empty_lines("GET / HTTP/1.1\r\n", 16), 0);
}

static void test_bare_lf(void **state)
{
	(void)state;
	struct result res = expect_ok("GET / HTTP/1.1\nHost: a\n\n");

	assert_str(res.req.host, "a");
	assert_str(res.req.request_line, "GET / HTTP/1.1");
	result_free(&res);
	res = expect_ok("GET / HTTP/1.1\r\nHost: a\nRange: bytes=1-2\r\n\n");
	assert_str(res.req.range, "bytes=1-2");
	result_free(&res);
}

static void test_captured_fields(void **state)
{
	(void)state;
	const char *s = "GET / HTTP/1.1\r\n"
			"HOST: h\r\n"
			"if-none-match: \"a\", W/\"b\"\r\n"
			"If-None-Match: \"second\"\r\n"
			"IF-MATCH:  \"m\", \"n\" \r\n"
			"If-Match: \"second\"\r\n"
			"if-unmodified-since: Thu, 01 Jan 1970 00:00:00 GMT\r\n"
			"If-Modified-Since:Sun, 06 Nov 1994 08:49:37 GMT\r\n"
			"RANGE: \t bytes=0-99 \t\r\n"
			"If-Range: \"a\"\r\n"
			"User-Agent: curl/8.0 (x\xff)\r\n"
			"Referer: http://r/\r\n"
			"X-Empty:\r\n"
			"X-Tab: a\tb\r\n"
			"\r\n";
	struct result res = expect_ok(s);

	assert_str(res.req.host, "h");
	/* The two list fields keep every line, in order. */
	assert_int_equal(res.req.if_none_match.n, 2);
	assert_str(res.req.if_none_match.line[0], "\"a\", W/\"b\"");
	assert_str(res.req.if_none_match.line[1], "\"second\"");
	assert_int_equal(res.req.if_match.n, 2);
	assert_str(res.req.if_match.line[0], "\"m\", \"n\"");
	assert_str(res.req.if_match.line[1], "\"second\"");
	assert_str(res.req.if_unmodified_since,
		   "Thu, 01 Jan 1970 00:00:00 GMT");
	assert_str(res.req.if_modified_since, "Sun, 06 Nov 1994 08:49:37 GMT");
	assert_str(res.req.range, "bytes=0-99");
	assert_str(res.req.if_range, "\"a\"");
	assert_str(res.req.user_agent, "curl/8.0 (x\xff)");
	assert_str(res.req.referer, "http://r/");
	result_free(&res);
}

#define DATE "Sun, 06 Nov 1994 08:49:37 GMT"

/* RFC 9110 5.3: a field that is not a list cannot come in two lines;
 * joined they would be one, which its readers ignore. */
static void test_single_value_fields_repeated(void **state)
{
	(void)state;
	const char *s = "GET / HTTP/1.1\r\nHost: h\r\n"
			"Range: bytes=0-1\r\nrange: bytes=0-1\r\n"
			"If-Range: \"a\"\r\nIf-Range: \"a\"\r\n"
			"If-Modified-Since: " DATE "\r\n"
			"If-Modified-Since: " DATE "\r\n"
			"If-Unmodified-Since:\r\n"
			"If-Unmodified-Since: " DATE "\r\n"
			"If-Unmodified-Since: " DATE "\r\n"
			"User-Agent: a\r\nUser-Agent: b\r\n\r\n";
	struct result res = expect_ok(s);

	assert_str(res.req.range, ",");
	assert_str(res.req.if_range, ",");
	assert_str(res.req.if_modified_since, ",");
	assert_str(res.req.if_unmodified_since, ",");
	assert_str(res.req.user_agent, "a"); /* for the log: the first */
	result_free(&res);
	/* An empty line adds nothing, as to a list. */
	res = expect_ok("GET / HTTP/1.1\r\nHost: h\r\nRange:\r\n"
			"Range: bytes=0-1\r\nIf-Modified-Since: \r\n"
			"If-Modified-Since: " DATE "\r\n\r\n");
	assert_str(res.req.range, "bytes=0-1");
	assert_str(res.req.if_modified_since, DATE);
	result_free(&res);
}

static void test_host_values(void **state)
{
	(void)state;
	struct result res =
		expect_ok("GET / HTTP/1.1\r\nHost:   [::1]:8080  \r\n\r\n");

	assert_str(res.req.host, "[::1]:8080");
	result_free(&res);
	expect_status("GET / HTTP/1.1\r\n\r\n", 400);
	expect_status("GET / HTTP/1.1\r\nHost:\r\n\r\n", 400);
	expect_status("GET / HTTP/1.1\r\nHost:   \r\n\r\n", 400);
	expect_status("GET / HTTP/1.1\r\nHost: a\r\nHost: a\r\n\r\n", 400);
	expect_status("GET / HTTP/1.1\r\nHost: a\r\nhost: b\r\n\r\n", 400);
	expect_status("GET / HTTP/1.1\r\nHost: a b\r\n\r\n", 400);
	expect_status("GET / HTTP/1.1\r\nHost: a/b\r\n\r\n", 400);
	expect_status("GET / HTTP/1.1\r\nHost: a\\b\r\n\r\n", 400);
	expect_status("GET / HTTP/1.1\r\nHost: u@h\r\n\r\n", 400);
	expect_status("GET / HTTP/1.1\r\nHost: h\"\r\n\r\n", 400);
	/* The request line is kept for the log even when the head fails. */
	res = parse("GET /x HTTP/1.1\r\n\r\n");
	assert_int_equal(res.r, HTTP_PARSE_ERROR);
	assert_str(res.req.request_line, "GET /x HTTP/1.1");
	result_free(&res);
}

static void test_absolute_form(void **state)
{
	(void)state;
	struct result res = expect_ok(
		"GET http://example.com/a/b?x HTTP/1.1\r\nHost: other\r\n\r\n");

	assert_str(res.req.target, "http://example.com/a/b?x");
	assert_str(res.req.path, "/a/b");
	assert_str(res.req.query, "x");
	assert_str(res.req.host, "example.com");
	result_free(&res);

	res = expect_ok(
		"GET HTTP://Example.com:8080 HTTP/1.1\r\nHost: x\r\n\r\n");
	assert_str(res.req.path, "/");
	assert_str(res.req.host, "Example.com:8080");
	result_free(&res);

	res = expect_ok("GET https://e?q HTTP/1.1\r\nHost: e\r\n\r\n");
	assert_str(res.req.path, "/");
	assert_str(res.req.query, "q");
	assert_str(res.req.host, "e");
	result_free(&res);

	res = expect_ok("GET http://e#f?q HTTP/1.1\r\nHost: e\r\n\r\n");
	assert_str(res.req.path, "/");
	assert_int_equal(res.req.query.n, 0);
	result_free(&res);

	/* 1.0 needs no Host: the authority stands in for it. */
	res = expect_ok("GET http://h/p HTTP/1.0\r\n\r\n");
	assert_true(res.req.has_host);
	assert_str(res.req.host, "h");
	assert_str(res.req.path, "/p");
	result_free(&res);

	/* 1.1 still needs the Host field (RFC 9112 3.2). */
	expect_status("GET http://h/p HTTP/1.1\r\n\r\n", 400);
	expect_status("GET ftp://h/p HTTP/1.1\r\nHost: h\r\n\r\n", 400);
	expect_status("GET http:///p HTTP/1.1\r\nHost: h\r\n\r\n", 400);
	expect_status("GET http://u:pw@h/p HTTP/1.1\r\nHost: h\r\n\r\n", 400);
	expect_status("GET http:/h/p HTTP/1.1\r\nHost: h\r\n\r\n", 400);
	expect_status("GET http HTTP/1.1\r\nHost: h\r\n\r\n", 400);
}

static void test_asterisk_and_authority_form(void **state)
{
	(void)state;
	struct result res = expect_ok("OPTIONS * HTTP/1.1\r\nHost: a\r\n\r\n");

	assert_int_equal(res.req.method, HTTP_METHOD_OTHER);
	assert_int_equal(res.req.path.n, 0);
	result_free(&res);
	expect_status("GET * HTTP/1.1\r\nHost: a\r\n\r\n", 400);
	expect_status("HEAD * HTTP/1.1\r\nHost: a\r\n\r\n", 400);
	expect_status("options * HTTP/1.1\r\nHost: a\r\n\r\n", 400);
	expect_status("OPTIONS ** HTTP/1.1\r\nHost: a\r\n\r\n", 400);

	res = expect_ok("CONNECT h:443 HTTP/1.1\r\nHost: h:443\r\n\r\n");
	assert_int_equal(res.req.method, HTTP_METHOD_OTHER);
	assert_int_equal(res.req.path.n, 0);
	result_free(&res);
	expect_status("CONNECT h/x HTTP/1.1\r\nHost: h\r\n\r\n", 400);
	expect_status("GET h:443 HTTP/1.1\r\nHost: h\r\n\r\n", 400);
	expect_status("GET index.html HTTP/1.1\r\nHost: h\r\n\r\n", 400);
}

/* ---- bad request lines ---- */

static void test_bad_request_lines(void **state)
{
	(void)state;
	static const char *const bad[] = {
		"GET  / HTTP/1.1\r\nHost: a\r\n\r\n", /* two SPs */
		" GET / HTTP/1.1\r\nHost: a\r\n\r\n", /* leading SP */
		"GET / HTTP/1.1 \r\nHost: a\r\n\r\n", /* trailing SP */
		"GET /  HTTP/1.1\r\nHost: a\r\n\r\n",
		"GET\t/ HTTP/1.1\r\nHost: a\r\n\r\n", /* HTAB separator */
		"GE(T / HTTP/1.1\r\nHost: a\r\n\r\n", /* not a token */
		"GET /\r\nHost: a\r\n\r\n",	      /* HTTP/0.9 */
		"GET\r\nHost: a\r\n\r\n",
		"GET / \r\n\r\n",
		"GET /a b HTTP/1.1\r\nHost: a\r\n\r\n", /* SP in target */
		"GET /a\x01 HTTP/1.1\r\nHost: a\r\n\r\n",
		"GET /a\x7f HTTP/1.1\r\nHost: a\r\n\r\n",
		"GET /a\tb HTTP/1.1\r\nHost: a\r\n\r\n",
		"GET / HTTP/1.1\rHost: a\r\n\r\n", /* bare CR */
		"GET / http/1.1\r\nHost: a\r\n\r\n",
		"GET / HTTP/1\r\nHost: a\r\n\r\n",
		"GET / HTTP/1.\r\nHost: a\r\n\r\n",
		"GET / HTTP/11.1\r\nHost: a\r\n\r\n",
		"GET / HTTP/1.10\r\nHost: a\r\n\r\n",
		"GET / HTTP/a.b\r\nHost: a\r\n\r\n",
		"GET / HTTP/1,1\r\nHost: a\r\n\r\n",
		"GET / XTTP/1.1\r\nHost: a\r\n\r\n",
		"GET / HTTP/1.1 extra\r\nHost: a\r\n\r\n",
		"\r\n\r\n\x01\r\n\r\n",
	};

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		struct result res = parse(bad[i]);

		if (res.r != HTTP_PARSE_ERROR || res.status != 400)
			fail_msg("case %zu: r=%d status=%d", i, res.r,
				 res.status);
		result_free(&res);
	}
}

static void test_nul_in_request_line(void **state)
{
	(void)state;
	static const char s[] = "GET /a\0b HTTP/1.1\r\nHost: a\r\n\r\n";
	struct result res = parse_n(s, sizeof(s) - 1, &lim_default);

	assert_int_equal(res.r, HTTP_PARSE_ERROR);
	assert_int_equal(res.status, 400);
	result_free(&res);
}

static void test_version_505(void **state)
{
	(void)state;
	expect_status("GET / HTTP/2.0\r\nHost: a\r\n\r\n", 505);
	expect_status("GET / HTTP/3.0\r\nHost: a\r\n\r\n", 505);
	expect_status("GET / HTTP/0.9\r\nHost: a\r\n\r\n", 505);
	expect_status("GET / HTTP/9.9\r\n\r\n", 505);
	/* Decided on the request line, without waiting for the fields. */
	struct result res = parse("GET / HTTP/2.0\r\n");

	assert_int_equal(res.r, HTTP_PARSE_ERROR);
	assert_int_equal(res.status, 505);
	result_free(&res);
}

static void test_early_rejection(void **state)
{
	(void)state;
	/* A TLS ClientHello or other binary is refused at its first byte,
	 * without waiting for a line end that may never come. */
	static const char tls[] = "\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03";
	struct result res = parse_n(tls, sizeof(tls) - 1, &lim_default);

	assert_int_equal(res.r, HTTP_PARSE_ERROR);
	assert_int_equal(res.status, 400);
	result_free(&res);

	res = parse("GET\t");
	assert_int_equal(res.r, HTTP_PARSE_ERROR);
	assert_int_equal(res.status, 400);
	result_free(&res);

	res = parse("GET / HTTP/1.1\rX");
	assert_int_equal(res.r, HTTP_PARSE_ERROR);
	assert_int_equal(res.status, 400);
	result_free(&res);
}

/* ---- bad header fields ---- */

static void test_bad_fields(void **state)
{
	(void)state;
	static const char *const bad[] = {
		"Host : a\r\n", /* whitespace before colon */
		"Host\t: a\r\n",
		"Host: a\r\nX-A : b\r\n",
		"Host: a\r\nX Y: z\r\n", /* space in name */
		"Host: a\r\n: v\r\n",	 /* empty name */
		"Host: a\r\nNoColon\r\n",
		"Host: a\r\nX(: b\r\n", /* not a token */
		"Host: a\r\nX\x01: b\r\n",
		"Host: a\r\nX: a\r\n b\r\n", /* obs-fold */
		"Host: a\r\nX: a\r\n\tb\r\n",
		" Host: a\r\n",		   /* whitespace before first field */
		"Host: a\r\nX: a\x01\r\n", /* control byte in value */
		"Host: a\r\nX: a\x7f\r\n",
		"Host: a\r\nX: a\x1b[0m\r\n",
		"Host: a\r\nX: a\rb\r\n", /* bare CR in value */
		"Host: a\r\nX: a\r",	  /* bare CR, then anything */
	};
	char buf[256];

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		snprintf(buf, sizeof(buf), "GET / HTTP/1.1\r\n%s\r\n", bad[i]);
		struct result res = parse(buf);

		if (res.r != HTTP_PARSE_ERROR || res.status != 400)
			fail_msg("case %zu: r=%d status=%d", i, res.r,
				 res.status);
		result_free(&res);
	}
}

static void test_nul_in_field_value(void **state)
{
	(void)state;
	static const char s[] = "GET / HTTP/1.1\r\nHost: a\r\nX: a\0b\r\n\r\n";
	struct result res = parse_n(s, sizeof(s) - 1, &lim_default);

	assert_int_equal(res.r, HTTP_PARSE_ERROR);
	assert_int_equal(res.status, 400);
	result_free(&res);
}

/* ---- Content-Length, Transfer-Encoding, smuggling ---- */

static void test_content_length(void **state)
{
	(void)state;
	struct result res = expect_ok(
		"GET / HTTP/1.1\r\nHost: a\r\nContent-Length: 0\r\n\r\n");

	assert_true(res.req.has_content_length);
	assert_int_equal(res.req.content_length, 0);
	assert_true(res.req.keep_alive);
	result_free(&res);

	res = expect_ok(
		"HEAD / HTTP/1.1\r\nHost: a\r\ncontent-length:  00 \r\n\r\n");
	assert_true(res.req.has_content_length);
	assert_int_equal(res.req.content_length, 0);
	result_free(&res);

	/* A body on another method parses, but the connection must close:
	 * the body is never read and would be taken for a request. */
	res = expect_ok(
		"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\n\r\n");
	assert_int_equal(res.req.content_length, 5);
	assert_false(res.req.keep_alive);
	result_free(&res);

	res = expect_ok("PUT / HTTP/1.1\r\nHost: a\r\n"
			"Content-Length: 18446744073709551615\r\n\r\n");
	assert_int_equal(res.req.content_length, UINT64_MAX);
	result_free(&res);

	static const char *const bad[] = {
		"GET / HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\n\r\n",
		"HEAD / HTTP/1.1\r\nHost: a\r\nContent-Length: 1\r\n\r\n",
		"GET / HTTP/1.0\r\nContent-Length: 1\r\n\r\n",
		"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: +5\r\n\r\n",
		"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: -1\r\n\r\n",
		"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 5, 5\r\n\r\n",
		"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 0x5\r\n\r\n",
		"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 1 0\r\n\r\n",
		"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 5a\r\n\r\n",
		"POST / HTTP/1.1\r\nHost: a\r\nContent-Length:\r\n\r\n",
		"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: \r\n\r\n",
		"POST / HTTP/1.1\r\nHost: a\r\n"
		"Content-Length: 18446744073709551616\r\n\r\n",
		"POST / HTTP/1.1\r\nHost: a\r\n"
		"Content-Length: 99999999999999999999999\r\n\r\n",
		/* CL.CL: duplicates are refused even when equal */
		"GET / HTTP/1.1\r\nHost: a\r\nContent-Length: 0\r\n"
		"Content-Length: 0\r\n\r\n",
		"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\n"
		"Content-Length: 6\r\n\r\n",
		"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\n"
		"content-length: 5\r\n\r\n",
		/* name with a space: must not be taken for another field */
		"POST / HTTP/1.1\r\nHost: a\r\nContent-Length : 5\r\n\r\n",
		"POST / HTTP/1.1\r\nHost: a\r\nContent Length: 5\r\n\r\n",
	};

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		res = parse(bad[i]);
		if (res.r != HTTP_PARSE_ERROR || res.status != 400)
			fail_msg("case %zu: r=%d status=%d", i, res.r,
				 res.status);
		result_free(&res);
	}
}

static void test_transfer_encoding(void **state)
{
	(void)state;
	static const char *const bad[] = {
		"GET / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n",
		"POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n",
		"GET / HTTP/1.1\r\nHost: a\r\ntransfer-encoding: identity\r\n\r\n",
		"GET / HTTP/1.1\r\nHost: a\r\nTRANSFER-ENCODING:\r\n\r\n",
		"GET / HTTP/1.0\r\nTransfer-Encoding: gzip, chunked\r\n\r\n",
		/* TE.CL and CL.TE */
		"POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n"
		"Content-Length: 4\r\n\r\n",
		"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 4\r\n"
		"Transfer-Encoding: chunked\r\n\r\n",
		"GET / HTTP/1.1\r\nHost: a\r\nContent-Length: 0\r\n"
		"Transfer-Encoding: chunked\r\n\r\n",
		/* obfuscated forms */
		"GET / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding : chunked\r\n\r\n",
		"GET / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding:\tchunked\r\n\r\n",
		"GET / HTTP/1.1\r\nHost: a\r\nX: y\r\n Transfer-Encoding: chunked\r\n\r\n",
	};

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		struct result res = parse(bad[i]);

		if (res.r != HTTP_PARSE_ERROR || res.status != 400)
			fail_msg("case %zu: r=%d status=%d", i, res.r,
				 res.status);
		result_free(&res);
	}
	/* A field merely resembling it is just another field. */
	struct result res = expect_ok(
		"GET / HTTP/1.1\r\nHost: a\r\nX-Transfer-Encoding: chunked\r\n\r\n");
	result_free(&res);
}

/* ---- limits ---- */

/* "GET /aaa...a HTTP/1.1" of exactly n bytes into buf. */
static void long_line(char *buf, size_t n)
{
	memcpy(buf, "GET /", 5);
	memset(buf + 5, 'a', n - 5 - 9);
	memcpy(buf + n - 9, " HTTP/1.1", 9);
	buf[n] = '\0';
}

static void test_request_line_limit(void **state)
{
	(void)state;
	const struct http_limits lim = {64, 1024, 10};
	char line[128], req[256];
	struct result res;

	long_line(line, 64);
	snprintf(req, sizeof(req), "%s\r\nHost: a\r\n\r\n", line);
	res = parse_n(req, strlen(req), &lim);
	assert_int_equal(res.r, HTTP_PARSE_OK);
	result_free(&res);

	long_line(line, 65);
	snprintf(req, sizeof(req), "%s\r\nHost: a\r\n\r\n", line);
	res = parse_n(req, strlen(req), &lim);
	assert_int_equal(res.r, HTTP_PARSE_ERROR);
	assert_int_equal(res.status, 414);
	result_free(&res);

	/* Without a line end yet: 64 bytes may still become a request... */
	res = parse_n(req, 64, &lim);
	assert_int_equal(res.r, HTTP_PARSE_INCOMPLETE);
	result_free(&res);
	/* ...65 may not, whatever follows. */
	res = parse_n(req, 65, &lim);
	assert_int_equal(res.r, HTTP_PARSE_ERROR);
	assert_int_equal(res.status, 414);
	result_free(&res);

	/* A CR right at the limit is still waiting for its LF. */
	long_line(line, 64);
	snprintf(req, sizeof(req), "%s\r", line);
	res = parse_n(req, strlen(req), &lim);
	assert_int_equal(res.r, HTTP_PARSE_INCOMPLETE);
	result_free(&res);

	/* Leading empty lines do not count against the request line. */
	snprintf(req, sizeof(req), "\r\n\r\n%s\r\nHost: a\r\n\r\n", line);
	res = parse_n(req, strlen(req), &lim);
	assert_int_equal(res.r, HTTP_PARSE_OK);
	result_free(&res);

	/* Nor do field lines, which only the head limit bounds. */
	snprintf(req, sizeof(req), "GET / HTTP/1.1\r\nHost: a\r\nX: %s\r\n\r\n",
		 line);
	res = parse_n(req, strlen(req), &lim);
	assert_int_equal(res.r, HTTP_PARSE_OK);
	result_free(&res);
}

/* With both limits equal (allowed: max_request_line <= max_header_bytes)
 * a request line too long is still 414, not 431; one that fits exactly
 * leaves no room for the rest of the head, which is 431. */
static void test_request_line_limit_at_head_limit(void **state)
{
	(void)state;
	const struct http_limits lim = {64, 64, 10};
	char line[128], req[256];
	struct result res;

	long_line(line, 80);
	snprintf(req, sizeof(req), "%s\r\nHost: a\r\n\r\n", line);
	res = parse_n(req, strlen(req), &lim);
	assert_int_equal(res.r, HTTP_PARSE_ERROR);
	assert_int_equal(res.status, 414);
	result_free(&res);

	long_line(line, 64);
	snprintf(req, sizeof(req), "%s\r\nHost: a\r\n\r\n", line);
	res = parse_n(req, strlen(req), &lim);
	assert_int_equal(res.r, HTTP_PARSE_ERROR);
	assert_int_equal(res.status, 431);
	result_free(&res);
}

static void test_header_bytes_limit(void **state)
{
	(void)state;
	const char *s = "GET / HTTP/1.1\r\nHost: a\r\nX: 0123456789\r\n\r\n";
	size_t n = strlen(s);
	struct http_limits lim = {64, n, 10};
	struct result res;

	/* Exactly at the limit, final CRLF included. */
	res = parse_n(s, n, &lim);
	assert_int_equal(res.r, HTTP_PARSE_OK);
	assert_int_equal(res.req.head_len, n);
	result_free(&res);

	/* One byte less allowed: the final LF crosses it. */
	lim.max_header_bytes = n - 1;
	res = parse_n(s, n, &lim);
	assert_int_equal(res.r, HTTP_PARSE_ERROR);
	assert_int_equal(res.status, 431);
	result_free(&res);

	/* An unterminated head is refused once it passes the limit. */
	lim.max_header_bytes = 20;
	res = parse_n(s, 20, &lim);
	assert_int_equal(res.r, HTTP_PARSE_INCOMPLETE);
	result_free(&res);
	res = parse_n(s, 21, &lim);
	assert_int_equal(res.r, HTTP_PARSE_ERROR);
	assert_int_equal(res.status, 431);
	result_free(&res);

	/* Empty lines before the request cannot go on forever. */
	char crlf[200];

	for (size_t i = 0; i < sizeof(crlf); i += 2)
		memcpy(crlf + i, "\r\n", 2);
	lim.max_header_bytes = 100;
	res = parse_n(crlf, sizeof(crlf), &lim);
	assert_int_equal(res.r, HTTP_PARSE_ERROR);
	assert_int_equal(res.status, 431);
	result_free(&res);
	res = parse_n(crlf, 100, &lim);
	assert_int_equal(res.r, HTTP_PARSE_INCOMPLETE);
	result_free(&res);
	/* An odd limit falls between CR and LF. */
	lim.max_header_bytes = 101;
	res = parse_n(crlf, 102, &lim);
	assert_int_equal(res.r, HTTP_PARSE_ERROR);
	assert_int_equal(res.status, 431);
	result_free(&res);
	res = parse_n(crlf, 101, &lim);
	assert_int_equal(res.r, HTTP_PARSE_INCOMPLETE);
	result_free(&res);

	/* Zero allows nothing. */
	lim.max_header_bytes = 0;
	res = parse_n("G", 1, &lim);
	assert_int_equal(res.r, HTTP_PARSE_ERROR);
	assert_int_equal(res.status, 431);
	result_free(&res);
}

static void test_header_count_limit(void **state)
{
	(void)state;
	const struct http_limits lim = {64, 4096, 3};
	const char *three = "GET / HTTP/1.1\r\nHost: a\r\nA: 1\r\nB: 2\r\n\r\n";
	const char *four =
		"GET / HTTP/1.1\r\nHost: a\r\nA: 1\r\nB: 2\r\nC: 3\r\n\r\n";
	struct result res;

	res = parse_n(three, strlen(three), &lim);
	assert_int_equal(res.r, HTTP_PARSE_OK);
	result_free(&res);
	res = parse_n(four, strlen(four), &lim);
	assert_int_equal(res.r, HTTP_PARSE_ERROR);
	assert_int_equal(res.status, 431);
	result_free(&res);
	/* Decided when the extra field line ends. */
	res = parse_n(four, strlen(four) - 2, &lim);
	assert_int_equal(res.r, HTTP_PARSE_ERROR);
	assert_int_equal(res.status, 431);
	result_free(&res);
}

/* ---- incomplete input, splitting, pipelining ---- */

static void test_incomplete(void **state)
{
	(void)state;
	static const char *const partial[] = {
		"",
		"\r",
		"\r\n",
		"G",
		"GET / HTTP/1.1",
		"GET / HTTP/1.1\r",
		"GET / HTTP/1.1\r\n",
		"GET / HTTP/1.1\r\nHost: a",
		"GET / HTTP/1.1\r\nHost: a\r\n",
		"GET / HTTP/1.1\r\nHost: a\r\n\r",
	};

	for (size_t i = 0; i < sizeof(partial) / sizeof(partial[0]); i++) {
		struct result res = parse(partial[i]);

		if (res.r != HTTP_PARSE_INCOMPLETE)
			fail_msg("case %zu: r=%d", i, res.r);
		result_free(&res);
	}
}

static void test_split_good(void **state)
{
	(void)state;
	static const char *const good[] = {
		"GET / HTTP/1.1\r\nHost: a\r\n\r\n",
		"\r\n\nHEAD /x?y HTTP/1.0\nConnection: keep-alive\n\n",
		("GET http://h/p HTTP/1.1\r\nHost: h\r\nRange: bytes=0-1\r\n"
		 "If-None-Match: \"x\"\r\nContent-Length: 0\r\n\r\n"),
		"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 10\r\n\r\n",
	};

	for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++) {
		struct result res = expect_ok(good[i]);

		result_free(&res);
		check_prefixes(good[i], strlen(good[i]), &lim_default, true);
	}
}

static void test_split_bad(void **state)
{
	(void)state;
	static const char *const bad[] = {
		"GET / HTTP/2.0\r\nHost: a\r\n\r\n",
		"GET / HTTP/1.1\r\n\r\n",
		"GET / HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n",
		"GET / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n",
		"GET / HTTP/1.1\r\nHost: a\r\nX: 1\r\n y\r\n\r\n",
		"GET / HTTP/1.1\rHost: a\r\n\r\n",
		"\x16\x03\x01\x02\x00",
		"GET /aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
		"aaaaaaa HTTP/1.1\r\nHost: a\r\n\r\n",
		"GET / HTTP/1.1\r\nHost: a\r\nA: 1\r\nB: 2\r\nC: 3\r\n\r\n",
		"GET / HTTP/1.1\r\nHost: a\r\nX: 012345678901234567890123456789"
		"01234567890123456789\r\n\r\n",
	};
	const struct http_limits lim = {64, 80, 3};

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		struct result res = parse_n(bad[i], strlen(bad[i]), &lim);

		if (res.r != HTTP_PARSE_ERROR)
			fail_msg("case %zu: r=%d", i, res.r);
		result_free(&res);
		check_prefixes(bad[i], strlen(bad[i]), &lim, false);
	}
}

/* A head is judged by the limits of its first piece: a reload that
 * changes them between two pieces changes only the next head's. */
static void test_limits_fixed_at_head_start(void **state)
{
	(void)state;
	/* The rest would fail the tight limits if judged by them. */
	static const char *const first[] = {
		"GET /aaaaaaaaaa",
		"GET / HTTP/1.1\r\nHost: a\r\n",
	};
	static const char *const rest[] = {
		"aaaaaaaaaaaaaa HTTP/1.1\r\nHost: a\r\n\r\n",
		"A: 1\r\nB: 2\r\n\r\n",
	};
	const struct http_limits tight = {20, 1000, 1};

	for (size_t i = 0; i < 2; i++) {
		struct http_parse_state st = {0};
		struct http_request req;
		char buf[128];
		size_t n1 = strlen(first[i]), n = n1 + strlen(rest[i]);
		int status = -1;

		memcpy(buf, first[i], n1);
		memcpy(buf + n1, rest[i], n - n1);
		assert_int_equal(http_parse_more(buf, n1, &lim_default, &req,
						 &status, &st),
				 HTTP_PARSE_INCOMPLETE);
		assert_int_equal(http_parse_more(buf, n, &tight, &req, &status,
						 &st),
				 HTTP_PARSE_OK);
		assert_int_equal(req.head_len, n);
		/* The next head starts under the new ones. */
		memset(&st, 0, sizeof(st));
		assert_int_equal(http_parse_more(buf, n, &tight, &req, &status,
						 &st),
				 HTTP_PARSE_ERROR);
		assert_int_equal(status, i == 0 ? 414 : 431);
	}
}

static void test_pipelined(void **state)
{
	(void)state;
	const char *s =
		"GET /one HTTP/1.1\r\nHost: a\r\n\r\n"
		"HEAD /two HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n"
		"GET /thr";
	struct result res = parse(s);
	size_t off;

	assert_int_equal(res.r, HTTP_PARSE_OK);
	assert_str(res.req.path, "/one");
	assert_true(res.req.keep_alive);
	off = res.req.head_len;
	assert_int_equal(off, strlen("GET /one HTTP/1.1\r\nHost: a\r\n\r\n"));
	result_free(&res);

	res = parse_n(s + off, strlen(s) - off, &lim_default);
	assert_int_equal(res.r, HTTP_PARSE_OK);
	assert_int_equal(res.req.method, HTTP_METHOD_HEAD);
	assert_str(res.req.path, "/two");
	assert_false(res.req.keep_alive);
	off += res.req.head_len;
	result_free(&res);

	res = parse_n(s + off, strlen(s) - off, &lim_default);
	assert_int_equal(res.r, HTTP_PARSE_INCOMPLETE);
	result_free(&res);

	/* The first request's answer does not depend on what follows. */
	check_prefixes(s, strlen(s), &lim_default, false);
}

/* A request line refused before it ends keeps what was read of it, through
 * the byte that refused it, for the access log; one refused after it ended
 * keeps the whole line. */
static void test_request_line_kept_on_error(void **state)
{
	static const struct {
		const char *in;
		int status;
		const char *line;
	} cases[] = {
		{ "\x16\x03\x01\x00", 400, "\x16" },
		{ "G\x7f" "ET / HTTP/1.1\r\nHost: a\r\n\r\n", 400, "G\x7f" },
		{ "GET /a\rb HTTP/1.1\r\n\r\n", 400, "GET /a\r" },
		{ "\r\nGET / HTTP/1.1\rX", 400, "GET / HTTP/1.1\r" },
		{ "GET / HTTP/9.1\r\nHost: a\r\n\r\n", 505, "GET / HTTP/9.1" },
	};
	char long_line[9000];
	struct result res;

	(void)state;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		res = parse(cases[i].in);
		assert_int_equal(res.r, HTTP_PARSE_ERROR);
		assert_int_equal(res.status, cases[i].status);
		assert_str(res.req.request_line, cases[i].line);
		result_free(&res);
	}
	memset(long_line, 'L', sizeof(long_line));
	memcpy(long_line, "GET /", 5);
	res = parse_n(long_line, sizeof(long_line), &lim_default);
	assert_int_equal(res.status, 414);
	assert_int_equal(res.req.request_line.n,
			 lim_default.max_request_line + 1);
	assert_memory_equal(res.req.request_line.p, "GET /LL", 7);
	result_free(&res);
}

static void test_str_eq_ci(void **state)
{
	(void)state;
	struct http_str s = {"Keep-Alive", 10};

	assert_true(http_str_eq_ci(s, "keep-alive"));
	assert_true(http_str_eq_ci(s, "KEEP-ALIVE"));
	assert_false(http_str_eq_ci(s, "keep-aliv"));
	assert_false(http_str_eq_ci(s, "keep-alive2"));
	assert_false(http_str_eq_ci(s, "keep_alive"));
	s.n = 0;
	assert_true(http_str_eq_ci(s, ""));
	assert_false(http_str_eq_ci(s, "k"));
	/* Only ASCII letters fold: '@' is not '`' and '[' is not '{'. */
	struct http_str t = {"@[", 2};

	assert_false(http_str_eq_ci(t, "`{"));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_simple_get),
		cmocka_unit_test(test_head_and_other_methods),
		cmocka_unit_test(test_path_query_fragment),
		cmocka_unit_test(test_http10),
		cmocka_unit_test(test_host_syntax),
		cmocka_unit_test(test_connection_11),
		cmocka_unit_test(test_version_minor_above_1),
		cmocka_unit_test(test_leading_empty_lines),
		cmocka_unit_test(test_empty_lines_prefix),
		cmocka_unit_test(test_bare_lf),
		cmocka_unit_test(test_captured_fields),
		cmocka_unit_test(test_single_value_fields_repeated),
		cmocka_unit_test(test_host_values),
		cmocka_unit_test(test_absolute_form),
		cmocka_unit_test(test_asterisk_and_authority_form),
		cmocka_unit_test(test_bad_request_lines),
		cmocka_unit_test(test_nul_in_request_line),
		cmocka_unit_test(test_version_505),
		cmocka_unit_test(test_early_rejection),
		cmocka_unit_test(test_bad_fields),
		cmocka_unit_test(test_nul_in_field_value),
		cmocka_unit_test(test_content_length),
		cmocka_unit_test(test_transfer_encoding),
		cmocka_unit_test(test_request_line_limit),
		cmocka_unit_test(test_request_line_limit_at_head_limit),
		cmocka_unit_test(test_header_bytes_limit),
		cmocka_unit_test(test_header_count_limit),
		cmocka_unit_test(test_incomplete),
		cmocka_unit_test(test_split_good),
		cmocka_unit_test(test_split_bad),
		cmocka_unit_test(test_limits_fixed_at_head_start),
		cmocka_unit_test(test_pipelined),
		cmocka_unit_test(test_request_line_kept_on_error),
		cmocka_unit_test(test_str_eq_ci),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
