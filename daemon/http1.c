// SPDX-License-Identifier: MIT
/*
 * The HTTP/1 connection core (see http1.h): one request state machine for
 * every engine.
 *
 *   accepted -> read -> received ... -> input -> plan -> respond
 *        ^                                                  |
 *        +---- keep-alive: the next (pipelined) request <---+ responded
 *                                                           |
 *   close: lingering (shutdown, drain, then close) or abortive
 *
 * Each transport op completes exactly once, through the h1_core function
 * of the same name; the core never waits and never blocks.
 */
#include "http1.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "log.h"
#include "server.h"

/* A lingering close drains until the client is quiet for LINGER_QUIET_MS
 * (it read our response and closed, or stopped sending), and for at most
 * LINGER_MAX_MS however much comes: a client still sending (an upload
 * answered early) must not make the close reset the response's tail
 * still on its way. nginx: lingering_timeout 5 s, lingering_time 30 s;
 * bounded by time alone, as a byte bound would reset the very clients
 * that pipelined the most. */
#define LINGER_QUIET_MS 2000
#define LINGER_MAX_MS 30000
/* Empty lines a waiting connection may send before a request: RFC 9112
 * 2.2 asks that at least one be ignored; more than this many bytes of
 * them is no client's request, and is answered 400. */
#define BLANK_MAX 64
/* Free buffers kept for reuse, in bytes per kind; beyond this they go
 * back to malloc. A worker that batches its waits (wait_batch.h) has a
 * turn's worth of responses out at once: at 256 connections more than
 * the 64 buffers this used to keep, and every 64 KiB buffer freed past
 * them went back to malloc, which trimmed the heap between turns and
 * grew it again (perf: sysmalloc and page faults, a third of the CPU;
 * 30 us per 1 KiB request instead of 6). Only the pages a buffer was
 * written to are resident. */
#define POOL_BYTES (8u << 20)
/* The response buffer must hold any head (and error page) respond_plan
 * renders: at least HEAD_ROOM, and a directory's redirect, whose
 * Location repeats the request's target with up to three bytes for each
 * (percent-encoded), beside the rest of its head and page (under 1 KiB). */
#define HEAD_ROOM 8192

/* ---- buffers ---- */

static size_t resp_cap(const struct h1_worker *hw)
{
	const struct orcd_config *cfg = hw->w->cfg;
	size_t cap = 3 * (size_t)cfg->max_request_line + 1024;

	if (cap < HEAD_ROOM)
		cap = HEAD_ROOM;
	if (hw->bodies_in_buffer && cfg->buffer_size > cap)
		cap = cfg->buffer_size;
	return cap;
}

/* A buffer malloc refused: its connection closes. Said at most once a
 * second, with a count (a flood would write a line each); the first
 * refusal is said at once. */
static void say_nomem(struct h1_worker *hw)
{
	int64_t now = mono_ms();

	hw->nomem_unsaid++;
	if (now - hw->nomem_said_ms < 1000)
		return;
	log_msg(LOG_ERR,
		"worker %u: no memory for a connection's buffer (%u refused "
		"since the last line or start-up): its connection closes",
		hw->w->id, hw->nomem_unsaid);
	hw->nomem_said_ms = now;
	hw->nomem_unsaid = 0;
}

static struct h1_resp *resp_get(struct h1_worker *hw)
{
	size_t cap = resp_cap(hw);
	struct h1_resp *r;

	while ((r = hw->free_resps)) {
		hw->free_resps = r->next;
		hw->free_resp_bytes -= r->cap;
		if (r->cap == cap)
			return r;
		free(r); /* buffer_size changed on reload */
	}
	r = malloc(sizeof(*r) + cap);
	if (!r) {
		say_nomem(hw);
		return NULL;
	}
	r->cap = cap;
	r->plan.fd = -1;
	return r;
}

