// SPDX-License-Identifier: MIT
/*
 * The classic engine on libev: non-blocking accept4, head by send with
 * MSG_MORE, body by sendfile in bounded chunks. It runs wherever io_uring
 * is blocked (seccomp, kernel.io_uring_disabled) and is the baseline the
 * io_uring engines are measured against.
 *
 * Memory per connection is bounded: the request buffer exists only while
 * a request is being read or answered, so an idle keep-alive connection
 * costs only its struct.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <ev.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/sendfile.h>
#include <sys/socket.h>
#include <unistd.h>

#include "engine.h"
#include "http_parse.h"
#include "log.h"
#include "respond.h"
#include "server.h"

/* Bytes sendfile moves per readiness event, so one big download cannot
 * starve the other connections of the worker. */
#define SENDFILE_CHUNK (1u << 20)
/* Room after the request bytes for the response head (and error body). */
#define HEAD_ROOM      8192
/* How long a stopping worker waits for in-flight responses. */
#define DRAIN_TIMEOUT  10.0

enum conn_state {
	CONN_IDLE,    /* keep-alive, waiting for the first byte */
	CONN_READING, /* part of a request head has arrived */
	CONN_WRITING, /* sending a response */
};

struct ep_worker;

struct conn {
	ev_io io;
	ev_timer timer;
	struct ep_worker *ew;
	struct conn *prev, *next;
	int fd;
	enum conn_state state;
	struct sockaddr_storage peer;
	char *buf;  /* request bytes, then the response head */
	size_t cap; /* request part of buf */
	size_t len; /* request bytes in buf */
	struct http_request req;
	bool have_req;		   /* req parsed (access log, pipelining) */
	bool fresh;		   /* no request yet on this connection */
	struct response_plan plan; /* plan.fd is ours while writing */
	size_t head_sent;
	uint64_t body_sent;
	uint64_t bytes_sent;
};

struct ep_worker {
	struct orcd_worker *w;
	struct ev_loop *loop;
	ev_io listen_io[ORCD_MAX_LISTEN];
	ev_io wake_io;
	ev_timer accept_retry;
	ev_timer drain_timer;
	ev_timer heartbeat; /* proves the loop turns, for the watchdog */
	struct conn *conns; /* all open connections */
	unsigned n_conns;
	bool accepting;
	bool stopping;
};

static void conn_on_io(struct ev_loop *loop, ev_io *io, int revents);
static void conn_on_timer(struct ev_loop *loop, ev_timer *t, int revents);
static void conn_step(struct conn *c);

static double ms(unsigned v)
{
	return v / 1000.0;
}

static void accept_set(struct ep_worker *ew, bool on)
{
	unsigned i;

	if (ew->accepting == on)
		return;
	ew->accepting = on;
	for (i = 0; i < ew->w->n_listen; i++) {
		if (on)
			ev_io_start(ew->loop, &ew->listen_io[i]);
		else
			ev_io_stop(ew->loop, &ew->listen_io[i]);
	}
}

static void conn_close(struct conn *c)
{
	struct ep_worker *ew = c->ew;

	ev_io_stop(ew->loop, &c->io);
	ev_timer_stop(ew->loop, &c->timer);
	if (c->plan.fd >= 0)
		close(c->plan.fd);
	close(c->fd);
	free(c->buf);
	if (c->prev)
		c->prev->next = c->next;
	else
		ew->conns = c->next;
	if (c->next)
		c->next->prev = c->prev;
	ew->n_conns--;
	STAT_DEC(ew->w, conns_open);
	free(c);
	if (!ew->stopping && ew->n_conns < ew->w->cfg->max_connections)
		accept_set(ew, true);
	if (ew->stopping && !ew->n_conns)
		ev_break(ew->loop, EVBREAK_ONE);
}

static void conn_watch(struct conn *c, int events, double timeout)
{
	struct ev_loop *loop = c->ew->loop;

	if (!ev_is_active(&c->io) ||
	    (c->io.events & (EV_READ | EV_WRITE)) != events) {
		ev_io_stop(loop, &c->io);
		ev_io_set(&c->io, c->fd, events);
		ev_io_start(loop, &c->io);
	}
	ev_timer_stop(loop, &c->timer);
	ev_timer_set(&c->timer, timeout, 0.);
	ev_timer_start(loop, &c->timer);
}

