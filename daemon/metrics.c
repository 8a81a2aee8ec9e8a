// SPDX-License-Identifier: MIT
#include "metrics.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include "http_parse.h"
#include "http_render.h"
#include "log.h"
#include "mono.h"
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
	return (unsigned long long)atomic_load_explicit(v,
							memory_order_relaxed);
}

static void metric(struct out *o, const char *name, const char *type,
		   const char *help, const _Atomic uint64_t *v)
{
	put(o, "# HELP orcd_%s %s\n# TYPE orcd_%s %s\norcd_%s %llu\n", name,
	    help, name, type, name, ld(v));
}

static double tv_seconds(const struct timeval *tv)
{
	return (double)tv->tv_sec + (double)tv->tv_usec / 1e6;
}

ssize_t metrics_render(const struct orcd_stats *t, const char *engine,
		       char *buf, size_t cap)
{
	static const char *const outcome[] = {"open_failed", "short_read",
					      "send_error", "client_gone",
					      "close_repaired"};
	const _Atomic uint64_t *oc[] = {&t->chain_open_failed,
					&t->chain_short_read,
					&t->chain_send_error,
					&t->chain_client_gone,
					&t->chain_close_repaired};
	_Static_assert(sizeof(t->stat_cache) / sizeof(t->stat_cache[0]) ==
			       SC_NCOUNTERS,
		       "orcd_stats.stat_cache has one counter per SC_*");
	static const char *const sc_name[SC_NCOUNTERS] = {
		[SC_HITS] = "hit",
		[SC_MISSES] = "miss",
		[SC_BYPASS] = "bypass",
		[SC_FLUSHES] = "flush"};
	struct out o = {buf, cap, 0, false};
	struct rusage ru;
	int i;

	put(&o,
	    "# HELP orcd_info Engine in use.\n# TYPE orcd_info gauge\n"
	    "orcd_info{engine=\"%s\"} 1\n",
	    engine);
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
	metric(&o, "idle_closed_total", "counter",
	       "Idle keep-alive connections closed to make room for new ones.",
	       &t->idle_closed);
	metric(&o, "chains_submitted_total", "counter",
	       "Linked io_uring chains submitted.", &t->chains_submitted);
	metric(&o, "chains_completed_total", "counter",
	       "Linked io_uring chains completed.", &t->chains_completed);
	metric(&o, "chains_in_flight", "gauge", "Chains in flight now.",
	       &t->chains_inflight);
	metric(&o, "chains_in_flight_peak", "gauge",
	       "Most chains in flight at once in each running worker, summed.",
	       &t->chains_inflight_peak);
	metric(&o, "slots_in_use", "gauge", "fd slots in use now.",
	       &t->slots_inuse);
	metric(&o, "slots_peak", "gauge",
	       "Most fd slots in use at once in each running worker, summed.",
	       &t->slots_peak);
	metric(&o, "slot_waits_total", "counter",
	       "Times work waited for a free slot.", &t->slot_waits);
	metric(&o, "slot_wait_timeouts_total", "counter",
	       "Responses answered 503 because no file slot came within send_timeout.",
	       &t->slot_wait_timeouts);
	metric(&o, "ebusy_total", "counter",
	       "Chosen fds found busy (must stay 0).", &t->ebusy);
	metric(&o, "submits_total", "counter",
	       "io_uring_enter calls / event-loop wake-ups.", &t->submits);
	metric(&o, "sq_full_total", "counter",
	       "Times io_uring work found no submission-queue room and waited a turn.",
	       &t->sq_full);
	metric(&o, "batched_waits_total", "counter",
	       "io_uring waits that asked for more than one completion (batch_wait_us).",
	       &t->batched_waits);
	put(&o,
	    "# HELP orcd_stat_cache_total File metadata lookups by how the stat cache answered them.\n"
	    "# TYPE orcd_stat_cache_total counter\n");
	for (i = 0; i < SC_DATA_HITS; i++)
		put(&o, "orcd_stat_cache_total{result=\"%s\"} %llu\n",
		    sc_name[i], ld(&t->stat_cache[i]));
	metric(&o, "body_cache_hits_total", "counter",
	       "Bodies sent from file contents the stat cache kept.",
	       &t->stat_cache[SC_DATA_HITS]);
	metric(&o, "stat_cache_evictions_total", "counter",
	       "Stat cache entries dropped to make room.",
	       &t->stat_cache[SC_EVICTIONS]);
	metric(&o, "stat_cache_invalidated_total", "counter",
	       "Stat cache entries whose facts a change event dropped.",
	       &t->stat_cache[SC_INVALIDATED]);
	metric(&o, "stat_cache_entries", "gauge",
	       "Stat cache entries held, directories included.",
	       &t->stat_cache[SC_ENTRIES]);
	metric(&o, "stat_cache_watches", "gauge",
	       "inotify watches the stat caches hold.",
	       &t->stat_cache[SC_WATCHES]);
	metric(&o, "sendfile_bodies_total", "counter",
	       "Kept bodies of large files sent by sendfile(2).",
	       &t->sendfile_bodies);
	metric(&o, "sends_again_total", "counter",
	       "Ring sends that moved nothing (-EAGAIN) and went again.",
	       &t->send_again);
	put(&o,
	    "# HELP orcd_chain_outcomes_total io_uring responses that did not run to the end, by cause: open_failed and close_repaired are chains', the others any body's (a chain, kept bytes, sendfile).\n"
	    "# TYPE orcd_chain_outcomes_total counter\n");
	for (i = 0; i < 5; i++)
		put(&o, "orcd_chain_outcomes_total{cause=\"%s\"} %llu\n",
		    outcome[i], ld(oc[i]));
	/* The whole process: every worker, io-wq's threads and this one;
	 * benchmarks read it where they cannot see /proc (a QEMU guest). */
	if (!getrusage(RUSAGE_SELF, &ru))
		put(&o,
		    "# HELP process_cpu_seconds_total User and system CPU time of the process.\n"
		    "# TYPE process_cpu_seconds_total counter\n"
		    "process_cpu_seconds_total %.6f\n",
		    tv_seconds(&ru.ru_utime) + tv_seconds(&ru.ru_stime));
	return o.overflow ? -ENOSPC : (ssize_t)o.len;
}