/* Before a plan is rendered again: the file an earlier one opened goes. */
static void drop_fd(struct h1_resp *r)
{
	if (r->plan.fd >= 0)
		close(r->plan.fd);
	r->plan.fd = -1;
}

static void resp_put(struct h1_worker *hw, struct h1_resp *r)
{
	drop_fd(r);
	if (hw->free_resp_bytes + r->cap > POOL_BYTES) {
		free(r);
		return;
	}
	hw->free_resp_bytes += r->cap;
	r->next = hw->free_resps;
	hw->free_resps = r;
}

/* The connection's request buffer, from the pool if one is free. A free
 * buffer keeps the next pointer and its capacity in its first bytes. */
static bool in_get(struct h1_conn *c)
{
	struct h1_worker *hw = c->hw;
	size_t cap = hw->w->cfg->max_header_bytes;

	if (cap < hw->in_min)
		cap = hw->in_min;
	if (c->in)
		return true;
	while (hw->free_ins) {
		char *b = hw->free_ins;

		size_t bcap = *(size_t *)(b + sizeof(char *));

		memcpy(&hw->free_ins, b, sizeof(char *));
		hw->free_in_bytes -= bcap;
		if (bcap == cap) {
			c->in = b;
			c->in_cap = cap;
			return true;
		}
		free(b); /* max_header_bytes changed on reload */
	}
	c->in = malloc(cap < 2 * sizeof(char *) ? 2 * sizeof(char *) : cap);
	c->in_cap = cap;
	if (!c->in)
		say_nomem(hw);
	return c->in != NULL;
}

/* Forget what is buffered, and the parse of it. */
static void in_clear(struct h1_conn *c)
{
	c->in_len = 0;
	memset(&c->parse, 0, sizeof(c->parse));
}

/* Give the request buffer back while nothing is buffered in it: an idle
 * keep-alive connection holds none. */
static void in_put(struct h1_conn *c)
{
	struct h1_worker *hw = c->hw;

	if (!c->in)
		return;
	if (hw->free_in_bytes + c->in_cap > POOL_BYTES) {
		free(c->in);
		c->in = NULL;
		return;
	}
	hw->free_in_bytes += c->in_cap;
	memcpy(c->in, &hw->free_ins, sizeof(char *));
	memcpy(c->in + sizeof(char *), &c->in_cap, sizeof(size_t));
	hw->free_ins = c->in;
	c->in = NULL;
}

static void rbuf(struct h1_conn *c, char **buf, size_t *cap)
{
	if (!in_get(c)) {
		*buf = NULL;
		*cap = 0;
		return;
	}
	*buf = c->in + c->in_len;
	*cap = c->in_cap - c->in_len;
}

/* ---- what shed() may close: idle and lingering connections ---- */

static void list_leave(struct h1_conn *c)
{
	struct h1_list *l = c->on;

	if (!l)
		return;
	c->on = NULL;
	if (c->newer)
		c->newer->older = c->older;
	else
		l->newest = c->older;
	if (c->older)
		c->older->newer = c->newer;
	else
		l->oldest = c->newer;
	c->newer = c->older = NULL;
	l->n--;
}

/* c becomes the newest of l (leaving the list it was on). */
static void list_enter(struct h1_conn *c, struct h1_list *l)
{
	if (c->on == l)
		return;
	list_leave(c);
	c->on = l;
	c->newer = NULL;
	c->older = l->newest;
	if (l->newest)
		l->newest->newer = c;
	else
		l->oldest = c;
	l->newest = c;
	l->n++;
}

/* Its recv came back: bytes (a request raced the close: answer it) or
 * the cancel. Either way it no longer counts as being shed. */
static void shed_done(struct h1_conn *c)
{
	if (!c->shed)
		return;
	c->shed = false;
	c->hw->n_shedding--;
}

/* Closes c for room: its recv or linger is cancelled, and its close
 * follows when that comes back. */
