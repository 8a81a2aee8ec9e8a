// SPDX-License-Identifier: MIT
#include "metrics.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include "engine.h"
#include "http_parse.h"
#include "http_render.h"
#include "log.h"
#include "stat_cache.h"

struct out {
	char *buf;
	size_t cap, len;
	bool overflow;
};

static void put(struct out *o, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

static void put(struct out *o, const char *fmt, ...)
{
	va_list ap;
	int n;

	if (o->overflow)
		return;
	va_start(ap, fmt);
	n = vsnprintf(o->buf + o->len, o->cap - o->len, fmt, ap);
	va_end(ap);
	if (n < 0 || (size_t)n >= o->cap - o->len)
		o->overflow = true;
	else
		o->len += (size_t)n;
}

static unsigned long long ld(const _Atomic uint64_t *v)
{
	return (unsigned long long)atomic_load_explicit(v, memory_order_relaxed);
}

static void metric(struct out *o, const char *name, const char *type,
		   const char *help, const _Atomic uint64_t *v)
{
	put(o, "# HELP orcd_%s %s\n# TYPE orcd_%s %s\norcd_%s %llu\n", name,
	    help, name, type, name, ld(v));
}

ssize_t metrics_render(const struct orcd_stats *t, const char *engine,
		       char *buf, size_t cap)
{
	static const char *const outcome[] = { "open_failed", "short_read",
					       "send_error", "client_gone",
					       "close_repaired" };
	const _Atomic uint64_t *oc[] = { &t->chain_open_failed,
					 &t->chain_short_read,
					 &t->chain_send_error,
					 &t->chain_client_gone,
					 &t->chain_close_repaired };
	_Static_assert(sizeof(t->stat_cache) / sizeof(t->stat_cache[0]) ==
			       SC_NCOUNTERS,
		       "orcd_stats.stat_cache has one counter per SC_*");
	static const char *const sc_name[SC_NCOUNTERS] = {
		[SC_HITS] = "hit", [SC_MISSES] = "miss",
		[SC_BYPASS] = "bypass", [SC_FLUSHES] = "flush"
	};
	struct out o = { buf, cap, 0, false };
	int i;

	put(&o, "# HELP orcd_info Engine in use.\n# TYPE orcd_info gauge\n"
		"orcd_info{engine=\"%s\"} 1\n", engine);
	put(&o, "# HELP orcd_requests_total Responses by status class.\n"
		"# TYPE orcd_requests_total counter\n");
	for (i = 2; i <= 5; i++)
		put(&o, "orcd_requests_total{class=\"%dxx\"} %llu\n", i,
		    ld(&t->status_class[i]));
	metric(&o, "bytes_sent_total", "counter", "Bytes written to clients.",
	       &t->bytes_sent);
	metric(&o, "connections_accepted_total", "counter",
	       "Connections accepted.", &t->conns_accepted);
	metric(&o, "connections_open", "gauge", "Connections open now.",
	       &t->conns_open);
	metric(&o, "chains_submitted_total", "counter",
	       "Linked io_uring chains submitted.", &t->chains_submitted);
	metric(&o, "chains_completed_total", "counter",
	       "Linked io_uring chains completed.", &t->chains_completed);
	metric(&o, "chains_in_flight", "gauge", "Chains in flight now.",
	       &t->chains_inflight);
	metric(&o, "chains_in_flight_peak", "gauge",
	       "Most chains in flight at once.", &t->chains_inflight_peak);
	metric(&o, "slots_in_use", "gauge", "fd slots in use now.",
	       &t->slots_inuse);
	metric(&o, "slots_peak", "gauge", "Most fd slots in use at once.",
	       &t->slots_peak);
	metric(&o, "slot_waits_total", "counter",
	       "Times work waited for a free slot.", &t->slot_waits);
	metric(&o, "ebusy_total", "counter",
	       "Chosen fds found busy (must stay 0).", &t->ebusy);
	metric(&o, "submits_total", "counter",
	       "io_uring_enter calls / event-loop wake-ups.", &t->submits);
	put(&o, "# HELP orcd_stat_cache_total File metadata lookups by how the stat cache answered them.\n"
		"# TYPE orcd_stat_cache_total counter\n");
	for (i = 0; i < SC_NCOUNTERS; i++)
		put(&o, "orcd_stat_cache_total{result=\"%s\"} %llu\n",
		    sc_name[i], ld(&t->stat_cache[i]));
	put(&o, "# HELP orcd_chain_outcomes_total Chains that did not run to the end, by cause.\n"
		"# TYPE orcd_chain_outcomes_total counter\n");
	for (i = 0; i < 5; i++)
		put(&o, "orcd_chain_outcomes_total{cause=\"%s\"} %llu\n",
		    outcome[i], ld(oc[i]));
	return o.overflow ? -ENOSPC : (ssize_t)o.len;
}

static void reply(int fd, int status, const char *ctype, const char *body,
		  size_t blen, bool head)
{
	struct http_response r = {
		.status = status,
		.version_minor = 1,
		.keep_alive = false,
		.now = time(NULL),
		.server = "orcd/" ORCD_VERSION,
		.content_type = ctype,
		.content_length = (int64_t)blen,
		.allow = status == 405 ? "GET, HEAD" : NULL,
	};
	char hdr[1024];
	ssize_t n = http_render_head(&r, hdr, sizeof(hdr));

	if (n < 0)
		return;
	n = send(fd, hdr, (size_t)n, MSG_NOSIGNAL | (head ? 0 : MSG_MORE));
	if (n < 0) {
		log_msg(LOG_INFO, "metrics: sending the answer: %s",
			strerror(errno));
		return;
	}
	if (!head && blen)
		(void)!send(fd, body, blen, MSG_NOSIGNAL);
}

void metrics_serve(struct orcd_server *s, int listen_fd)
{
	struct timeval tv = { .tv_sec = 1 };
	struct http_limits lim = { 4096, 8192, 64 };
	struct http_request req;
	char in[8192], body[8192];
	size_t len = 0;
	int fd, status = 400;
	enum http_parse_result r = HTTP_PARSE_INCOMPLETE;

	fd = accept4(listen_fd, NULL, NULL, SOCK_CLOEXEC);
	if (fd < 0)
		return;
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
	while (r == HTTP_PARSE_INCOMPLETE && len < sizeof(in)) {
		ssize_t n = recv(fd, in + len, sizeof(in) - len, 0);

		if (n <= 0) {
			const char *why = n == 0 ? "the client closed" :
					  errno == EAGAIN ?
						   "no request within 1 s" :
						   strerror(errno);

			log_msg(LOG_INFO,
				"metrics: closed unanswered after %zu byte(s): %s",
				len, why);
			break;
		}
		len += (size_t)n;
		r = http_parse_request(in, len, &lim, &req, &status);
	}
	if (r == HTTP_PARSE_OK) {
		struct orcd_stats t;
		bool head = req.method == HTTP_METHOD_HEAD;
		ssize_t n;

		server_stats_sum(s, &t);
		if (req.method == HTTP_METHOD_OTHER) {
			reply(fd, 405, NULL, NULL, 0, false);
		} else if (req.path.n != strlen(s->cfg->metrics_path) ||
			   memcmp(req.path.p, s->cfg->metrics_path,
				  req.path.n)) {
			reply(fd, 404, NULL, NULL, 0, head);
		} else if ((n = metrics_render(&t, s->engine->name, body,
					       sizeof(body))) < 0) {
			reply(fd, 500, NULL, NULL, 0, head);
		} else {
			reply(fd, 200, "text/plain; version=0.0.4", body,
			      (size_t)n, head);
		}
	} else if (r == HTTP_PARSE_ERROR) {
		reply(fd, status, NULL, NULL, 0, false);
	}
	close(fd);
}