/* Connections answered at once; more wait in the listen backlog. */
#define METRICS_CONNS 16
/* A client has this long to send its request, and as long again to take
 * the answer. */
#define METRICS_MS    1000
/* How long accepts pause after running out of descriptors (nginx: 500). */
#define METRICS_ACCEPT_PAUSE_MS 500

struct mconn {
	int fd; /* -1: free */
	int64_t deadline;
	size_t in_len;
	size_t out_len, out_sent; /* answering once out_len > 0 */
	char in[8192];
	char out[1024 + 8192];
};

struct metrics {
	int listen_fd;
	const char *engine;
	metrics_snapshot_fn snapshot;
	void *ctx;
	unsigned n;
	/* Out of descriptors or memory at accept: the listener stays ready
	 * with its client queued, so it is left out of the poll until then
	 * (0: not paused); said once until an accept works again. */
	int64_t accept_paused_until;
	bool accept_failing;
	/* A connection that went unanswered is said at most once a second
	 * (when, and how many were not said since): clients that connect
	 * and go would otherwise write a line each, megabytes a second. */
	int64_t unanswered_said_ms;
	unsigned unanswered_quiet;
	struct mconn c[METRICS_CONNS];
};

static void unanswered(struct metrics *m, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

static void unanswered(struct metrics *m, const char *fmt, ...)
{
	int64_t now = mono_ms();
	char line[256];
	va_list ap;

	if (m->unanswered_said_ms && now - m->unanswered_said_ms < 1000) {
		m->unanswered_quiet++;
		return;
	}
	va_start(ap, fmt);
	vsnprintf(line, sizeof(line), fmt, ap);
	va_end(ap);
	if (m->unanswered_quiet)
		log_msg(LOG_INFO,
			"metrics: %s (and %u more closed unanswered since the last such line)",
			line, m->unanswered_quiet);
	else
		log_msg(LOG_INFO, "metrics: %s", line);
	m->unanswered_said_ms = now;
	m->unanswered_quiet = 0;
}

struct metrics *metrics_new(int listen_fd, const char *engine,
			    metrics_snapshot_fn snapshot, void *ctx)
{
	struct metrics *m = calloc(1, sizeof(*m));

	if (!m)
		return NULL;
	m->listen_fd = listen_fd;
	m->engine = engine;
	m->snapshot = snapshot;
	m->ctx = ctx;
	for (unsigned i = 0; i < METRICS_CONNS; i++)
		m->c[i].fd = -1;
	return m;
}

static void mconn_close(struct metrics *m, struct mconn *c)
{
	close(c->fd);
	c->fd = -1;
	m->n--;
}

void metrics_free(struct metrics *m)
{
	if (!m)
		return;
	for (unsigned i = 0; i < METRICS_CONNS; i++)
		if (m->c[i].fd >= 0)
			mconn_close(m, &m->c[i]);
	free(m);
}

/* Render head and body into c->out. */
static void reply(struct mconn *c, int status, const char *ctype,
		  const char *body, size_t blen, bool head)
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
	ssize_t n = http_render_head(&r, c->out, sizeof(c->out));

	if (n < 0 || (!head && (size_t)n + blen > sizeof(c->out))) {
		c->out_len = 0;
		return;
	}
	c->out_len = (size_t)n;
	if (!head && blen) {
		memcpy(c->out + n, body, blen);
		c->out_len += blen;
	}
}

