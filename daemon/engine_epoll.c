// SPDX-License-Identifier: MIT
/*
 * The classic engine on libev, as a transport under the HTTP/1 core
 * (http1.h): non-blocking accept4, recv on readiness, head and kept bytes
 * by send(msg), files by sendfile in bounded chunks, timers as ev_timers. It
 * runs wherever io_uring is blocked (seccomp, kernel.io_uring_disabled)
 * and is the baseline the io_uring engines are measured against.
 *
 * Memory per connection is bounded: the core lends a request buffer only
 * while a request is being read or answered, so an idle keep-alive
 * connection costs only its struct.
 *
 * With the stat cache (stat_cache.h) the planner's facts come from it and
 * the body from what it keeps: a small file's bytes go beside the head in
 * one sendmsg, a large kept-open file by sendfile. Otherwise the file is
 * opened here, fstat'ed against the facts the head was rendered from (a
 * mismatch is a replan, as a chain's failed open is), sent by sendfile,
 * and offered to the cache. A turn of the loop is the cache's batch, as a
 * batch of CQEs is on the io_uring engines: a recv that returns bytes
 * hands them to the core only after every socket epoll reported in this
 * turn was read (on_received(), a watcher of the lowest priority, so it
 * runs after the turn's fd callbacks), and marks the cache first, so the
 * lookup that plans from them reads pending change events after all of
 * the turn's bytes were in: a change completed before a request's bytes
 * arrived is seen by that request, for one read(2) per turn instead of
 * one per request. (Marking once per turn before the recvs was not
 * enough: a recv later in the turn, or a pipelined request planned in
 * the same pass, can hold bytes that arrived after the turn's read.)
 */
#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <ev.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/resource.h>
#include <sys/sendfile.h>
#include <sys/socket.h>
#include <unistd.h>

#include "conn_budget.h"
#include "engine.h"
#include "file_meta.h"
#include "http1.h"
#include "log.h"
#include "server.h"
#include "stat_cache.h"

/* Bytes sendfile moves per readiness event, so one big download cannot
 * starve the other connections of the worker. */
#define SENDFILE_CHUNK (1u << 20)
/* Requests whose bytes wait for the turn's other recvs (on_received())
 * before they go to the core anyway: each holds a request buffer, and
 * the core pools 64 of each kind. */
#define RECEIVED_MAX   32

/* The transport op in flight on a connection (at most one). */
enum ep_op {
	OP_NONE,
	OP_RECV,
	OP_RECEIVED, /* bytes in, for the core once the turn's recvs are done */
	OP_RESPOND,
	OP_LINGER,
};

struct ep_worker;

struct ep_conn {
	struct h1_conn h1;
	ev_io io;
	ev_timer timer;
	struct ep_worker *ew;
	struct ep_conn *prev, *next;
	int fd;
	uint8_t op;		  /* enum ep_op */
	unsigned send_timeout_ms; /* OP_RESPOND: without progress */
	size_t head_sent;
	uint64_t body_sent;
	bool src_ready;	      /* the body's source is chosen */
	struct sc_body *body; /* kept bytes (or a kept open file), referenced */
	int file_fd;	      /* a file opened for this response, or -1 */
	bool file_exact;      /* file_fd is the very version planned */
	int received;	      /* OP_RECEIVED: what recv returned */
	struct ep_conn *next_received;
};

/* How long accepting pauses when no connection can be let go. */
#define ACCEPT_RETRY_S 0.1

struct ep_worker {
	struct h1_worker hw;
	const struct h1_core *core;
	struct orcd_worker *w;
	struct ev_loop *loop;
	ev_io listen_io[ORCD_MAX_LISTEN];
	ev_io wake_io;
	ev_timer accept_retry; /* ACCEPT_RETRY_S after make_room() */
	int64_t accept_said_ms; /* mono_ms() of the last "pausing" line */
	int64_t nomem_said_ms;	/* ...and of the last "no memory" line */
	unsigned nomem_unsaid;	/* connections refused since that line */
	ev_timer drain_timer;
	ev_timer heartbeat; /* proves the loop turns, for the watchdog */
	ev_idle received_w; /* fed, never started: see on_received() */
	/* OP_RECEIVED, via next_received: bytes the cache has not been
	 * marked for yet, and bytes it has. */
	struct ep_conn *received, *marked;
	unsigned n_received;   /* on `received` */
	struct ep_conn *conns; /* all open connections */
	unsigned n_conns;
	bool accepting;
	struct stat_cache *sc; /* lookups and kept bodies, or NULL */
};