static void shed_one(struct h1_conn *c)
{
	if (c->state == H1_LINGERING) /* a drain re-armed ends at once */
		c->linger_end = c->linger_deadline = mono_ms();
	list_leave(c);
	c->shed = true;
	c->hw->n_shedding++;
	c->hw->tp->cancel(c);
}

static unsigned shed(struct h1_worker *hw)
{
	unsigned n = hw->idle.n / 8, i = 0;
	int64_t now = mono_ms();

	if (n > 32)
		n = 32;
	if (!n && hw->idle.n)
		n = 1;
	if ((n || hw->lingering.n) && now - hw->shed_said_ms >= 1000) {
		hw->shed_said_ms = now;
		log_msg(LOG_WARNING,
			"worker %u: no room for new connections: closing "
			"lingering and the oldest idle ones",
			hw->w->id);
	}
	/* A lingering connection had its answer: the drain is only a
	 * courtesy, and a client that trickles bytes into it (a slowloris
	 * after its 408) would hold the room for LINGER_MAX_MS. These go
	 * first, and do not count against the idle ones' batch. */
	while (hw->lingering.oldest && i < 32) {
		shed_one(hw->lingering.oldest);
		i++;
	}
	for (; n && hw->idle.oldest; n--, i++)
		shed_one(hw->idle.oldest);
	return i;
}

/* ---- the end of a connection ---- */

static void release(struct h1_conn *c)
{
	struct h1_worker *hw = c->hw;

	list_leave(c);
	shed_done(c);
	if (c->resp)
		resp_put(hw, c->resp);
	c->resp = NULL;
	if (c->cfg)
		server_cfg_unpin(hw->w, c->cfg);
	c->cfg = NULL;
	in_clear(c);
	in_put(c);
	STAT_DEC(hw->w, conns_open);
}

/*
 * End the connection. Graceful: shut down our side and drain what the
 * client still sends for a moment, so that unread request bytes do not
 * make the kernel answer our last response with a reset, which would
 * destroy response bytes still on their way. Abortive: close now.
 */
static void conn_close(struct h1_conn *c, bool abortive)
{
	struct h1_worker *hw = c->hw;
	int64_t now;

	if (abortive || hw->drain_expired) {
		release(c);
		hw->tp->close(c);
		return;
	}
	/* Whatever is still buffered will never be answered. */
	in_clear(c);
	now = mono_ms();
	c->linger_end = now + LINGER_MAX_MS;
	c->linger_deadline = now + LINGER_QUIET_MS;
	c->state = H1_LINGERING;
	list_enter(c, &hw->lingering);
	hw->tp->linger(c, true, c->linger_deadline);
}

static void lingered(struct h1_conn *c, int res)
{
	if (res > 0 && !c->hw->drain_expired && !c->shed) {
		int64_t quiet = mono_ms() + LINGER_QUIET_MS;

		/* Stopping, the drain keeps the deadline it had: a client
		 * that sends on does not hold the stop for 30 s. */
		if (!c->hw->stopping)
			c->linger_deadline =
				quiet < c->linger_end ? quiet : c->linger_end;
		c->hw->tp->linger(c, false, c->linger_deadline);
		return;
	}
	release(c);
	c->hw->tp->close(c);
}

/* ---- reading a request ---- */

static bool spare(const struct h1_conn *c)
{
	return c->fresh && server_spare_fresh(c->hw->w);
}

/* Wait for (more of) a head: the idle timeout before its first byte,
 * then its absolute deadline, however it trickles in. */