static int conn_buffer(struct conn *c)
{
	const struct orcd_config *cfg = c->ew->w->cfg;

	if (c->buf)
		return 0;
	c->cap = cfg->max_header_bytes;
	c->buf = malloc(c->cap + HEAD_ROOM);
	return c->buf ? 0 : -ENOMEM;
}

static void log_response(struct conn *c)
{
	struct orcd_worker *w = c->ew->w;
	int cls = c->plan.status / 100;

	STAT_INC(w, requests);
	if (cls >= 2 && cls <= 5)
		STAT_INC(w, status_class[cls]);
	STAT_ADD(w, bytes_sent, c->bytes_sent);
	access_log_write(w->srv->access_log, (struct sockaddr *)&c->peer,
			 c->req.request_line.n ? &c->req : NULL, c->plan.status,
			 respond_body_bytes(&c->plan, c->bytes_sent),
			 time(NULL));
}

/* The response is out: log it, then either close or go back to reading
 * whatever the client pipelined behind the request. */
static void conn_response_done(struct conn *c)
{
	size_t used = c->have_req ? c->req.head_len : c->len;

	log_response(c);
	if (c->plan.fd >= 0)
		close(c->plan.fd);
	c->plan.fd = -1;
	if (!c->plan.keep_alive || c->ew->stopping) {
		conn_close(c);
		return;
	}
	c->have_req = false;
	c->req.request_line.n = 0;
	memmove(c->buf, c->buf + used, c->len - used);
	c->len -= used;
	if (!c->len) {
		free(c->buf);
		c->buf = NULL;
		c->state = CONN_IDLE;
		conn_watch(c, EV_READ, ms(c->ew->w->cfg->idle_timeout_ms));
		return;
	}
	c->state = CONN_READING;
	conn_watch(c, EV_READ, ms(c->ew->w->cfg->header_timeout_ms));
	conn_step(c);
}

static void conn_start_response(struct conn *c)
{
	c->state = CONN_WRITING;
	c->head_sent = 0;
	c->body_sent = 0;
	c->bytes_sent = 0;
	conn_watch(c, EV_WRITE, ms(c->ew->w->cfg->send_timeout_ms));
}

static void conn_fail(struct conn *c, int status)
{
	int err = respond_error(c->ew->w->cfg, status, time(NULL),
				c->buf + c->cap, HEAD_ROOM, &c->plan);

	if (err) {
		conn_close(c);
		return;
	}
	conn_start_response(c);
}

/* Parse what has arrived; start a response when a head is complete. */
static void conn_step(struct conn *c)
{
	struct orcd_worker *w = c->ew->w;
	struct orcd_config *cfg = w->cfg;
	struct http_limits lim = {
		.max_request_line = cfg->max_request_line,
		.max_header_bytes = cfg->max_header_bytes,
		.max_headers = cfg->max_headers,
	};
	int status = 0, err;

	switch (http_parse_request(c->buf, c->len, &lim, &c->req, &status)) {
	case HTTP_PARSE_INCOMPLETE:
		if (c->len == c->cap)
			conn_fail(c, 431);
		return;
	case HTTP_PARSE_ERROR:
		conn_fail(c, status);
		return;
	case HTTP_PARSE_OK:
		break;
	}
	c->have_req = true;
	c->fresh = false;
	err = respond_plan(cfg, NULL, &c->req, time(NULL), RESPOND_KEEP_FD,
			   c->buf + c->cap, HEAD_ROOM, &c->plan);
	if (err) {
		log_msg(LOG_ERR, "cannot render response (%s)", strerror(-err));
		conn_fail(c, 500);
		return;
	}
	conn_start_response(c);
}

static void conn_read(struct conn *c)
{
	ssize_t n;

	if (conn_buffer(c)) {
		conn_close(c);
		return;
	}
	n = recv(c->fd, c->buf + c->len, c->cap - c->len, 0);
	if (n < 0 && (errno == EAGAIN || errno == EINTR))
		return;
	if (n <= 0) {
		conn_close(c);
		return;
	}
	c->len += (size_t)n;
	if (c->state == CONN_IDLE) {
		c->state = CONN_READING;
		conn_watch(c, EV_READ, ms(c->ew->w->cfg->header_timeout_ms));
	}
	conn_step(c);
}