static void answer(struct metrics *m, struct mconn *c,
		   const struct http_request *req)
{
	struct orcd_stats t;
	const char *path = NULL;
	char body[8192];
	bool head = req->method == HTTP_METHOD_HEAD;
	ssize_t n;

	m->snapshot(m->ctx, &t, &path);
	if (req->method > HTTP_METHOD_HEAD)
		reply(c, req->method == HTTP_METHOD_OTHER ? 405 : 501, NULL,
		      NULL, 0, false);
	else if (!path || req->path.n != strlen(path) ||
		 memcmp(req->path.p, path, req->path.n))
		reply(c, 404, NULL, NULL, 0, head);
	else if ((n = metrics_render(&t, m->engine, body, sizeof(body))) < 0)
		reply(c, 500, NULL, NULL, 0, head);
	else
		reply(c, 200, "text/plain; version=0.0.4", body, (size_t)n,
		      head);
}

/* Read what has arrived; answer once a head is complete. Returns false
 * when the connection is done with. */
static bool on_input(struct metrics *m, struct mconn *c)
{
	struct http_limits lim = {4096, 8192, 64};
	struct http_request req;
	int status = 400;
	ssize_t n =
		recv(c->fd, c->in + c->in_len, sizeof(c->in) - c->in_len, 0);

	if (n < 0 && (errno == EAGAIN || errno == EINTR))
		return true;
	if (n <= 0) {
		unanswered(m, "closed unanswered after %zu byte(s): %s",
			   c->in_len,
			   n == 0 ? "the client closed" : strerror(errno));
		return false;
	}
	c->in_len += (size_t)n;
	switch (http_parse_request(c->in, c->in_len, &lim, &req, &status)) {
	case HTTP_PARSE_INCOMPLETE:
		if (c->in_len < sizeof(c->in))
			return true;
		status = 431;
		/* fall through */
	case HTTP_PARSE_ERROR:
		reply(c, status, NULL, NULL, 0, false);
		break;
	case HTTP_PARSE_OK:
		answer(m, c, &req);
		break;
	}
	if (!c->out_len)
		return false;
	c->deadline = mono_ms() + METRICS_MS;
	return true;
}