static void read_more(struct h1_conn *c)
{
	struct h1_worker *hw = c->hw;
	int64_t deadline = c->hdr_deadline;

	if (hw->stopping && !c->in_len && !spare(c)) {
		/* Stopping. A connection whose last answer said keep-alive
		 * (planned before the stop) may have its next request here
		 * already, behind the answer (in the transport, a multishot
		 * stash): one last look takes what has come, and waits for
		 * nothing more. */
		if (c->fresh || c->last_look) {
			conn_close(c, true);
			return;
		}
		c->last_look = true;
		deadline = mono_ms();
	} else if (!c->in_len) {
		in_put(c);
		list_enter(c, &hw->idle);
		/* From when it began to wait (0: a request since): empty
		 * lines do not make an idle connection younger. */
		if (!c->idle_deadline)
			c->idle_deadline =
				mono_ms() + hw->w->cfg->idle_timeout_ms;
		deadline = c->idle_deadline;
	}
	c->state = H1_READING;
	hw->tp->recv(c, deadline);
}

static void start_response(struct h1_conn *c)
{
	c->state = H1_RESPONDING;
	c->hw->tp->respond(c, c->hw->w->cfg->send_timeout_ms);
}

/* Answer with an error that closes the connection; req is not usable. */
static void fail(struct h1_conn *c, int status)
{
	struct h1_worker *hw = c->hw;
	bool head_only;

	c->have_req = false;
	if (!c->resp)
		c->resp = resp_get(hw);
	if (c->resp)
		drop_fd(c->resp);
	/* A request line scanned as far as its method (the parser sets it
	 * then; each head starts from GET): a HEAD's answer has no body,
	 * even an error's. */
	head_only = c->req.method == HTTP_METHOD_HEAD;
	if (!c->resp ||
	    respond_error(hw->w->cfg, status, head_only, &hw->clock,
			  c->resp->buf, c->resp->cap, &c->resp->plan)) {
		conn_close(c, true);
		return;
	}
	c->bytes_sent = 0;
	c->replans = 0;
	start_response(c);
}

/* Send the plan just rendered into c->resp (err: rendering failed). */
static void answer(struct h1_conn *c, int err)
{
	if (err) {
		log_msg(LOG_ERR, "worker %u: cannot render response (%s)",
			c->hw->w->id, strerror(-err));
		fail(c, 500);
		return;
	}
	start_response(c);
}

/* Plan the response to c->req (again, after a transfer found the file
 * other than planned: then whatever a cache holds is suspect, and this
 * answer comes from a lookup of its own). */
static void plan(struct h1_conn *c)
{
	struct h1_worker *hw = c->hw;
	const struct respond_lookup *lk = hw->lookup.fn ? &hw->lookup : NULL;

	if (!c->cfg)
		c->cfg = server_cfg_pin(hw->w);
	if (c->replans) {
		if (hw->lookup_forget)
			hw->lookup_forget(hw->lookup.ctx,
					  c->resp->plan.relpath);
		lk = NULL;
	}
	/* Stopping: this is the connection's last answer, and its head says
	 * so (RFC 9112 9.6), so that a client knows to retry what it
	 * pipelined behind it. */
	if (hw->stopping)
		c->req.keep_alive = false;
	drop_fd(c->resp);
	answer(c, respond_plan(c->cfg, lk, &c->req, &hw->clock, hw->plan_flags,
			       c->resp->buf, c->resp->cap, &c->resp->plan));
}