/* Returns 1 when the response is complete, 0 to wait, -1 to close. */
static int conn_send(struct conn *c)
{
	struct response_plan *p = &c->plan;
	const char *head = c->buf + c->cap;
	uint64_t budget = SENDFILE_CHUNK;

	while (c->head_sent < p->head_len) {
		int more = p->send_file ? MSG_MORE : 0;
		ssize_t n = send(c->fd, head + c->head_sent,
				 p->head_len - c->head_sent,
				 MSG_NOSIGNAL | more);

		if (n < 0)
			return errno == EAGAIN || errno == EINTR ? 0 : -1;
		c->head_sent += (size_t)n;
		c->bytes_sent += (uint64_t)n;
	}
	while (p->send_file && c->body_sent < p->length && budget) {
		off_t off = (off_t)(p->offset + c->body_sent);
		uint64_t want = p->length - c->body_sent;
		ssize_t n;

		if (want > budget)
			want = budget;
		n = sendfile(c->fd, p->fd, &off, want);
		if (n < 0)
			return errno == EAGAIN || errno == EINTR ? 0 : -1;
		if (n == 0) {
			/* The file shrank under us: the promised length can
			 * no longer be met, so the connection must end. */
			return -1;
		}
		c->body_sent += (uint64_t)n;
		c->bytes_sent += (uint64_t)n;
		budget -= (uint64_t)n;
	}
	if (p->send_file && c->body_sent < p->length)
		return 0;
	return 1;
}

static void conn_write(struct conn *c)
{
	int r = conn_send(c);

	if (r < 0) {
		log_response(c);
		conn_close(c);
	} else if (r > 0) {
		conn_response_done(c);
	} else {
		/* Progress (or none): the send timeout restarts. */
		ev_timer_stop(c->ew->loop, &c->timer);
		ev_timer_set(&c->timer, ms(c->ew->w->cfg->send_timeout_ms), 0.);
		ev_timer_start(c->ew->loop, &c->timer);
	}
}

static void conn_on_io(struct ev_loop *loop, ev_io *io, int revents)
{
	struct conn *c = (struct conn *)io;

	(void)loop;
	if (c->state == CONN_WRITING) {
		if (revents & EV_WRITE)
			conn_write(c);
	} else if (revents & EV_READ) {
		conn_read(c);
	}
}

static void conn_on_timer(struct ev_loop *loop, ev_timer *t, int revents)
{
	struct conn *c =
		(struct conn *)((char *)t - offsetof(struct conn, timer));

	(void)loop;
	(void)revents;
	if (c->state == CONN_READING) {
		/* RFC 9110 15.5.9: tell the client why before closing. */
		char msg[512];
		struct response_plan p;

		if (!respond_error(c->ew->w->cfg, 408, time(NULL), msg,
				   sizeof(msg), &p))
			(void)!send(c->fd, msg, p.head_len,
				    MSG_NOSIGNAL | MSG_DONTWAIT);
	}
	if (c->state == CONN_WRITING)
		log_response(c);
	conn_close(c);
}

static void on_accept(struct ev_loop *loop, ev_io *io, int revents)
{
	struct ep_worker *ew = io->data;
	struct orcd_worker *w = ew->w;

	(void)revents;
	while (ew->accepting) {
		struct sockaddr_storage peer;
		socklen_t plen = sizeof(peer);
		int fd = accept4(io->fd, (struct sockaddr *)&peer, &plen,
				 SOCK_NONBLOCK | SOCK_CLOEXEC);
		struct conn *c;

		if (fd < 0) {
			if (errno == EMFILE || errno == ENFILE ||
			    errno == ENOBUFS || errno == ENOMEM) {
				/* Out of descriptors: back off instead of
				 * spinning on a listener that stays ready. */
				log_msg(LOG_WARNING, "accept: %s; pausing",
					strerror(errno));
				accept_set(ew, false);
				ev_timer_start(loop, &ew->accept_retry);
			}
			return;
		}
		c = calloc(1, sizeof(*c));
		if (!c) {
			close(fd);
			return;
		}
		c->ew = ew;
		c->fd = fd;
		c->peer = peer;
		c->plan.fd = -1;
		c->state = CONN_IDLE;
		c->fresh = true;
		ev_io_init(&c->io, conn_on_io, fd, EV_READ);
		ev_timer_init(&c->timer, conn_on_timer, 0., 0.);
		c->next = ew->conns;
		if (ew->conns)
			ew->conns->prev = c;
		ew->conns = c;
		ew->n_conns++;
		STAT_INC(w, conns_accepted);
		STAT_INC(w, conns_open);
		conn_watch(c, EV_READ, ms(w->cfg->idle_timeout_ms));
		if (ew->n_conns >= w->cfg->max_connections)
			accept_set(ew, false);
	}
}

