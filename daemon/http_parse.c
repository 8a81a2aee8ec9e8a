// SPDX-License-Identifier: MIT
/*
 * HTTP/1.x request-head parser (RFC 9112).
 *
 * The caller passes everything received so far. Every outcome is decided
 * at one byte position, in order: a limit fails at the first byte past
 * it, a method byte is checked as it arrives, a line is judged when its
 * end arrives. The parser returns INCOMPLETE only when it runs out of
 * input before any decision. So every prefix of a request gets either
 * INCOMPLETE or exactly the answer of the whole request, and no input can
 * keep it asking for more once a limit is passed. It is also why a parse
 * can go on where the last one ran out (http_parse_more(), with the
 * state it left): nothing before that point can change its answer, and a
 * head sent a byte at a time costs one scan, not one per byte.
 *
 * It is strict where leniency lets two parsers disagree about message
 * boundaries (RFC 9112 section 11.2): any Transfer-Encoding, a duplicate
 * or non-digit Content-Length, obs-fold and whitespace before the colon
 * are all 400.
 */
#include <arpa/inet.h>
#include <ctype.h>
#include <string.h>

#include "http_parse.h"

struct parse_ctx {
	const char *buf;
	size_t len;
	const struct http_limits *lim;
	struct http_request *req;
	int *status;
	struct http_parse_state *st;
};

/* http_parse_state.phase */
enum { PH_NEW, PH_LEADING, PH_REQUEST_LINE, PH_FIELDS };