/* Parse what has arrived; answer a complete head or read more. */
static void input(struct h1_conn *c)
{
	struct h1_worker *hw = c->hw;
	const struct orcd_config *cfg = hw->w->cfg;
	struct http_limits lim = {
		.max_request_line = cfg->max_request_line,
		.max_header_bytes = cfg->max_header_bytes,
		.max_headers = cfg->max_headers,
	};
	enum http_parse_result r;
	int status = 0;
	size_t blank = http_empty_lines(c->in, c->in_len);

	if (blank) {
		/* Empty lines before a request (a stray CRLF after the last
		 * one) begin no request: dropped, so that a connection with
		 * nothing else stays idle (idle_timeout, first to be let go)
		 * instead of waiting out header_timeout for a 408 nobody
		 * asked for. The parse restarts on what is left. They keep
		 * the idle deadline they found, and a flood of them (which
		 * would keep a connection and a core busy) is refused. */
		memmove(c->in, c->in + blank, c->in_len - blank);
		c->in_len -= blank;
		memset(&c->parse, 0, sizeof(c->parse));
		if (blank > BLANK_MAX - c->blank_bytes) {
			memset(&c->req, 0, sizeof(c->req)); /* no line, no HEAD */
			fail(c, 400);
			return;
		}
		c->blank_bytes += (unsigned)blank;
	}
	if (!c->in_len) {
		read_more(c);
		return;
	}
	/* A request has begun, unless all there is is the CR of another
	 * empty line: the next wait for one starts afresh. */
	if (c->in_len > 1 || c->in[0] != '\r') {
		c->blank_bytes = 0;
		c->idle_deadline = 0;
	}
	/* From where the last parse of this head stopped: a head that
	 * trickles in is scanned once, however many pieces it comes in. */
	r = http_parse_more(c->in, c->in_len, &lim, &c->req, &status,
			    &c->parse);
	if (r != HTTP_PARSE_INCOMPLETE)
		memset(&c->parse, 0, sizeof(c->parse));
	switch (r) {
	case HTTP_PARSE_INCOMPLETE:
		if (c->in_len >= c->in_cap)
			fail(c, 431);
		else
			read_more(c);
		return;
	case HTTP_PARSE_ERROR:
		fail(c, status);
		return;
	case HTTP_PARSE_OK:
		break;
	}
	c->have_req = true;
	c->fresh = false;
	if (!c->resp)
		c->resp = resp_get(hw);
	if (!c->resp) {
		conn_close(c, true);
		return;
	}
	c->bytes_sent = 0;
	c->replans = 0;
	plan(c);
}

static void received(struct h1_conn *c, int res)
{
	struct h1_worker *hw = c->hw;

	list_leave(c);
	if (c->shed && res <= 0)
		STAT_INC(hw->w, idle_closed);
	shed_done(c);
	if (res > 0) {
		if (!c->in_len)
			c->hdr_deadline =
				mono_ms() + hw->w->cfg->header_timeout_ms;
		c->in_len += (size_t)res;
		input(c);
		return;
	}
	if (res == -ETIMEDOUT && c->in_len && !hw->drain_expired) {
		/* RFC 9110 15.5.9: say why before closing. */
		fail(c, 408);
		return;
	}
	/* A client too far ahead: what it was answered must not be reset
	 * by a close with its bytes unread. */
	if (res == -EMSGSIZE) {
		conn_close(c, false);
		return;
	}
	/* 0: the client closed; idle timeout; stopping; or the connection
	 * broke. */
	conn_close(c, true);
}

/* ---- the end of a response ---- */

static void log_response(struct h1_conn *c)
{
	struct orcd_worker *w = c->hw->w;
	int status = c->resp->plan.status;
	int cls = status / 100;

	STAT_INC(w, requests);
	if (cls >= 2 && cls <= 5)
		STAT_INC(w, status_class[cls]);
	STAT_ADD(w, bytes_sent, c->bytes_sent);
	if (w->log.l)
		access_log_write(&w->log, (struct sockaddr *)&c->peer,
				 c->req.request_line.n ? &c->req : NULL, status,
				 respond_body_bytes(&c->resp->plan,
						    c->bytes_sent),
				 c->hw->clock.now);
}

static void response_release(struct h1_conn *c)
{
	resp_put(c->hw, c->resp);
	c->resp = NULL;
	if (c->cfg) {
		server_cfg_unpin(c->hw->w, c->cfg);
		c->cfg = NULL;
	}
	c->req.request_line.n = 0;
}