static void on_accept_retry(struct ev_loop *loop, ev_timer *t, int revents)
{
	struct ep_worker *ew = t->data;

	(void)loop;
	(void)revents;
	if (!ew->stopping)
		accept_set(ew, true);
}

static void on_drain_timeout(struct ev_loop *loop, ev_timer *t, int revents)
{
	struct ep_worker *ew = t->data;

	(void)revents;
	log_msg(LOG_WARNING,
		"worker %u: %u connections still busy after %.0fs; closing",
		ew->w->id, ew->n_conns, DRAIN_TIMEOUT);
	while (ew->conns)
		conn_close(ew->conns);
	ev_break(loop, EVBREAK_ONE);
}

static void on_heartbeat(struct ev_loop *loop, ev_timer *t, int revents)
{
	struct ep_worker *ew = t->data;

	(void)loop;
	(void)revents;
	server_heartbeat(ew->w);
}

static void begin_stop(struct ep_worker *ew)
{
	struct conn *c, *next;

	ew->stopping = true;
	accept_set(ew, false);
	ev_timer_stop(ew->loop, &ew->accept_retry);
	ev_io_stop(ew->loop, &ew->wake_io);
	/* Idle connections have nothing in flight; busy ones finish their
	 * current response (conn_response_done closes them). */
	for (c = ew->conns; c; c = next) {
		next = c->next;
		if (c->state != CONN_WRITING &&
		    !(c->fresh && server_spare_fresh(ew->w)))
			conn_close(c);
	}
	if (!ew->n_conns) {
		ev_break(ew->loop, EVBREAK_ONE);
		return;
	}
	ev_timer_start(ew->loop, &ew->drain_timer);
}

static void on_wake(struct ev_loop *loop, ev_io *io, int revents)
{
	struct ep_worker *ew = io->data;
	uint64_t v;

	(void)loop;
	(void)revents;
	if (read(io->fd, &v, sizeof(v)) < 0 && errno != EAGAIN)
		log_msg(LOG_ERR, "worker %u: wake read: %s", ew->w->id,
			strerror(errno));
	server_worker_refresh(ew->w);
	if (server_stopping(ew->w) && !ew->stopping)
		begin_stop(ew);
}

static int epoll_probe(const struct orcd_config *cfg, char *why, size_t cap)
{
	(void)cfg;
	if (!(ev_supported_backends() & EVBACKEND_EPOLL)) {
		snprintf(why, cap, "libev has no epoll backend");
		return -ENOTSUP;
	}
	return 0;
}

static int epoll_run(struct orcd_worker *w)
{
	struct ep_worker ew = {.w = w};
	unsigned i;

	ew.loop = ev_loop_new(EVBACKEND_EPOLL | EVFLAG_NOSIGMASK);
	if (!ew.loop)
		return -ENOMEM;
	for (i = 0; i < w->n_listen; i++) {
		ev_io_init(&ew.listen_io[i], on_accept, w->listen_fds[i],
			   EV_READ);
		ew.listen_io[i].data = &ew;
	}
	ev_io_init(&ew.wake_io, on_wake, w->wake_fd, EV_READ);
	ew.wake_io.data = &ew;
	ev_io_start(ew.loop, &ew.wake_io);
	ev_timer_init(&ew.accept_retry, on_accept_retry, 0.1, 0.);
	ew.accept_retry.data = &ew;
	ev_timer_init(&ew.drain_timer, on_drain_timeout, DRAIN_TIMEOUT, 0.);
	ew.drain_timer.data = &ew;
	ev_timer_init(&ew.heartbeat, on_heartbeat, 0., 1.);
	ew.heartbeat.data = &ew;
	ev_timer_start(ew.loop, &ew.heartbeat);
	accept_set(&ew, true);
	if (server_stopping(w))
		begin_stop(&ew);
	else
		ev_run(ew.loop, 0);
	while (ew.conns)
		conn_close(ew.conns);
	ev_loop_destroy(ew.loop);
	return 0;
}

const struct orcd_engine orcd_engine_epoll = {
	.name = "epoll",
	.kind = ORCD_ENGINE_EPOLL,
	.probe = epoll_probe,
	.run = epoll_run,
};