static struct ep_conn *ep_of(struct h1_conn *h)
{
	return (struct ep_conn *)((char *)h - offsetof(struct ep_conn, h1));
}

static void accept_set(struct ep_worker *ew, bool on)
{
	unsigned i;

	on = on && server_may_accept(ew->w);
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

/* Wait for `events` on the socket, and at most `after` seconds. */
static void watch(struct ep_conn *c, int events, double after)
{
	struct ev_loop *loop = c->ew->loop;

	if (!ev_is_active(&c->io) ||
	    (c->io.events & (EV_READ | EV_WRITE)) != events) {
		/* The fd stays (ev_io_modify): libev then changes epoll's
		 * registration only if the events differ when it next
		 * polls, and a READ -> WRITE -> READ turn costs nothing. */
		ev_io_stop(loop, &c->io);
		ev_io_modify(&c->io, events);
		ev_io_start(loop, &c->io);
	}
	ev_timer_stop(loop, &c->timer);
	ev_timer_set(&c->timer, after > 0 ? after : 0., 0.);
	ev_timer_start(loop, &c->timer);
}

static double until(int64_t deadline_ms)
{
	return (double)(deadline_ms - mono_ms()) / 1000.0;
}

/* ---- the transport ops ---- */

static void ep_recv(struct h1_conn *h, int64_t deadline_ms)
{
	struct ep_conn *c = ep_of(h);

	c->op = OP_RECV;
	watch(c, EV_READ, until(deadline_ms));
}

static void ep_respond(struct h1_conn *h, unsigned timeout_ms)
{
	struct ep_conn *c = ep_of(h);

	c->op = OP_RESPOND;
	c->send_timeout_ms = timeout_ms;
	c->head_sent = 0;
	c->body_sent = 0;
	c->src_ready = false;
	watch(c, EV_WRITE, timeout_ms / 1000.0);
	/* The socket is almost always writable: try in this turn of the
	 * loop (never inside the caller) instead of asking epoll first,
	 * which cost an epoll_ctl each way and a turn per response. */
	ev_feed_event(c->ew->loop, &c->io, EV_WRITE);
}

static void ep_linger(struct h1_conn *h, bool first, int64_t deadline_ms)
{
	struct ep_conn *c = ep_of(h);

	if (first)
		shutdown(c->fd, SHUT_WR);
	c->op = OP_LINGER;
	watch(c, EV_READ, until(deadline_ms));
}

/* The recv in flight completes with -ECANCELED on the next turn of the
 * loop, never inside the caller; a linger ends then as at its deadline. */
static void ep_cancel(struct h1_conn *h)
{
	struct ep_conn *c = ep_of(h);

	if (c->op == OP_LINGER) {
		watch(c, EV_READ, 0.);
		return;
	}
	if (c->op != OP_RECV)
		return;
	ev_io_stop(c->ew->loop, &c->io);
	ev_timer_stop(c->ew->loop, &c->timer);
	ev_feed_event(c->ew->loop, &c->io, EV_CUSTOM);
}

static void src_release(struct ep_conn *c);

static unsigned conn_cap(const struct ep_worker *ew)
{
	struct conn_budget b;
	unsigned fds = ew->w->srv->conn_fds;

	conn_budget(0, ew->w->cfg->max_connections, &b);
	return fds && fds < b.cap ? fds : b.cap;
}

static void received_unlink(struct ep_conn *c);
static void received_mark(struct ep_worker *ew);
static bool received_next(struct ep_worker *ew);

static void ep_close(struct h1_conn *h)
{
	struct ep_conn *c = ep_of(h);
	struct ep_worker *ew = c->ew;

	if (c->op == OP_RECEIVED)
		received_unlink(c);
	src_release(c);
	ev_io_stop(ew->loop, &c->io);
	ev_timer_stop(ew->loop, &c->timer);
	close(c->fd);
	if (c->prev)
		c->prev->next = c->next;
	else
		ew->conns = c->next;
	if (c->next)
		c->next->prev = c->prev;
	ew->n_conns--;
	free(c);
	if (!ew->hw.stopping && ew->n_conns < conn_cap(ew))
		accept_set(ew, true);
	if (ew->hw.stopping && !ew->n_conns)
		ev_break(ew->loop, EVBREAK_ONE);
}

static const struct h1_transport ep_transport = {
	.recv = ep_recv,
	.respond = ep_respond,
	.linger = ep_linger,
	.cancel = ep_cancel,
	.close = ep_close,
};

/* ---- readiness ---- */

/* One recv for the op in flight. True when there was nothing to read
 * and the op still waits; otherwise it completed (or its bytes wait
 * their turn) and c may be gone already. */
static bool do_recv(struct ep_conn *c)
{
	char *buf;
	size_t cap;
	ssize_t n;

	c->ew->core->rbuf(&c->h1, &buf, &cap);
	if (!cap) {
		c->op = OP_NONE;
		c->ew->core->received(&c->h1, -ENOMEM);
		return false;
	}
	n = recv(c->fd, buf, cap, 0);
	if (n < 0 && (errno == EAGAIN || errno == EINTR))
		return true;
	if (n > 0) {
		/* These bytes may postdate the cache's last read of change
		 * events: they go to the core after the turn's other recvs,
		 * and the lookup that plans from them reads again. */
		struct ep_worker *ew = c->ew;

		ev_timer_stop(ew->loop, &c->timer);
		c->op = OP_RECEIVED;
		c->received = (int)n;
		if (!ew->received && !ew->marked)
			ev_feed_event(ew->loop, &ew->received_w, EV_CUSTOM);
		c->next_received = ew->received;
		ew->received = c;
		if (++ew->n_received >= RECEIVED_MAX) {
			received_mark(ew);
			while (received_next(ew))
				;
		}
		return false;
	}
	c->op = OP_NONE;
	c->ew->core->received(&c->h1, n < 0 ? -errno : (int)n);
	return false;
}

static bool unlink_from(struct ep_conn **pp, struct ep_conn *c)
{
	while (*pp && *pp != c)
		pp = &(*pp)->next_received;
	if (!*pp)
		return false;
	*pp = c->next_received;
	c->next_received = NULL;
	return true;
}

static void received_unlink(struct ep_conn *c)
{
	if (unlink_from(&c->ew->received, c))
		c->ew->n_received--;
	else
		unlink_from(&c->ew->marked, c);
}

/* Every recv so far is in: the cache's next lookup reads change events
 * first, and their requests may go to the core. */
static void received_mark(struct ep_worker *ew)
{
	struct ep_conn *c;

	if (!ew->received)
		return;
	stat_cache_batch(ew->sc);
	while ((c = ew->received)) {
		ew->received = c->next_received;
		c->next_received = ew->marked;
		ew->marked = c;
	}
	ew->n_received = 0;
}

/* One marked request to the core; false when there was none. */
static bool received_next(struct ep_worker *ew)
{
	struct ep_conn *c = ew->marked;

	if (!c)
		return false;
	ew->marked = c->next_received;
	c->next_received = NULL;
	c->op = OP_NONE;
	ew->core->received(&c->h1, c->received);
	return true;
}

/*
 * After the turn's fd callbacks (lowest priority): one batch for the
 * cache, then the requests' bytes to the core, one connection per call.
 * It feeds itself again for the next, so the responses just fed (EV_WRITE,
 * a higher priority) go out in between and hand their buffers back to
 * the core's pools: 256 requests planned before any was sent held 256
 * response buffers at once and cost twice the CPU in malloc and page
 * faults (RECEIVED_MAX bounds the request buffers held the same way).
 */
static void on_received(struct ev_loop *loop, ev_idle *w, int revents)
{
	struct ep_worker *ew = w->data;

	(void)revents;
	received_mark(ew);
	if (received_next(ew) && ew->marked)
		ev_feed_event(loop, w, EV_CUSTOM);
}

static void do_linger(struct ep_conn *c)
{
	char scratch[4096];
	ssize_t n = recv(c->fd, scratch, sizeof(scratch), 0);

	if (n < 0 && (errno == EAGAIN || errno == EINTR))
		return;
	c->op = OP_NONE;
	c->ew->core->lingered(&c->h1, n < 0 ? -errno : (int)n);
}

/* ---- the body's source ---- */

/* Where this response's body comes from: the plan's fd (no cache), the
 * cache's kept bytes or open file, or a file opened here. 0, or how the
 * response ends before a byte is sent. */
static int src_choose(struct ep_conn *c)
{
	struct response_plan *p = &c->h1.resp->plan;
	struct orcd_config *cfg = c->h1.cfg;
	struct file_meta now;
	int fd, r;

	c->src_ready = true;
	if (!p->send_file || !p->length || p->fd >= 0)
		return 0;
	c->body = stat_cache_body(c->ew->sc, cfg, p->relpath, &p->meta);
	if (c->body) {
		if (c->body->fd >= 0)
			STAT_INC(c->ew->w, sendfile_bodies);
		return 0;
	}
	r = file_meta_lookup(cfg->root_fd, p->relpath[0] ? p->relpath : ".", 0,
			     &now, &fd);
	if (r == -EACCES || r == -EPERM)
		return H1_DENIED;
	if (r)
		return H1_REPLAN;
	/* Another file, or one shorter than the bytes the head promises:
	 * answer again. A file that only grew (a log being appended to)
	 * still holds those bytes, and sendfile sends no more. */
	if (fd < 0 || now.ino != p->meta.ino || now.dev != p->meta.dev ||
	    now.size < p->offset + p->length) {
		if (fd >= 0)
			close(fd);
		return H1_REPLAN;
	}
	c->file_fd = fd;
	c->file_exact = file_meta_same(&now, &p->meta);
	return 0;
}

/* A whole body went out from a file opened here: offer it to the cache
 * (small: its bytes; large: a mapping and the open file). */
static void src_offer(struct ep_conn *c)
{
	const struct response_plan *p = &c->h1.resp->plan;
	struct stat_cache *sc = c->ew->sc;

	/* Only the version the facts describe: not one that grew since. */
	if (!sc || c->file_fd < 0 || !c->file_exact)
		return;
	if (p->meta.size > STAT_CACHE_DATA_FILE)
		stat_cache_keep_map(sc, c->h1.cfg, p->relpath, &p->meta);
	else
		stat_cache_keep_read(sc, c->h1.cfg, p->relpath, &p->meta,
				     c->file_fd);
}

static void src_release(struct ep_conn *c)
{
	stat_cache_body_put(c->body);
	c->body = NULL;
	if (c->file_fd >= 0)
		close(c->file_fd);
	c->file_fd = -1;
	c->src_ready = false;
}

/* Head and body bytes kept in memory, in sendmsg calls of two iovecs. */
static int send_kept(struct ep_conn *c, bool *progress)
{
	struct response_plan *p = &c->h1.resp->plan;
	const char *body = c->body->data + p->offset;
	uint64_t budget = SENDFILE_CHUNK;

	while ((c->head_sent < p->head_len || c->body_sent < p->length) &&
	       budget) {
		struct iovec iov[2];
		struct msghdr m = {.msg_iov = iov};
		uint64_t want = p->length - c->body_sent;
		ssize_t n;

		if (c->head_sent < p->head_len) {
			iov[m.msg_iovlen].iov_base =
				c->h1.resp->buf + c->head_sent;
			iov[m.msg_iovlen++].iov_len =
				p->head_len - c->head_sent;
		}
		if (want) {
			iov[m.msg_iovlen].iov_base =
				(void *)(body + c->body_sent);
			iov[m.msg_iovlen++].iov_len =
				(size_t)(want < budget ? want : budget);
		}
		n = sendmsg(c->fd, &m, MSG_NOSIGNAL);
		if (n < 0)
			return errno == EAGAIN || errno == EINTR ? 0 : -1;
		c->h1.bytes_sent += (uint64_t)n;
		*progress = true;
		if (c->head_sent < p->head_len) {
			size_t h = p->head_len - c->head_sent;

			if ((size_t)n <= h) {
				c->head_sent += (size_t)n;
				continue;
			}
			c->head_sent = p->head_len;
			n -= (ssize_t)h;
		}
		c->body_sent += (uint64_t)n;
		budget -= (uint64_t)n < budget ? (uint64_t)n : budget;
	}
	return c->head_sent == p->head_len && c->body_sent == p->length;
}

/* Head by send (MSG_MORE when a body follows), body by sendfile in
 * bounded chunks. Returns 1 when all is out, 0 to wait, -1 on failure
 * (client gone, or the file shrank so Content-Length cannot be met). */
static int send_some(struct ep_conn *c, bool *progress)
{
	struct response_plan *p = &c->h1.resp->plan;
	const char *head = c->h1.resp->buf;
	uint64_t budget = SENDFILE_CHUNK;
	int fd = p->fd;

	if (c->body && c->body->fd >= 0)
		fd = c->body->fd;
	else if (c->body)
		return send_kept(c, progress);
	else if (c->file_fd >= 0)
		fd = c->file_fd;

	while (c->head_sent < p->head_len) {
		int more = p->send_file ? MSG_MORE : 0;
		ssize_t n = send(c->fd, head + c->head_sent,
				 p->head_len - c->head_sent,
				 MSG_NOSIGNAL | more);

		if (n < 0)
			return errno == EAGAIN || errno == EINTR ? 0 : -1;
		c->head_sent += (size_t)n;
		c->h1.bytes_sent += (uint64_t)n;
		*progress = true;
	}
	while (p->send_file && c->body_sent < p->length && budget) {
		off_t off = (off_t)(p->offset + c->body_sent);
		uint64_t want = p->length - c->body_sent;
		ssize_t n;

		if (want > budget)
			want = budget;
		n = sendfile(c->fd, fd, &off, want);
		if (n < 0)
			return errno == EAGAIN || errno == EINTR ? 0 : -1;
		if (n == 0)
			return -1;
		c->body_sent += (uint64_t)n;
		c->h1.bytes_sent += (uint64_t)n;
		budget -= (uint64_t)n;
		*progress = true;
	}
	if (p->send_file && c->body_sent < p->length)
		return 0;
	return 1;
}

static void do_respond(struct ep_conn *c)
{
	bool progress = false;
	int r;

	if (!c->src_ready) {
		int end = src_choose(c);

		if (end) {
			src_release(c);
			c->op = OP_NONE;
			c->ew->core->responded(&c->h1, end);
			return;
		}
	}
	r = send_some(c, &progress);
	if (r == 0) {
		/* The send timeout counts from the last progress. */
		if (progress)
			watch(c, EV_WRITE, c->send_timeout_ms / 1000.0);
		return;
	}
	if (r > 0)
		src_offer(c);
	src_release(c);
	c->op = OP_NONE;
	c->ew->core->responded(&c->h1, r > 0 ? H1_SENT : H1_FAILED);
}

static void conn_on_io(struct ev_loop *loop, ev_io *io, int revents)
{
	struct ep_conn *c =
		(struct ep_conn *)((char *)io - offsetof(struct ep_conn, io));

	c->ew->hw.clock.now = (time_t)ev_now(loop);
	if (revents & EV_CUSTOM) {
		/* The cancel: a request already in the socket (one that
		 * raced a close to make room) is received and answered, as
		 * h1_core's shed() promises, not reset by a close with
		 * unread bytes. */
		if (do_recv(c)) {
			c->op = OP_NONE;
			c->ew->core->received(&c->h1, -ECANCELED);
		}
		return;
	}
	switch (c->op) {
	case OP_RECV:
		if (revents & EV_READ)
			do_recv(c);
		break;
	case OP_RESPOND:
		if (revents & EV_WRITE)
			do_respond(c);
		break;
	case OP_LINGER:
		if (revents & EV_READ)
			do_linger(c);
		break;
	}
}

/* The op in flight ends with `err` (its timer, or the drain bound). */
static void conn_fail_op(struct ep_conn *c, int err)
{
	const struct h1_core *core = c->ew->core;
	uint8_t op = c->op;

	c->op = OP_NONE;
	switch (op) {
	case OP_RECEIVED:
		received_unlink(c);
		core->received(&c->h1, err);
		break;
	case OP_RECV:
		core->received(&c->h1, err);
		break;
	case OP_RESPOND:
		src_release(c);
		core->responded(&c->h1, H1_FAILED);
		break;
	case OP_LINGER:
		core->lingered(&c->h1, err);
		break;
	}
}

static void conn_on_timer(struct ev_loop *loop, ev_timer *t, int revents)
{
	struct ep_conn *c =
		(struct ep_conn *)((char *)t - offsetof(struct ep_conn, timer));

	(void)revents;
	c->ew->hw.clock.now = (time_t)ev_now(loop);
	conn_fail_op(c, -ETIMEDOUT);
}

/*
 * A client waits (its listener is readable) and max_connections are open,
 * or descriptors ran out (EMFILE): the oldest idle connections close for
 * it (DESIGN.md 3, Exhaustion), a batch at a time. Accepting pauses until
 * their closes make room (the close turns it back on); with none idle it
 * looks again shortly, since a busy connection may turn idle without
 * closing.
 */
static void make_room(struct ep_worker *ew)
{
	accept_set(ew, false);
	if (!ew->hw.n_shedding)
		ew->core->shed(&ew->hw);
	/* Set each time: a one-shot timer that fired keeps what was left
	 * of it (nothing), and would fire at once, turning accepting back
	 * on for a listener that is still ready: a spin. */
	if (!ev_is_active(&ew->accept_retry)) {
		ev_timer_set(&ew->accept_retry, ACCEPT_RETRY_S, 0.);
		ev_timer_start(ew->loop, &ew->accept_retry);
	}
}

static void on_accept(struct ev_loop *loop, ev_io *io, int revents)
{
	struct ep_worker *ew = io->data;
	unsigned cap = conn_cap(ew);

	(void)revents;
	ew->hw.clock.now = (time_t)ev_now(loop);
	if (ew->n_conns >= cap) {
		/* Full, and the listener is ready: a client waits. */
		make_room(ew);
		return;
	}
	while (ew->accepting && ew->n_conns < cap) {
		struct sockaddr_storage peer;
		socklen_t plen = sizeof(peer);
		int fd;
		struct ep_conn *c;

		fd = accept4(io->fd, (struct sockaddr *)&peer, &plen,
			     SOCK_NONBLOCK | SOCK_CLOEXEC);
		if (fd < 0) {
			if (errno == EMFILE || errno == ENFILE ||
			    errno == ENOBUFS || errno == ENOMEM) {
				/* Out of descriptors: back off instead of
				 * spinning on a listener that stays ready,
				 * and let idle connections go first, as at
				 * max_connections. Said at most once a
				 * second: at the limit accept4 fails even
				 * with nobody queued (it takes an fd
				 * before it looks). */
				if (mono_ms() - ew->accept_said_ms >= 1000) {
					ew->accept_said_ms = mono_ms();
					log_msg(LOG_WARNING,
						"accept: %s; pausing",
						strerror(errno));
				}
				make_room(ew);
			}
			return;
		}
		c = calloc(1, sizeof(*c));
		if (!c) {
			/* Nothing can hold the socket: close it. Said at most
			 * once a second, with a count, as direct's. */
			ew->nomem_unsaid++;
			if (mono_ms() - ew->nomem_said_ms >= 1000) {
				log_msg(LOG_ERR,
					"worker %u: no memory for a connection (%u refused since the last line)",
					ew->w->id, ew->nomem_unsaid);
				ew->nomem_said_ms = mono_ms();
				ew->nomem_unsaid = 0;
			}
			close(fd);
			return;
		}
		c->ew = ew;
		c->fd = fd;
		c->file_fd = -1;
		ev_io_init(&c->io, conn_on_io, fd, EV_READ);
		ev_timer_init(&c->timer, conn_on_timer, 0., 0.);
		c->next = ew->conns;
		if (ew->conns)
			ew->conns->prev = c;
		ew->conns = c;
		ew->n_conns++;
		ew->core->accepted(&c->h1, &ew->hw, &peer, plen);
	}
}

static void on_accept_retry(struct ev_loop *loop, ev_timer *t, int revents)
{
	struct ep_worker *ew = t->data;

	(void)loop;
	(void)revents;
	if (!ew->hw.stopping)
		accept_set(ew, true);
}

static void on_drain_timeout(struct ev_loop *loop, ev_timer *t, int revents)
{
	struct ep_worker *ew = t->data;
	char bound[24];

	(void)revents;
	config_fmt_duration(bound, sizeof(bound),
			    ew->w->cfg->shutdown_timeout_ms);
	/* With worker_shutdown_timeout 0 the bound may pass before the
	 * last connection is seen gone: nothing to say then. */
	if (ew->n_conns)
		log_msg(LOG_WARNING,
			"worker %u: %u connections still busy after %s; closing",
			ew->w->id, ew->n_conns, bound);
	ew->hw.drain_expired = true;
	/* With the bound passed, the core ends each connection at once. */
	while (ew->conns) {
		struct ep_conn *c = ew->conns;

		if (c->op == OP_NONE) {
			ew->core->discard(&c->h1);
			ep_close(&c->h1);
		} else {
			conn_fail_op(c, -ECANCELED);
		}
	}
	ev_break(loop, EVBREAK_ONE);
}

static void on_heartbeat(struct ev_loop *loop, ev_timer *t, int revents)
{
	struct ep_worker *ew = t->data;

	(void)loop;
	(void)revents;
	server_heartbeat(ew->w);
	/* A file replaced or deleted is let go within a second (it may be
	 * kept open and mapped) even by a worker no request comes to. */
	stat_cache_sync(ew->sc);
}

static void begin_stop(struct ep_worker *ew)
{
	struct ep_conn *c, *next;

	ew->hw.stopping = true;
	accept_set(ew, false);
	server_accepts_gone(ew->w);
	ev_timer_stop(ew->loop, &ew->accept_retry);
	ev_io_stop(ew->loop, &ew->wake_io);
	/* Connections waiting for a request go; busy ones finish their
	 * current response (the core closes them after it). */
	for (c = ew->conns; c; c = next) {
		next = c->next;
		ew->core->stop(&c->h1);
	}
	if (!ew->n_conns) {
		ev_break(ew->loop, EVBREAK_ONE);
		return;
	}
	/* worker_shutdown_timeout bounds the drain. */
	ev_timer_set(&ew->drain_timer,
		     ew->w->cfg->shutdown_timeout_ms / 1000.0, 0.);
	ev_timer_start(ew->loop, &ew->drain_timer);
}

/* Plans take facts from the cache where it can answer; elsewhere
 * (stat_cache 0, a 9p root) the plan looks the file up and opens it
 * (file_meta_lookup) and the body goes by sendfile from that fd, not
 * from another open at send time. */
static void use_cache(struct ep_worker *ew)
{
	ew->hw.plan_flags = stat_cache_active(ew->sc) ? 0 : RESPOND_KEEP_FD;
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
	stat_cache_use(ew->sc, ew->w->cfg);
	use_cache(ew);
	if (server_stopping(ew->w) && !ew->hw.stopping)
		begin_stop(ew);
	else if (!ew->hw.stopping && !ew->accepting &&
		 ew->n_conns < conn_cap(ew))
		accept_set(ew, true); /* a reload let go of its hold */
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

static unsigned open_fds(void)
{
	DIR *d = opendir("/proc/self/fd");
	unsigned n = 0;

	if (!d)
		return 0;
	while (readdir(d))
		n++;
	closedir(d);
	return n > 3 ? n - 3 : 0; /* ".", ".." and the DIR's own */
}

/*
 * epoll's sockets are fds, and so are the files it sends. The soft
 * RLIMIT_NOFILE is raised toward what max_connections needs in every
 * worker, a file for each connection included (as far as the hard limit
 * lets it; 1024 is the usual soft default).
 * Of each worker's share of what is free, its stat cache may keep up to
 * a quarter open, an eighth stays for the files requests open, and the
 * rest may be connections: however many sockets are open, a request for
 * a file then finds a descriptor, where sockets could otherwise take them
 * all. A download of a file the cache does not keep open holds its own
 * fd to the end, though: where the hard limit stops the raise short of
 * a file per connection, more of those at once than the free fds hold
 * get 503 (conf/DIRECTIVES.md, max_connections). Capping connections at
 * half would halve the idle connections such a limit holds, and the
 * io_uring engines' downloads wait for a slot instead.
 */
static int epoll_setup(struct orcd_server *srv, char *err, size_t cap)
{
	unsigned n = srv->n_workers ? srv->n_workers : 1, max;
	struct conn_budget b;
	rlim_t want, used = open_fds(), per, keep;
	struct rlimit rl;

	(void)err;
	(void)cap;
	conn_budget(0, srv->cfg->max_connections, &b);
	max = b.cap; /* max_connections, or its default when unset */
	want = (rlim_t)n * (2 * (rlim_t)max + STAT_CACHE_MAP_FDS) + 64;
	srv->conn_fds = 0; /* no cap but max_connections */
	srv->cache_fds = STAT_CACHE_MAP_FDS;
	if (getrlimit(RLIMIT_NOFILE, &rl))
		return 0;
	if (rl.rlim_cur < want) {
		rl.rlim_cur = want;
		if (rl.rlim_max != RLIM_INFINITY && rl.rlim_cur > rl.rlim_max)
			rl.rlim_cur = rl.rlim_max;
		/* Refused or not, what holds now is what counts. */
		setrlimit(RLIMIT_NOFILE, &rl);
		if (getrlimit(RLIMIT_NOFILE, &rl))
			return 0;
	}
	if (rl.rlim_cur == RLIM_INFINITY)
		return 0;
	per = rl.rlim_cur > used ? (rl.rlim_cur - used) / n : 0;
	/* The stat cache's open files out of the share first (at most a
	 * quarter of it), then an eighth of it for the files requests
	 * open. */
	keep = per / 4 < STAT_CACHE_MAP_FDS ? per / 4 : STAT_CACHE_MAP_FDS;
	srv->cache_fds = (unsigned)keep;
	per -= keep + per / 8;
	srv->conn_fds = per ? (unsigned)(per < UINT_MAX ? per : UINT_MAX) : 1;
	/* Said where max_connections asks for more; an unset one is a
	 * default that the limit cuts without a word, as slots do. */
	if (srv->cfg->max_connections && srv->conn_fds < max)
		log_msg(LOG_WARNING,
			"engine epoll: RLIMIT_NOFILE %llu holds %u connections per worker, fewer than max_connections %u (of each worker's share, an eighth stays for files and up to a quarter for the stat cache's)",
			(unsigned long long)rl.rlim_cur, srv->conn_fds, max);
	return 0;
}

static int epoll_run(struct orcd_worker *w)
{
	struct ep_worker ew = {.w = w, .core = w->core};
	unsigned i;

	/* libev aborts where it cannot allocate; a loop it does not make is
	 * an epoll instance the kernel refused, errno saying why (EMFILE
	 * where the fd limit is reached). EVFLAG_NOENV: LIBEV_FLAGS in the
	 * environment would replace these flags, and the engine named epoll
	 * would run on another backend. */
	errno = 0;
	ew.loop = ev_loop_new(EVBACKEND_EPOLL | EVFLAG_NOSIGMASK |
			      EVFLAG_NOENV);
	if (!ew.loop)
		return errno ? -errno : -ENOMEM;
	ew.core->worker_init(&ew.hw, w, &ep_transport);
	ew.sc = stat_cache_new(w->cfg, w->stats.stat_cache);
	stat_cache_limit_fds(ew.sc, w->srv->cache_fds);
	if (ew.sc) {
		ew.hw.lookup.fn = stat_cache_lookup_cb;
		ew.hw.lookup.ctx = ew.sc;
		ew.hw.lookup.readable = stat_cache_readable_cb;
		ew.hw.lookup_forget = stat_cache_forget_cb;
	} else {
		log_msg(LOG_WARNING, "worker %u: no memory for the stat cache",
			w->id);
	}
	use_cache(&ew);
	for (i = 0; i < w->n_listen; i++) {
		ev_io_init(&ew.listen_io[i], on_accept, w->listen_fds[i],
			   EV_READ);
		ew.listen_io[i].data = &ew;
	}
	ev_io_init(&ew.wake_io, on_wake, w->wake_fd, EV_READ);
	ew.wake_io.data = &ew;
	ev_io_start(ew.loop, &ew.wake_io);
	ev_timer_init(&ew.accept_retry, on_accept_retry, ACCEPT_RETRY_S, 0.);
	ew.accept_retry.data = &ew;
	ev_timer_init(&ew.drain_timer, on_drain_timeout, 0., 0.);
	ew.drain_timer.data = &ew;
	ev_idle_init(&ew.received_w, on_received);
	ev_set_priority(&ew.received_w, EV_MINPRI);
	ew.received_w.data = &ew;
	ev_timer_init(&ew.heartbeat, on_heartbeat, 0., 1.);
	ew.heartbeat.data = &ew;
	ev_timer_start(ew.loop, &ew.heartbeat);
	accept_set(&ew, true);
	if (server_stopping(w))
		begin_stop(&ew);
	if (!ew.hw.stopping || ew.n_conns)
		ev_run(ew.loop, 0);
	while (ew.conns) {
		struct ep_conn *c = ew.conns;

		ew.core->discard(&c->h1);
		ep_close(&c->h1);
	}
	ew.core->worker_fini(&ew.hw);
	stat_cache_free(ew.sc);
	ev_loop_destroy(ew.loop);
	return 0;
}

const struct orcd_engine orcd_engine_epoll = {
	.name = "epoll",
	.kind = ORCD_ENGINE_EPOLL,
	.probe = epoll_probe,
	.setup = epoll_setup,
	.run = epoll_run,
};