bool http_tchar(unsigned char c)
{
	if ((c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') ||
	    (c >= 'A' && c <= 'Z'))
		return true;
	return c != '\0' && strchr("!#$%&'*+-.^_`|~", c) != NULL;
}

/* field-vchar / SP / HTAB, RFC 9110 section 5.5 (obs-text allowed). */
static bool is_field_byte(unsigned char c)
{
	return c == '\t' || (c >= 0x20 && c != 0x7f);
}

static bool is_ows(char c)
{
	return c == ' ' || c == '\t';
}

static unsigned char lower(unsigned char c)
{
	return (c >= 'A' && c <= 'Z') ? (unsigned char)(c + 32) : c;
}

size_t http_empty_lines(const char *buf, size_t len)
{
	size_t pos = 0;

	for (;;) {
		if (pos < len && buf[pos] == '\n')
			pos++;
		else if (pos + 1 < len && buf[pos] == '\r' &&
			 buf[pos + 1] == '\n')
			pos += 2;
		else
			return pos;
	}
}

bool http_str_eq_ci(struct http_str s, const char *lit)
{
	size_t i;

	for (i = 0; i < s.n; i++)
		if (lit[i] == '\0' || lower((unsigned char)s.p[i]) !=
					      lower((unsigned char)lit[i]))
			return false;
	return lit[i] == '\0';
}

static struct http_str str(const char *p, size_t n)
{
	struct http_str s = {p, n};

	return s;
}

static struct http_str trim_ows(struct http_str s)
{
	while (s.n && is_ows(s.p[0])) {
		s.p++;
		s.n--;
	}
	while (s.n && is_ows(s.p[s.n - 1]))
		s.n--;
	return s;
}

static enum http_parse_result fail(struct parse_ctx *c, int status)
{
	*c->status = status;
	return HTTP_PARSE_ERROR;
}

/* A request line refused before it ended: request_line is what was read
 * of it, through the byte at i that refused it, so that the access log
 * shows what the client sent (a TLS hello, say), as nginx's $request. */
static enum http_parse_result fail_in_line(struct parse_ctx *c,
					   bool request_line, size_t i,
					   int status)
{
	size_t start = c->st->line;

	if (request_line)
		c->req->request_line = str(c->buf + start, i + 1 - start);
	return fail(c, status);
}

/*
 * Find the end of the line that begins at st->line, looking at bytes from
 * st->scan on (what an earlier call looked at is not looked at again).
 * Bare LF ends a line as well as CRLF; a CR followed by anything else is
 * an error. On success [st->line, *end) is the line without its
 * terminator and *next is where the next one begins.
 */
static enum http_parse_result scan_line(struct parse_ctx *c, bool request_line,
					size_t *end, size_t *next)
{
	struct http_parse_state *st = c->st;
	size_t start = st->line;
	size_t i;

	for (i = st->scan;; i++) {
		unsigned char ch;

		if (i >= c->len) {
			st->scan = i;
			return HTTP_PARSE_INCOMPLETE;
		}
		ch = (unsigned char)c->buf[i];
		/* Before the head's limit: with max_request_line equal to
		 * max_header_bytes a long line is still a long URI. */
		if (request_line && i - start >= c->lim->max_request_line &&
		    ch != '\r' && ch != '\n')
			return fail_in_line(c, request_line, i, 414);
		if (i >= c->lim->max_header_bytes)
			return fail_in_line(c, request_line, i, 431);
		st->looked++;
		if (ch == '\n') {
			*end = i;
			*next = i + 1;
			return HTTP_PARSE_OK;
		}
		if (ch == '\r') {
			if (i + 1 >= c->len) {
				st->scan = i; /* its LF is still to come */
				return HTTP_PARSE_INCOMPLETE;
			}
			if (i + 1 >= c->lim->max_header_bytes)
				return fail_in_line(c, request_line, i, 431);
			if (c->buf[i + 1] != '\n')
				return fail_in_line(c, request_line, i, 400);
			*end = i;
			*next = i + 2;
			return HTTP_PARSE_OK;
		}
		/* Judge the method byte by byte so that a client speaking
		 * something else (a TLS hello, say) is refused at once. */
		if (st->in_method) {
			if (ch == ' ') {
				st->in_method = false;
				/* Known before the line ends: the answer to a
				 * HEAD whose line never does (414) has no body
				 * either. */
				if (i - start == 4 &&
				    memcmp(c->buf + start, "HEAD", 4) == 0)
					c->req->method = HTTP_METHOD_HEAD;
			} else if (!http_tchar(ch)) {
				return fail_in_line(c, true, i, 400);
			}
		}
	}
}

/* The next line begins at pos: nothing of it looked at yet. */
static void line_at(struct http_parse_state *st, size_t pos)
{
	st->line = pos;
	st->scan = pos;
}

/* "HTTP/1.1" -> 1, "HTTP/1.0" -> 0, other "HTTP/d.d" -> -505, else -400. */
static int parse_version(struct http_str v)
{
	if (v.n != 8 || memcmp(v.p, "HTTP/", 5) != 0 || v.p[6] != '.' ||
	    v.p[5] < '0' || v.p[5] > '9' || v.p[7] < '0' || v.p[7] > '9')
		return -400;
	if (v.p[5] != '1')
		return -505;
	/* RFC 9110 section 2.5: a higher minor version of a major version
	 * we implement is processed as the highest one we know. */
	return v.p[7] == '0' ? 0 : 1;
}

static bool all_digits(const char *p, size_t n)
{
	size_t i;

	for (i = 0; i < n; i++)
		if (p[i] < '0' || p[i] > '9')
			return false;
	return true;
}

/* What RFC 3986 (3.2.2) allows between an IP literal's brackets: an
 * IPv6 address (inet_pton's grammar is the RFC's, without zone ids), or
 * IPvFuture, "v" 1*HEXDIG "." 1*( unreserved / sub-delims / ":" ). */
static bool valid_ip_literal(const char *p, size_t n)
{
	char buf[INET6_ADDRSTRLEN];
	struct in6_addr addr;
	size_t i = 1;

	if (n && (p[0] == 'v' || p[0] == 'V')) {
		while (i < n && isxdigit((unsigned char)p[i]))
			i++;
		if (i == 1 || i + 1 >= n || p[i] != '.')
			return false;
		for (i++; i < n; i++)
			if (!isalnum((unsigned char)p[i]) &&
			    (p[i] == '\0' || !strchr("-._~!$&'()*+,;=:", p[i])))
				return false;
		return true;
	}
	if (n >= sizeof(buf))
		return false;
	memcpy(buf, p, n);
	buf[n] = '\0';
	return inet_pton(AF_INET6, buf, &addr) == 1;
}

/* uri-host [ ":" port ] without userinfo (RFC 9112 section 3.2, RFC 3986
 * section 3.2.2): an IP literal in brackets, or a reg-name/IPv4 of the
 * bytes such a host may carry, each '%' starting a percent-encoded byte,
 * so the value is safe to log or echo; the port, when present, is digits
 * only. RFC 9112 3.2: any other Host is a 400. */
static bool valid_authority(struct http_str a)
{
	const char *colon;
	size_t i, host_n;

	if (a.n == 0)
		return false;
	if (a.p[0] == '[') {
		const char *end = memchr(a.p, ']', a.n);

		if (!end || !valid_ip_literal(a.p + 1, (size_t)(end - a.p) - 1))
			return false;
		host_n = (size_t)(end - a.p) + 1;
		if (host_n == a.n)
			return true;
		return a.p[host_n] == ':' &&
		       all_digits(a.p + host_n + 1, a.n - host_n - 1);
	}
	colon = memchr(a.p, ':', a.n);
	host_n = colon ? (size_t)(colon - a.p) : a.n;
	if (host_n == 0)
		return false;
	for (i = 0; i < host_n; i++) {
		unsigned char ch = (unsigned char)a.p[i];

		if (isalnum(ch))
			continue;
		if (ch == '%' && i + 2 < host_n &&
		    isxdigit((unsigned char)a.p[i + 1]) &&
		    isxdigit((unsigned char)a.p[i + 2])) {
			i += 2;
			continue;
		}
		if (ch == '\0' || !strchr("-._~!$&'()*+,;=", ch))
			return false;
	}
	return !colon || all_digits(colon + 1, a.n - host_n - 1);
}

/* The path of an origin-form target, up to '?' or '#', and its query,
 * between '?' and '#' (a fragment is not for the server, though some
 * clients send one). */
static void split_target(struct http_request *req, const char *p, size_t n)
{
	size_t i, q;

	for (i = 0; i < n && p[i] != '?' && p[i] != '#'; i++)
		;
	req->path = str(p, i);
	if (i == n || p[i] != '?')
		return;
	for (q = ++i; q < n && p[q] != '#'; q++)
		;
	req->query = str(p + i, q - i);
}

/*
 * Absolute-form (RFC 9112 section 3.2.2), as a proxy or an old client may
 * send it: "http://host/path?q". A server must accept it; we serve its
 * path and take the authority as the host, ignoring the Host field.
 */
static int parse_absolute_form(struct parse_ctx *c, struct http_str t)
{
	static const char root[] = "/";
	size_t skip, i;

	if (t.n >= 7 && http_str_eq_ci(str(t.p, 7), "http://"))
		skip = 7;
	else if (t.n >= 8 && http_str_eq_ci(str(t.p, 8), "https://"))
		skip = 8;
	else
		return 400;
	for (i = skip;
	     i < t.n && t.p[i] != '/' && t.p[i] != '?' && t.p[i] != '#'; i++)
		;
	c->st->authority = str(t.p + skip, i - skip);
	/* userinfo ("user@host") is deprecated and a phishing tool: RFC
	 * 9110 section 4.2.4 says to treat it as an error. */
	if (!valid_authority(c->st->authority))
		return 400;
	c->st->absolute_form = true;
	split_target(c->req, t.p + i, t.n - i);
	if (i == t.n || t.p[i] != '/')
		c->req->path = str(root, 1);
	return 0;
}

static int parse_target(struct parse_ctx *c, struct http_str t)
{
	struct http_request *req = c->req;
	size_t i;

	/* Control bytes, SP and DEL never belong in a target; bytes above
	 * 0x7f are not URI characters either, but clients send raw UTF-8
	 * and the resolver decodes the path anyway, so we let them pass. */
	for (i = 0; i < t.n; i++) {
		unsigned char ch = (unsigned char)t.p[i];

		if (ch <= 0x20 || ch == 0x7f)
			return 400;
	}
	if (t.p[0] == '/') {
		split_target(req, t.p, t.n);
		return 0;
	}
	if (t.n == 1 && t.p[0] == '*') {
		/* asterisk-form is only for OPTIONS (RFC 9112 3.2.4); it
		 * names no path, and OPTIONS itself is answered 405. */
		if (req->method_str.n != 7 ||
		    memcmp(req->method_str.p, "OPTIONS", 7) != 0)
			return 400;
		req->path = str(t.p, 0);
		return 0;
	}
	if (req->method_str.n == 7 &&
	    memcmp(req->method_str.p, "CONNECT", 7) == 0) {
		/* authority-form: no path; CONNECT is answered 405. */
		if (!valid_authority(t))
			return 400;
		req->path = str(t.p, 0);
		return 0;
	}
	return parse_absolute_form(c, t);
}

static enum http_method method_of(struct http_str m)
{
	static const char *const other[] = {"POST",    "PUT",   "DELETE",
					    "CONNECT", "OPTIONS", "TRACE",
					    "PATCH"};

	if (m.n == 3 && memcmp(m.p, "GET", 3) == 0)
		return HTTP_METHOD_GET;
	if (m.n == 4 && memcmp(m.p, "HEAD", 4) == 0)
		return HTTP_METHOD_HEAD;
	for (size_t i = 0; i < sizeof(other) / sizeof(other[0]); i++)
		if (m.n == strlen(other[i]) && memcmp(m.p, other[i], m.n) == 0)
			return HTTP_METHOD_OTHER;
	return HTTP_METHOD_UNKNOWN;
}

static enum http_parse_result parse_request_line(struct parse_ctx *c, size_t s,
						 size_t e)
{
	struct http_request *req = c->req;
	const char *line = c->buf + s, *sp1, *sp2;
	size_t n = e - s;
	int v, st;

	req->request_line = str(line, n);
	sp1 = memchr(line, ' ', n);
	if (!sp1 || sp1 == line)
		return fail(c, 400);
	req->method_str = str(line, (size_t)(sp1 - line));
	sp2 = memchr(sp1 + 1, ' ', n - (size_t)(sp1 + 1 - line));
	/* No second SP: an HTTP/0.9 request, which we do not speak. */
	if (!sp2 || sp2 == sp1 + 1)
		return fail(c, 400);
	req->target = str(sp1 + 1, (size_t)(sp2 - sp1 - 1));

	req->method = method_of(req->method_str);

	v = parse_version(str(sp2 + 1, n - (size_t)(sp2 + 1 - line)));
	if (v < 0)
		return fail(c, -v);
	req->version_minor = v;

	st = parse_target(c, req->target);
	if (st)
		return fail(c, st);
	return HTTP_PARSE_OK;
}

/* Connection = #connection-option; only close and keep-alive matter. */
static void parse_connection(struct parse_ctx *c, struct http_str v)
{
	size_t i = 0;

	while (i < v.n) {
		size_t j = i;
		struct http_str tok;

		while (j < v.n && v.p[j] != ',')
			j++;
		tok = trim_ows(str(v.p + i, j - i));
		if (http_str_eq_ci(tok, "close"))
			c->st->conn_close = true;
		else if (http_str_eq_ci(tok, "keep-alive"))
			c->st->conn_keep_alive = true;
		i = j + 1;
	}
}

/* Content-Length = 1*DIGIT. A list ("5, 5"), a sign, inner whitespace or
 * a value past 2^64-1 is an error, as is a second field even if equal:
 * RFC 9112 6.3 allows merging equal values, but refusing is safer. */
static int parse_content_length(struct parse_ctx *c, struct http_str v)
{
	struct http_request *req = c->req;
	uint64_t n = 0;
	size_t i;

	if (req->has_content_length || v.n == 0)
		return 400;
	for (i = 0; i < v.n; i++) {
		unsigned d = (unsigned char)v.p[i] - (unsigned)'0';

		if (d > 9)
			return 400;
		if (n > (UINT64_MAX - d) / 10)
			return 400;
		n = n * 10 + d;
	}
	/* We never read a body, and GET/HEAD have no use for one. */
	if (n > 0 && req->method <= HTTP_METHOD_HEAD)
		return 400;
	req->has_content_length = true;
	req->content_length = n;
	return 0;
}

const struct http_str HTTP_FIELD_REPEATED = {",", 1};

static void set_first(struct http_str *dst, struct http_str v)
{
	if (dst->n == 0)
		*dst = v;
}

/* A field that takes one value: a second line spoils it (empty lines
 * add nothing, as to a list). */
static void set_single(struct http_str *dst, struct http_str v)
{
	if (!v.n)
		return;
	*dst = dst->n ? HTTP_FIELD_REPEATED : v;
}

/* One more line of a list field (see struct http_list). */
static void add_line(struct http_list *l, struct http_str v)
{
	if (v.n && l->n < HTTP_LIST_LINES)
		l->line[l->n++] = v;
}

static int dispatch_field(struct parse_ctx *c, struct http_str name,
			  struct http_str v)
{
	struct http_request *req = c->req;

	switch (name.n) {
	case 4:
		if (http_str_eq_ci(name, "host")) {
			if (c->st->host_field || !valid_authority(v))
				return 400;
			c->st->host_field = true;
			req->has_host = true;
			req->host = v;
		}
		break;
	case 5:
		if (http_str_eq_ci(name, "range"))
			set_single(&req->range, v);
		break;
	case 7:
		if (http_str_eq_ci(name, "referer"))
			set_first(&req->referer, v);
		break;
	case 8:
		if (http_str_eq_ci(name, "if-range"))
			set_single(&req->if_range, v);
		else if (http_str_eq_ci(name, "if-match"))
			add_line(&req->if_match, v);
		break;
	case 10:
		if (http_str_eq_ci(name, "connection"))
			parse_connection(c, v);
		else if (http_str_eq_ci(name, "user-agent"))
			set_first(&req->user_agent, v);
		break;
	case 13:
		if (http_str_eq_ci(name, "if-none-match"))
			add_line(&req->if_none_match, v);
		break;
	case 14:
		if (http_str_eq_ci(name, "content-length"))
			return parse_content_length(c, v);
		break;
	case 17:
		if (http_str_eq_ci(name, "if-modified-since"))
			set_single(&req->if_modified_since, v);
		else if (http_str_eq_ci(name, "transfer-encoding"))
			/* We read no bodies, and TE is the smuggler's tool
			 * (RFC 9112 6.1): refuse it in any form. */
			return 400;
		break;
	case 19:
		if (http_str_eq_ci(name, "if-unmodified-since"))
			set_single(&req->if_unmodified_since, v);
		break;
	}
	return 0;
}

static enum http_parse_result parse_field_line(struct parse_ctx *c, size_t s,
					       size_t e)
{
	const char *p = c->buf;
	size_t i;
	int st;

	if (++c->st->fields > c->lim->max_headers)
		return fail(c, 431);
	for (i = s; i < e && http_tchar((unsigned char)p[i]); i++)
		;
	/* Empty name, no colon, or whitespace before it (RFC 9112 5.1).
	 * This also refuses a line starting with whitespace: obs-fold, or
	 * whitespace before the first field (RFC 9112 2.2, 5.2). */
	if (i == s || i == e || p[i] != ':')
		return fail(c, 400);
	for (size_t j = i + 1; j < e; j++)
		if (!is_field_byte((unsigned char)p[j]))
			return fail(c, 400);
	st = dispatch_field(c, str(p + s, i - s),
			    trim_ows(str(p + i + 1, e - i - 1)));
	if (st)
		return fail(c, st);
	return HTTP_PARSE_OK;
}

static enum http_parse_result finish(struct parse_ctx *c, size_t head_len)
{
	struct http_request *req = c->req;

	/* RFC 9112 3.2: a 1.1 request without Host is a 400. */
	if (req->version_minor == 1 && !c->st->host_field)
		return fail(c, 400);
	/* The authority of an absolute-form target overrides Host. */
	if (c->st->absolute_form) {
		req->host = c->st->authority;
		req->has_host = true;
	}
	if (req->version_minor == 1)
		req->keep_alive = !c->st->conn_close;
	else
		req->keep_alive = c->st->conn_keep_alive && !c->st->conn_close;
	/* An unread body would be parsed as the next request. */
	if (req->content_length > 0)
		req->keep_alive = false;
	req->head_len = head_len;
	return HTTP_PARSE_OK;
}

enum http_parse_result http_parse_more(const char *buf, size_t len,
				       const struct http_limits *lim,
				       struct http_request *req, int *status,
				       struct http_parse_state *st)
{
	struct parse_ctx c = {
		.buf = buf,
		.len = len,
		.lim = &st->lim,
		.req = req,
		.status = status,
		.st = st,
	};
	enum http_parse_result r;
	size_t pos, end, next;

	*status = 0;
	if (st->phase == PH_NEW) {
		memset(st, 0, sizeof(*st));
		memset(req, 0, sizeof(*req));
		req->version_minor = 1;
		st->lim = *lim;
		st->phase = PH_LEADING;
	}
	lim = &st->lim;
	/* Empty lines before the request line are skipped (RFC 9112 2.2);
	 * they count against the head limit, so they cannot go on forever. */
	for (pos = st->line; st->phase == PH_LEADING;) {
		if (pos >= len) {
			line_at(st, pos);
			return HTTP_PARSE_INCOMPLETE;
		}
		if (pos >= lim->max_header_bytes)
			return fail(&c, 431);
		if (buf[pos] == '\n') {
			pos++;
			continue;
		}
		if (buf[pos] != '\r') {
			line_at(st, pos);
			st->in_method = true;
			st->phase = PH_REQUEST_LINE;
			break;
		}
		if (pos + 1 >= len) {
			line_at(st, pos);
			return HTTP_PARSE_INCOMPLETE;
		}
		if (pos + 1 >= lim->max_header_bytes)
			return fail(&c, 431);
		if (buf[pos + 1] != '\n')
			return fail(&c, 400);
		pos += 2;
	}
	if (st->phase == PH_REQUEST_LINE) {
		r = scan_line(&c, true, &end, &next);
		if (r != HTTP_PARSE_OK)
			return r;
		r = parse_request_line(&c, st->line, end);
		if (r != HTTP_PARSE_OK)
			return r;
		line_at(st, next);
		st->phase = PH_FIELDS;
	}
	for (;;) {
		r = scan_line(&c, false, &end, &next);
		if (r != HTTP_PARSE_OK)
			return r;
		if (end == st->line)
			return finish(&c, next);
		r = parse_field_line(&c, st->line, end);
		if (r != HTTP_PARSE_OK)
			return r;
		line_at(st, next);
	}
}

enum http_parse_result http_parse_request(const char *buf, size_t len,
					  const struct http_limits *lim,
					  struct http_request *req, int *status)
{
	struct http_parse_state st = {0};

	return http_parse_more(buf, len, lim, req, status, &st);
}
