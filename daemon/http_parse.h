/* SPDX-License-Identifier: MIT */
/*
 * HTTP/1.x request-head parser (RFC 9112). Pure: no I/O, no allocation.
 * The request refers into the caller's buffer, which must stay unchanged
 * while the request is in use.
 */
#ifndef ORCD_HTTP_PARSE_H
#define ORCD_HTTP_PARSE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct http_str {
	const char *p;
	size_t n;
};

/*
 * A list field (RFC 9110 5.6.1) that may come in several field lines: the
 * lines' values in order, to be read as one list joined by commas (5.3).
 * Empty lines add nothing; lines past HTTP_LIST_LINES are not kept (a
 * reader of the list treats them as absent and must stay safe so). Two:
 * a third line is rare, and two keep struct uconn in the cache lines it
 * had with one.
 */
#define HTTP_LIST_LINES 2
struct http_list {
	struct http_str line[HTTP_LIST_LINES];
	unsigned n; /* lines kept; 0: the field is absent */
};

enum http_method {
	HTTP_METHOD_GET,
	HTTP_METHOD_HEAD,
	/* A method RFC 9110 or RFC 5789 (PATCH) defines, which a file does
	 * not allow: 405 with Allow. */
	HTTP_METHOD_OTHER,
	/* Any other token: a method orcd does not know (RFC 9110 9.1), 501.
	 * Methods are case-sensitive: "get" is one of these. */
	HTTP_METHOD_UNKNOWN,
};

struct http_limits {
	size_t max_request_line; /* bytes, without CRLF; over -> 414 */
	size_t max_header_bytes; /* whole head incl. request line; over -> 431 */
	unsigned max_headers;    /* header field count; over -> 431 */
};

/* "," : neither a date, nor a range, nor an entity-tag. */
extern const struct http_str HTTP_FIELD_REPEATED;

struct http_request {
	enum http_method method;
	/* The request line without its terminator, set as soon as it is
	 * complete (also when parsing fails later), for the log. */
	struct http_str request_line;
	struct http_str method_str;
	struct http_str target; /* request-target as sent */
	struct http_str path;   /* target up to '?' or '#', still encoded */
	struct http_str query;  /* after '?', up to '#'; n == 0 if none */
	int version_minor;      /* 0 or 1 (major is always 1 once parsed) */
	bool keep_alive;        /* after version defaults and Connection */
	bool has_host;
	struct http_str host;
	/* Field values with surrounding whitespace trimmed; n == 0 if absent.
	 * Of a repeated User-Agent or Referer the first counts. The four
	 * fields that take one value (RFC 9110 13.1.3-13.1.5, 14.2), in
	 * several lines, read as HTTP_FIELD_REPEATED: joined, they would be
	 * a list, which none of them may be, and their readers ignore it. */
	struct http_list if_match;
	struct http_str if_unmodified_since;
	struct http_list if_none_match;
	struct http_str if_modified_since;
	struct http_str range;
	struct http_str if_range;
	struct http_str user_agent;
	struct http_str referer;
	bool has_content_length;
	uint64_t content_length;
	size_t head_len; /* bytes of the head incl. the final empty line */
};

enum http_parse_result {
	HTTP_PARSE_OK = 0,         /* req filled, req->head_len bytes consumed */
	HTTP_PARSE_INCOMPLETE = 1, /* need more bytes (nothing is wrong yet) */
	HTTP_PARSE_ERROR = 2,      /* *status is the HTTP status to answer */
};

/*
 * Parse one request head from buf[0..len).
 * On HTTP_PARSE_ERROR *status is one of:
 *   400 malformed request line / header, missing Host in 1.1, bad or
 *       duplicate Content-Length, any Transfer-Encoding, a body on
 *       GET/HEAD (Content-Length > 0), obs-fold, whitespace before colon
 *   414 request line longer than lim->max_request_line
 *   431 head larger than lim->max_header_bytes or more fields than
 *       lim->max_headers
 *   505 HTTP version other than 1.x (e.g. HTTP/2.0; HTTP/0.9 style
 *       request lines without a version are 400). HTTP/1.2 and later
 *       minors are handled as 1.1 (RFC 9110 section 2.5).
 * An error response must always close the connection. On error the
 * fields parsed before the failure stay set (request_line, method,
 * version_minor: 1 until known) so the caller can log them.
 * keep_alive is false when Content-Length > 0: the body is never read.
 * Leading empty lines (CRLF) before the request line are skipped (RFC 9112
 * section 2.2) and counted in head_len. Bare LF line endings are accepted.
 */
enum http_parse_result http_parse_request(const char *buf, size_t len,
					  const struct http_limits *lim,
					  struct http_request *req,
					  int *status);

/*
 * Where a parse that ran out of input stopped: the next call with more of
 * the same head (the same buffer, longer) goes on from there, so a head
 * that trickles in is scanned once, not once per arrival. All zero for a
 * new head; a head that ends (OK or ERROR) needs zeroing before the next.
 */
struct http_parse_state {
	/* The limits the head is judged by, whatever later calls pass (a
	 * reload between two pieces changes only the next head's). */
	struct http_limits lim;
	unsigned char phase; /* before, in the request line, in the fields */
	bool in_method;      /* the request line's method is being scanned */
	size_t line;	     /* where the line being scanned begins */
	size_t scan;	     /* its first byte not yet looked at */
	size_t looked;	     /* bytes looked at for line ends, all calls */
	unsigned fields;
	bool host_field;      /* a Host header field was seen */
	bool conn_close;      /* Connection: close */
	bool conn_keep_alive; /* Connection: keep-alive */
	bool absolute_form;
	struct http_str authority; /* from an absolute-form target */
};

/* http_parse_request() going on from *st: the same outcome at every
 * length, and req is filled across the calls (set up at the first, as
 * the limits are: lim is read only then). */
enum http_parse_result http_parse_more(const char *buf, size_t len,
				       const struct http_limits *lim,
				       struct http_request *req, int *status,
				       struct http_parse_state *st);

/* How many bytes at the start of buf are whole empty lines (CRLF or a
 * bare LF): what RFC 9112 2.2 lets a server ignore before a request line,
 * e.g. the stray CRLF some clients send after a request. */
size_t http_empty_lines(const char *buf, size_t len);

/* Case-insensitive comparison of s with the NUL-terminated lit. */
bool http_str_eq_ci(struct http_str s, const char *lit);
/* Whether c may be in a token (tchar, RFC 9110 section 5.6.2). */
bool http_tchar(unsigned char c);

#endif
