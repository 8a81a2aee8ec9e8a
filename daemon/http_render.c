// SPDX-License-Identifier: MIT
/*
 * Response head renderer. Everything goes through one bounded writer that
 * stops at cap and remembers that it did, so no field can overflow the
 * caller's buffer and a head that does not fit is reported, never cut.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "http_cond.h"
#include "http_render.h"

struct writer {
	char *buf;
	size_t cap;
	size_t len;
	bool full;
};

static void put(struct writer *w, const char *s, size_t n)
{
	if (w->full || n > w->cap - w->len) {
		w->full = true;
		return;
	}
	memcpy(w->buf + w->len, s, n);
	w->len += n;
}

static void put_str(struct writer *w, const char *s)
{
	put(w, s, strlen(s));
}

static void put_u64(struct writer *w, uint64_t v)
{
	char tmp[20];
	size_t i = sizeof(tmp);

	do {
		tmp[--i] = (char)('0' + v % 10);
		v /= 10;
	} while (v);
	put(w, tmp + i, sizeof(tmp) - i);
}

static void field(struct writer *w, const char *name, const char *value)
{
	put_str(w, name);
	put(w, ": ", 2);
	put_str(w, value);
	put(w, "\r\n", 2);
}

/* A value we are about to send must not end the line or the head early:
 * CR, LF and other controls would let a path or a config string inject
 * fields (response splitting). NULL means the field is omitted. */
static bool safe_value(const char *s)
{
	if (!s)
		return true;
	for (; *s; s++) {
		unsigned char c = (unsigned char)*s;

		if (c != '\t' && (c < 0x20 || c == 0x7f))
			return false;
	}
	return true;
}

static const struct {
	int status;
	const char *reason;
} reasons[] = {
	{100, "Continue"},
	{101, "Switching Protocols"},
	{200, "OK"},
	{201, "Created"},
	{204, "No Content"},
	{206, "Partial Content"},
	{301, "Moved Permanently"},
	{302, "Found"},
	{303, "See Other"},
	{304, "Not Modified"},
	{307, "Temporary Redirect"},
	{308, "Permanent Redirect"},
	{400, "Bad Request"},
	{401, "Unauthorized"},
	{403, "Forbidden"},
	{404, "Not Found"},
	{405, "Method Not Allowed"},
	{406, "Not Acceptable"},
	{408, "Request Timeout"},
	{410, "Gone"},
	{411, "Length Required"},
	{412, "Precondition Failed"},
	{413, "Content Too Large"},
	{414, "URI Too Long"},
	{415, "Unsupported Media Type"},
	{416, "Range Not Satisfiable"},
	{417, "Expectation Failed"},
	{421, "Misdirected Request"},
	{426, "Upgrade Required"},
	{429, "Too Many Requests"},
	{431, "Request Header Fields Too Large"},
	{500, "Internal Server Error"},
	{501, "Not Implemented"},
	{502, "Bad Gateway"},
	{503, "Service Unavailable"},
	{504, "Gateway Timeout"},
	{505, "HTTP Version Not Supported"},
};

const char *http_reason(int status)
{
	for (size_t i = 0; i < sizeof(reasons) / sizeof(reasons[0]); i++)
		if (reasons[i].status == status)
			return reasons[i].reason;
	return "Unknown";
}

static void content_range(struct writer *w, const struct http_response *r)
{
	put_str(w, "Content-Range: bytes ");
	if (r->range_unsatisfied) {
		put(w, "*", 1);
	} else {
		put_u64(w, r->range_first);
		put(w, "-", 1);
		put_u64(w, r->range_last);
	}
	put(w, "/", 1);
	put_u64(w, r->range_total);
	put(w, "\r\n", 2);
}

/* t as IMF-fixdate: kept in *kept when there is one (formatted only when
 * it holds another second), else written into tmp. */
static const char *date_text(struct http_date_text *kept, time_t t, char *tmp)
{
	if (!kept) {
		http_date_format(t, tmp);
		return tmp;
	}
	if (!kept->set || kept->t != t) {
		http_date_format(t, kept->s);
		kept->t = t;
		kept->set = true;
	}
	return kept->s;
}

ssize_t http_render_head(const struct http_response *r, char *buf, size_t cap)
{
	struct writer w = {.buf = buf, .cap = cap};
	struct http_clock *k = r->clock;
	char tmp[HTTP_DATE_LEN + 1];

	if (r->status < 100 || r->status > 999)
		return -EINVAL;
	if (!safe_value(r->server) || !safe_value(r->content_type) ||
	    !safe_value(r->etag) || !safe_value(r->location) ||
	    !safe_value(r->allow))
		return -EINVAL;
	/* A Content-Range that contradicts itself would desynchronise the
	 * client; refuse to write it. */
	if (r->content_range && !r->range_unsatisfied &&
	    (r->range_first > r->range_last || r->range_last >= r->range_total))
		return -EINVAL;

	/* Always "HTTP/1.1", also to 1.0 clients: RFC 9110 section 2.5 says
	 * to answer with the highest minor version we conform to. */
	put_str(&w, "HTTP/1.1 ");
	put_u64(&w, (uint64_t)r->status);
	put(&w, " ", 1);
	put_str(&w, http_reason(r->status));
	put(&w, "\r\n", 2);

	field(&w, "Date", date_text(k ? &k->date : NULL, r->now, tmp));
	if (r->server)
		field(&w, "Server", r->server);
	if (r->content_type)
		field(&w, "Content-Type", r->content_type);
	if (r->content_length >= 0) {
		put_str(&w, "Content-Length: ");
		put_u64(&w, (uint64_t)r->content_length);
		put(&w, "\r\n", 2);
	}
	if (r->has_last_modified) {
		struct http_date_text *lm =
			k ? &k->lm[(uint64_t)r->last_modified % HTTP_CLOCK_LM] :
			    NULL;

		field(&w, "Last-Modified",
		      date_text(lm, r->last_modified, tmp));
	}
	if (r->etag)
		field(&w, "ETag", r->etag);
	if (r->accept_ranges)
		field(&w, "Accept-Ranges", "bytes");
	if (r->range_unsatisfied || r->content_range)
		content_range(&w, r);
	if (r->location)
		field(&w, "Location", r->location);
	if (r->allow)
		field(&w, "Allow", r->allow);
	/* 1.1 is persistent unless told; 1.0 only when told (RFC 9112 9.3). */
	if (!r->keep_alive)
		field(&w, "Connection", "close");
	else if (r->version_minor == 0)
		field(&w, "Connection", "keep-alive");
	put(&w, "\r\n", 2);

	if (w.full)
		return -ENOSPC;
	return (ssize_t)w.len;
}

/*
 * Returns the bytes written (the body cut to cap), so the result can be
 * sent as is. A NUL follows when there is room; it is not counted.
 */
size_t http_error_body(int status, char *buf, size_t cap)
{
	char body[256];
	int n;
	size_t len;

	n = snprintf(body, sizeof(body),
		     "<html><head><title>%d %s</title></head>"
		     "<body><h1>%d %s</h1></body></html>\n",
		     status, http_reason(status), status, http_reason(status));
	len = n < 0 ? 0 : (size_t)n;
	if (len >= sizeof(body))
		len = sizeof(body) - 1;
	if (len > cap)
		len = cap;
	if (len)
		memcpy(buf, body, len);
	if (len < cap)
		buf[len] = '\0';
	return len;
}