static void response_done(struct h1_conn *c)
{
	struct h1_worker *hw = c->hw;
	/* Stopping, an answer that said keep-alive still lets a request
	 * already behind it be answered (read_more: the last look). */
	bool keep = c->resp->plan.keep_alive && c->have_req;
	size_t used = c->have_req ? c->req.head_len : c->in_len;

	log_response(c);
	response_release(c);
	c->have_req = false;
	if (!keep) {
		conn_close(c, false);
		return;
	}
	/* Whatever follows the head is the next pipelined request. */
	memmove(c->in, c->in + used, c->in_len - used);
	c->in_len -= used;
	if (c->in_len)
		c->hdr_deadline = mono_ms() + hw->w->cfg->header_timeout_ms;
	input(c);
}

static void responded(struct h1_conn *c, enum h1_end end)
{
	struct h1_worker *hw = c->hw;

	if (hw->drain_expired && end != H1_SENT)
		end = H1_FAILED;
	switch (end) {
	case H1_SENT:
		response_done(c);
		return;
	case H1_REPLAN:
		/* Nothing went out: the file changed between the plan and
		 * the transfer. Answer from fresh facts (a 404 after a
		 * delete, the new length after a truncate), twice at most;
		 * a file that changes faster than that gets a 503. */
		if (c->have_req && c->replans < 2) {
			c->replans++;
			plan(c);
			return;
		}
		if (c->have_req) {
			fail(c, 503);
			return;
		}
		break;
	case H1_DENIED:
		/* The plan looked the file up with O_PATH, which needs no
		 * read permission: only the transfer's open finds out. */
	case H1_BUSY:
		/* No file slot for send_timeout: as epoll's EMFILE, a 503
		 * the client may retry on this connection (the error page
		 * needs no file). */
		if (c->have_req) {
			if (hw->stopping)
				c->req.keep_alive = false;
			drop_fd(c->resp);
			answer(c, respond_status(&c->req,
						 end == H1_DENIED ? 403 : 503,
						 &hw->clock, c->resp->buf,
						 c->resp->cap, &c->resp->plan));
			return;
		}
		break;
	case H1_FAILED:
		break;
	}
	/* The response did not make it: log what was sent and end the
	 * connection without more bytes. */
	log_response(c);
	response_release(c);
	c->have_req = false;
	conn_close(c, true);
}

/* ---- engines' entry points ---- */

static void accepted(struct h1_conn *c, struct h1_worker *hw,
		     const struct sockaddr_storage *peer, socklen_t plen)
{
	memset(c, 0, sizeof(*c));
	c->hw = hw;
	c->fresh = true;
	if (plen > sizeof(c->peer))
		plen = sizeof(c->peer);
	memcpy(&c->peer, peer, plen);
	STAT_INC(hw->w, conns_accepted);
	STAT_INC(hw->w, conns_open);
	if (hw->stopping && !spare(c))
		conn_close(c, true);
	else
		read_more(c);
}

/* A connection with part of a head in goes on reading it, within its
 * header deadline (and the stop's drain bound), and is answered. */
static void stop(struct h1_conn *c)
{
	if (c->state == H1_READING && !c->in_len && !spare(c))
		c->hw->tp->cancel(c);
}

static void discard(struct h1_conn *c)
{
	release(c);
}

static void worker_init(struct h1_worker *hw, struct orcd_worker *w,
			const struct h1_transport *tp)
{
	memset(hw, 0, sizeof(*hw));
	hw->w = w;
	hw->tp = tp;
	hw->clock.now = time(NULL);
}

static void worker_fini(struct h1_worker *hw)
{
	while (hw->free_ins) {
		char *b = hw->free_ins;

		memcpy(&hw->free_ins, b, sizeof(char *));
		free(b);
	}
	while (hw->free_resps) {
		struct h1_resp *r = hw->free_resps;

		hw->free_resps = r->next;
		free(r);
	}
	hw->free_in_bytes = hw->free_resp_bytes = 0;
}

const struct h1_core h1_core = {
	.worker_init = worker_init,
	.worker_fini = worker_fini,
	.accepted = accepted,
	.rbuf = rbuf,
	.received = received,
	.responded = responded,
	.lingered = lingered,
	.stop = stop,
	.discard = discard,
	.shed = shed,
};