/* Send what is left of the answer. Returns false when done with. */
static bool on_output(struct metrics *m, struct mconn *c)
{
	ssize_t n = send(c->fd, c->out + c->out_sent, c->out_len - c->out_sent,
			 MSG_NOSIGNAL | MSG_DONTWAIT);

	if (n < 0 && (errno == EAGAIN || errno == EINTR))
		return true;
	if (n < 0) {
		unanswered(m, "sending the answer: %s", strerror(errno));
		return false;
	}
	c->out_sent += (size_t)n;
	return c->out_sent < c->out_len;
}

unsigned metrics_pollfds(const struct metrics *m, struct pollfd *p,
			 unsigned cap)
{
	unsigned k = 0;

	if (k < cap && m->n < METRICS_CONNS && !m->accept_paused_until)
		p[k++] = (struct pollfd){m->listen_fd, POLLIN, 0};
	for (unsigned i = 0; i < METRICS_CONNS && k < cap; i++)
		if (m->c[i].fd >= 0)
			p[k++] = (struct pollfd){
				m->c[i].fd, m->c[i].out_len ? POLLOUT : POLLIN,
				0};
	return k;
}

int metrics_timeout_ms(const struct metrics *m)
{
	int64_t now = mono_ms(), first = -1;

	for (unsigned i = 0; i < METRICS_CONNS; i++)
		if (m->c[i].fd >= 0 && (first < 0 || m->c[i].deadline < first))
			first = m->c[i].deadline;
	if (m->accept_paused_until &&
	    (first < 0 || m->accept_paused_until < first))
		first = m->accept_paused_until;
	if (first < 0)
		return -1;
	return first <= now ? 0 : (int)(first - now);
}

static void accept_all(struct metrics *m)
{
	for (unsigned i = 0; i < METRICS_CONNS; i++) {
		struct mconn *c = &m->c[i];

		if (c->fd >= 0)
			continue;
		c->fd = accept4(m->listen_fd, NULL, NULL,
				SOCK_CLOEXEC | SOCK_NONBLOCK);
		if (c->fd < 0) {
			if (errno == EMFILE || errno == ENFILE ||
			    errno == ENOBUFS || errno == ENOMEM) {
				/* Polling a listener that stays ready would
				 * spin this thread, which also runs the
				 * watchdog and reloads. */
				if (!m->accept_failing)
					log_msg(LOG_WARNING,
						"metrics: accept: %s; pausing",
						strerror(errno));
				m->accept_failing = true;
				m->accept_paused_until =
					mono_ms() + METRICS_ACCEPT_PAUSE_MS;
			}
			return;
		}
		m->accept_failing = false;
		m->n++;
		c->in_len = c->out_len = c->out_sent = 0;
		c->deadline = mono_ms() + METRICS_MS;
	}
}

void metrics_handle(struct metrics *m, const struct pollfd *p, unsigned n)
{
	int64_t now = mono_ms();

	if (m->accept_paused_until && m->accept_paused_until <= now)
		m->accept_paused_until = 0;
	for (unsigned k = 0; k < n; k++) {
		struct mconn *c = NULL;
		bool keep;

		if (!p[k].revents)
			continue;
		if (p[k].fd == m->listen_fd) {
			accept_all(m);
			continue;
		}
		for (unsigned i = 0; i < METRICS_CONNS && !c; i++)
			if (m->c[i].fd == p[k].fd)
				c = &m->c[i];
		if (!c)
			continue;
		keep = c->out_len ? on_output(m, c) : on_input(m, c);
		if (keep && c->out_len && c->out_sent == 0)
			keep = on_output(m, c); /* usually all of it at once */
		if (!keep)
			mconn_close(m, c);
	}
	for (unsigned i = 0; i < METRICS_CONNS; i++) {
		struct mconn *c = &m->c[i];

		if (c->fd < 0 || c->deadline > now)
			continue;
		unanswered(m, "closed unanswered after %zu byte(s): %s",
			   c->in_len,
			   c->out_len ? "the answer was not taken in time" :
					"no whole request in time");
		mconn_close(m, c);
	}
}
