// SPDX-License-Identifier: MIT
/*
 * A connection of the io_uring engines: reading request heads (recv with
 * a linked timeout), planning the response, keep-alive and pipelining,
 * and the end of the connection (lingering close, then the close of its
 * socket slot).
 *
 * Every SQE a connection submits belongs to its current batch; the batch
 * is judged only when all of its CQEs are in (c->pending == 0), so a
 * decision never races a completion still on its way.
 */
#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "log.h"
#include "server.h"
#include "uring.h"

/* A lingering close drains at most this much, for at most LINGER_MS. */
#define LINGER_BYTES (64u * 1024)
#define LINGER_MS    2000
/* Free buffers kept for reuse; beyond this they go back to malloc. */
#define POOL_MAX     64
/* The output buffer must hold any head respond_plan renders. */
#define RESP_MIN_CAP 4096

static void ts_rel(struct __kernel_timespec *ts, unsigned ms)
{
	ts->tv_sec = ms / 1000;
	ts->tv_nsec = (long long)(ms % 1000) * 1000000;
}

static void ts_deadline(struct __kernel_timespec *ts, unsigned ms)
{
	struct timespec now;

	clock_gettime(CLOCK_MONOTONIC, &now);
	ts->tv_sec = now.tv_sec + ms / 1000;
	ts->tv_nsec = now.tv_nsec + (long long)(ms % 1000) * 1000000;
	if (ts->tv_nsec >= 1000000000) {
		ts->tv_sec++;
		ts->tv_nsec -= 1000000000;
	}
}

/* ---- pools (allocation only when the pool is empty) ---- */

static struct uresp *resp_get(struct uring_worker *uw)
{
	size_t cap = uw->w->cfg->buffer_size;
	struct uresp *r;

	if (cap < RESP_MIN_CAP)
		cap = RESP_MIN_CAP;
	while ((r = uw->free_resps)) {
		uw->free_resps = r->next;
		uw->n_free_resps--;
		if (r->cap == cap)
			return r;
		free(r); /* buffer_size changed on reload */
	}
	r = malloc(sizeof(*r) + cap);
	if (r)
		r->cap = cap;
	return r;
}

static void resp_put(struct uring_worker *uw, struct uresp *r)
{
	if (uw->n_free_resps >= POOL_MAX) {
		free(r);
		return;
	}
	uw->n_free_resps++;
	r->next = uw->free_resps;
	uw->free_resps = r;
}

/* The connection's request buffer, from the pool if one is free. */
static bool in_get(struct uconn *c)
{
	struct uring_worker *uw = c->uw;
	size_t cap = uw->w->cfg->max_header_bytes;

	if (c->in)
		return true;
	while (uw->free_ins) {
		char *b = uw->free_ins;

		memcpy(&uw->free_ins, b, sizeof(char *));
		uw->n_free_ins--;
		if (*(size_t *)(b + sizeof(char *)) == cap) {
			c->in = b;
			c->in_cap = cap;
			return true;
		}
		free(b); /* max_header_bytes changed on reload */
	}
	c->in = malloc(cap < 2 * sizeof(char *) ? 2 * sizeof(char *) : cap);
	c->in_cap = cap;
	return c->in != NULL;
}

/* Give the request buffer back while nothing is buffered in it. */
static void in_put(struct uconn *c)
{
	struct uring_worker *uw = c->uw;

	if (!c->in)
		return;
	if (uw->n_free_ins >= POOL_MAX) {
		free(c->in);
		c->in = NULL;
		return;
	}
	uw->n_free_ins++;
	memcpy(c->in, &uw->free_ins, sizeof(char *));
	memcpy(c->in + sizeof(char *), &c->in_cap, sizeof(size_t));
	uw->free_ins = c->in;
	c->in = NULL;
}

struct uconn *uconn_new(struct uring_worker *uw, int sock,
			const struct sockaddr_storage *peer, socklen_t plen)
{
	struct uconn *c = uw->free_conns;

	if (c)
		uw->free_conns = c->next;
	else
		c = aligned_alloc(URING_ALIGN, sizeof(*c));
	if (!c) {
		/* Nothing can hold the socket (out of memory): close it. */
		uring_close_orphan(uw, sock);
		return NULL;
	}
	memset(c, 0, sizeof(*c));
	c->kind = UOP_CONN;
	c->uw = uw;
	c->sock = sock;
	c->file = -1;
	c->fresh = true;
	if (plen > sizeof(c->peer))
		plen = sizeof(c->peer);
	memcpy(&c->peer, peer, plen);
	c->next = uw->conns;
	if (uw->conns)
		uw->conns->prev = c;
	uw->conns = c;
	uw->n_conns++;
	STAT_INC(uw->w, conns_open);
	return c;
}

static void uconn_release(struct uconn *c)
{
	struct uring_worker *uw = c->uw;

	if (c->prev)
		c->prev->next = c->next;
	else
		uw->conns = c->next;
	if (c->next)
		c->next->prev = c->prev;
	uw->n_conns--;
	STAT_DEC(uw->w, conns_open);
	if (c->resp)
		resp_put(uw, c->resp);
	if (c->cfg)
		config_put(c->cfg);
	c->resp = NULL;
	c->cfg = NULL;
	in_put(c);
	c->next = uw->free_conns;
	uw->free_conns = c;
}

void uconn_free_all(struct uring_worker *uw)
{
	while (uw->conns)
		uconn_release(uw->conns);
	while (uw->free_conns) {
		struct uconn *c = uw->free_conns;

		uw->free_conns = c->next;
		free(c);
	}
	while (uw->free_ins) {
		char *b = uw->free_ins;

		memcpy(&uw->free_ins, b, sizeof(char *));
		free(b);
	}
	while (uw->free_resps) {
		struct uresp *r = uw->free_resps;

		uw->free_resps = r->next;
		free(r);
	}
}

/* ---- batches ---- */

bool uconn_track(struct uconn *c, struct io_uring_sqe *sqe, enum ustep st,
		 uint32_t want)
{
	io_uring_sqe_set_data64(sqe, (uint64_t)(uintptr_t)c | (uint64_t)st);
	c->pending++;
	c->step_mask |= 1u << st;
	c->res[st] = INT_MIN;
	c->want[st] = want;
	return true;
}

static void batch_begin(struct uconn *c)
{
	c->step_mask = 0;
	c->timed_out = false;
	c->cancel_sent = false;
}

void uconn_defer(struct uconn *c, void (*retry)(struct uconn *c))
{
	struct uring_worker *uw = c->uw;

	c->retry = retry;
	if (c->is_deferred)
		return;
	c->is_deferred = true;
	c->next_deferred = uw->deferred;
	uw->deferred = c;
}

static void recv_done(struct uconn *c);
static void linger_done(struct uconn *c);
static void closing_done(struct uconn *c);

static void batch_done(struct uconn *c)
{
	switch (c->state) {
	case CS_RECV:
		recv_done(c);
		break;
	case CS_RESP:
		uchain_batch_done(c);
		break;
	case CS_LINGER:
		linger_done(c);
		break;
	case CS_CLOSING:
		closing_done(c);
		break;
	default:
		log_msg(LOG_ERR, "worker %u: completion in state %d",
			c->uw->w->id, c->state);
		break;
	}
}

void uconn_handle_cqe(struct uconn *c, enum ustep st, int res, unsigned cflags)
{
	if (cflags & IORING_CQE_F_BUFFER) {
		/* A recv that picked a provided buffer: take the bytes now and
		 * give the buffer straight back to the ring. */
		struct uring_worker *uw = c->uw;
		unsigned bid = cflags >> IORING_CQE_BUFFER_SHIFT;

		if (res > 0 && c->state == CS_RECV) {
			if (in_get(c) && (size_t)res <= c->in_cap - c->in_len)
				memcpy(c->in + c->in_len,
				       uw->br_bufs + (size_t)bid * uw->br_size,
				       (size_t)res);
			else
				res = -ENOMEM;
		}
		uring_br_recycle(uw, bid);
	}
	if (st < ST_MAX && st != ST_CANCEL)
		c->res[st] = res;
	if ((st == ST_RECV_LT || st == ST_SEND_LT) && res == -ETIME)
		c->timed_out = true;
	if (--c->pending == 0)
		batch_done(c);
}

/* ---- reading a request ---- */

static void arm_recv(struct uconn *c)
{
	struct uring_worker *uw = c->uw;
	struct io_uring_sqe *sqe;
	unsigned tflags = 0;

	if (uw->stopping && !c->in_len &&
	    !(c->fresh && server_spare_fresh(uw->w))) {
		/* A deferred re-arm after the stop began: nothing to wait
		 * for. */
		uconn_close(c, true);
		return;
	}
	sqe = uring_sqe(uw, 2);
	if (!sqe) {
		uconn_defer(c, arm_recv);
		return;
	}
	if (!c->in_len && uw->br) {
		/* Nothing buffered: let the kernel pick a buffer when bytes
		 * arrive, so a waiting connection holds none. */
		in_put(c);
	} else if (!in_get(c)) {
		uconn_close(c, true);
		return;
	}
	batch_begin(c);
	c->state = CS_RECV;
	if (c->in) {
		io_uring_prep_recv(sqe, c->sock, c->in + c->in_len,
				   c->in_cap - c->in_len, 0);
	} else {
		io_uring_prep_recv(sqe, c->sock, NULL, uw->br_size, 0);
		sqe->flags |= IOSQE_BUFFER_SELECT;
		sqe->buf_group = URING_BGID;
	}
	sqe->flags |= uw->fl->slot_sqe_flag | IOSQE_IO_LINK;
	uconn_track(c, sqe, ST_RECV, 0);
	sqe = io_uring_get_sqe(&uw->ring);
	if (c->in_len) {
		/* A head has started: it must be complete by its deadline,
		 * however it trickles in. */
		c->ts_recv = c->hdr_deadline;
		tflags = IORING_TIMEOUT_ABS;
	} else {
		ts_rel(&c->ts_recv, uw->w->cfg->idle_timeout_ms);
	}
	io_uring_prep_link_timeout(sqe, &c->ts_recv, tflags);
	uconn_track(c, sqe, ST_RECV_LT, 0);
}

static void start_header_clock(struct uconn *c)
{
	ts_deadline(&c->hdr_deadline, c->uw->w->cfg->header_timeout_ms);
}

/* Answer with an error that closes the connection; req is not usable. */
static void uconn_fail(struct uconn *c, int status)
{
	struct uring_worker *uw = c->uw;
	int err;

	c->have_req = false;
	if (!c->resp)
		c->resp = resp_get(uw);
	if (!c->resp) {
		uconn_close(c, true);
		return;
	}
	err = respond_error(uw->w->cfg, status, uw->now, c->resp->buf,
			    c->resp->cap, &c->resp->plan);
	if (err) {
		uconn_close(c, true);
		return;
	}
	c->resp->plan.keep_alive = false;
	c->bytes_sent = 0;
	c->replans = 0;
	c->send_off = 0;
	c->send_len = c->resp->plan.head_len;
	uconn_send_plain(c);
}

/* Send the plan just rendered into c->resp (err: rendering failed): the
 * head, then the file through a chain when the plan has a body. */
static void uconn_answer(struct uconn *c, int err)
{
	if (err) {
		log_msg(LOG_ERR, "worker %u: cannot render response (%s)",
			c->uw->w->id, strerror(-err));
		uconn_fail(c, 500);
		return;
	}
	c->send_off = 0;
	c->send_len = c->resp->plan.head_len;
	/* A replan after a failed chain may answer without the file: no
	 * body is left to follow the head then. */
	c->file_left = 0;
	if (c->resp->plan.send_file && c->resp->plan.length)
		uchain_start(c);
	else
		uconn_send_plain(c);
}

/* Plan the response to c->req (again, after a failed chain). */
void uconn_plan(struct uconn *c)
{
	struct uring_worker *uw = c->uw;
	struct stat_cache *sc = uw->sc;

	if (!c->cfg)
		c->cfg = config_get(uw->w->cfg);
	if (c->replans) {
		/* The chain found the file other than planned: whatever
		 * the cache holds is suspect, and this answer comes from a
		 * lookup of its own. */
		stat_cache_flush(sc);
		sc = NULL;
	}
	uconn_answer(c,
		     respond_plan(c->cfg, sc, &c->req, uw->now, 0, c->resp->buf,
				  c->resp->cap, &c->resp->plan));
}

/* The chain's open was refused: the plan looked the file up with O_PATH,
 * which needs no read permission, so only the open finds out. */
void uconn_plan_denied(struct uconn *c)
{
	uconn_answer(c, respond_status(&c->req, 403, c->uw->now, c->resp->buf,
				       c->resp->cap, &c->resp->plan));
}

/* Parse what has arrived; answer a complete head or read more. */
void uconn_input(struct uconn *c)
{
	struct uring_worker *uw = c->uw;
	const struct orcd_config *cfg = uw->w->cfg;
	struct http_limits lim = {
		.max_request_line = cfg->max_request_line,
		.max_header_bytes = cfg->max_header_bytes,
		.max_headers = cfg->max_headers,
	};
	int status = 0;

	if (!c->in_len) {
		if (uw->stopping && !(c->fresh && server_spare_fresh(uw->w)))
			uconn_close(c, true);
		else
			arm_recv(c);
		return;
	}
	switch (http_parse_request(c->in, c->in_len, &lim, &c->req, &status)) {
	case HTTP_PARSE_INCOMPLETE:
		if (c->in_len >= c->in_cap)
			uconn_fail(c, 431);
		else
			arm_recv(c);
		return;
	case HTTP_PARSE_ERROR:
		uconn_fail(c, status);
		return;
	case HTTP_PARSE_OK:
		break;
	}
	c->have_req = true;
	c->fresh = false;
	c->resp = resp_get(uw);
	if (!c->resp) {
		uconn_close(c, true);
		return;
	}
	c->bytes_sent = 0;
	c->replans = 0;
	uconn_plan(c);
}

static void recv_done(struct uconn *c)
{
	struct uring_worker *uw = c->uw;
	int r = c->res[ST_RECV];

	if (r > 0) {
		if (!c->in_len)
			start_header_clock(c);
		c->in_len += (size_t)r;
		uconn_input(c);
		return;
	}
	if (r == -ECANCELED && c->timed_out && c->in_len && !uw->stopping) {
		/* RFC 9110 15.5.9: say why before closing. */
		uconn_fail(c, 408);
		return;
	}
	if (r == -ENOBUFS && !uw->stopping) {
		/* Every provided buffer was taken this round; they come back
		 * as their CQEs are handled, so try again next iteration. */
		uconn_defer(c, arm_recv);
		return;
	}
	if ((r == -EAGAIN || r == -EINTR) && !uw->stopping) {
		arm_recv(c);
		return;
	}
	/* 0: the client closed; -ECANCELED: idle timeout or stopping;
	 * anything else: the connection broke. */
	uconn_close(c, true);
}

/* ---- the end of a response ---- */

static void log_response(struct uconn *c)
{
	struct orcd_worker *w = c->uw->w;
	int status = c->resp->plan.status;
	int cls = status / 100;

	STAT_INC(w, requests);
	if (cls >= 2 && cls <= 5)
		STAT_INC(w, status_class[cls]);
	STAT_ADD(w, bytes_sent, c->bytes_sent);
	if (w->srv->access_log)
		access_log_write(
			w->srv->access_log, (struct sockaddr *)&c->peer,
			c->req.request_line.n ? &c->req : NULL, status,
			respond_body_bytes(&c->resp->plan, c->bytes_sent),
			c->uw->now);
}

static void response_release(struct uconn *c)
{
	resp_put(c->uw, c->resp);
	c->resp = NULL;
	if (c->cfg) {
		config_put(c->cfg);
		c->cfg = NULL;
	}
}

/* The response did not make it (client gone, file changed mid-body,
 * timeout): log what was sent and end the connection. */
void uconn_response_abort(struct uconn *c)
{
	log_response(c);
	response_release(c);
	c->have_req = false;
	c->req.request_line.n = 0;
	uconn_close(c, true);
}

void uconn_response_done(struct uconn *c)
{
	struct uring_worker *uw = c->uw;
	bool keep = c->resp->plan.keep_alive && c->have_req && !uw->stopping;
	size_t used = c->have_req ? c->req.head_len : c->in_len;

	log_response(c);
	response_release(c);
	c->have_req = false;
	c->req.request_line.n = 0;
	if (!keep) {
		uconn_close(c, false);
		return;
	}
	/* Whatever follows the head is the next pipelined request. */
	memmove(c->in, c->in + used, c->in_len - used);
	c->in_len -= used;
	if (c->in_len)
		start_header_clock(c);
	uconn_input(c);
}

/* ---- closing ---- */

static void close_sock(struct uconn *c)
{
	struct uring_worker *uw = c->uw;
	struct io_uring_sqe *sqe = uring_sqe(uw, 1);

	if (!sqe) {
		uconn_defer(c, close_sock);
		return;
	}
	batch_begin(c);
	c->state = CS_CLOSING;
	uw->fl->prep_close(sqe, c->sock);
	uconn_track(c, sqe, ST_CLOSE_SOCK, 0);
}

static void arm_linger_recv(struct uconn *c, bool shutdown_first)
{
	struct uring_worker *uw = c->uw;
	struct io_uring_sqe *sqe;

	if (!uw->br && !in_get(c)) {
		close_sock(c);
		return;
	}
	sqe = uring_sqe(uw, shutdown_first ? 3 : 2);
	if (!sqe) {
		/* Lingering is a courtesy: skip it when the SQ is full. */
		close_sock(c);
		return;
	}
	batch_begin(c);
	c->state = CS_LINGER;
	if (shutdown_first) {
		io_uring_prep_shutdown(sqe, c->sock, SHUT_WR);
		sqe->flags |= uw->fl->slot_sqe_flag | IOSQE_IO_LINK;
		uconn_track(c, sqe, ST_SHUTDOWN, 0);
		sqe = io_uring_get_sqe(&uw->ring);
	}
	if (uw->br) {
		/* The bytes are discarded: a provided buffer is enough. */
		in_put(c);
		io_uring_prep_recv(sqe, c->sock, NULL, uw->br_size, 0);
		sqe->flags |= IOSQE_BUFFER_SELECT;
		sqe->buf_group = URING_BGID;
	} else {
		io_uring_prep_recv(sqe, c->sock, c->in, c->in_cap, 0);
	}
	sqe->flags |= uw->fl->slot_sqe_flag | IOSQE_IO_LINK;
	uconn_track(c, sqe, ST_RECV, 0);
	sqe = io_uring_get_sqe(&uw->ring);
	io_uring_prep_link_timeout(sqe, &c->ts_recv, IORING_TIMEOUT_ABS);
	uconn_track(c, sqe, ST_RECV_LT, 0);
}

static void linger_done(struct uconn *c)
{
	int r = c->res[ST_RECV];

	if (r > 0 && !c->timed_out && !c->uw->drain_expired &&
	    c->linger_bytes + (unsigned)r < LINGER_BYTES) {
		c->linger_bytes += (unsigned)r;
		arm_linger_recv(c, false);
		return;
	}
	close_sock(c);
}

/*
 * End the connection. Graceful: shut down our side and drain what the
 * client still sends for a moment, so unread request bytes do not make
 * the kernel answer our last response with a reset. Abortive: close now.
 */
void uconn_close(struct uconn *c, bool abortive)
{
	if (c->state == CS_WAIT_SLOT)
		slots_cancel_wait(&c->uw->slots, &c->waiter);
	if (abortive || c->uw->drain_expired) {
		close_sock(c);
		return;
	}
	c->linger_bytes = 0;
	ts_deadline(&c->ts_recv, LINGER_MS);
	arm_linger_recv(c, true);
}

static void closing_done(struct uconn *c)
{
	struct uring_worker *uw = c->uw;
	int r = c->res[ST_CLOSE_SOCK];

	if (r == -ECANCELED) {
		close_sock(c);
		return;
	}
	if (r < 0)
		log_msg(LOG_ERR, "worker %u: close of socket slot %d: %s",
			uw->w->id, c->sock, strerror(-r));
	int sock = c->sock;

	c->sock = -1;
	uconn_release(c);
	uring_slot_freed(uw, sock);
}

/* ---- stopping ---- */

/* SIGTERM: idle connections go now; busy ones finish their response
 * (response_done sees uw->stopping and closes). */
void uconn_stop(struct uconn *c)
{
	struct uring_worker *uw = c->uw;
	struct io_uring_sqe *sqe;

	if (c->state != CS_RECV || c->cancel_sent || !c->pending ||
	    (c->fresh && server_spare_fresh(uw->w)))
		return;
	sqe = uring_sqe(uw, 1);
	if (!sqe)
		return;
	io_uring_prep_cancel64(sqe, (uint64_t)(uintptr_t)c | ST_RECV, 0);
	uconn_track(c, sqe, ST_CANCEL, 0);
	c->cancel_sent = true;
}

/* The drain bound passed: the engine cancels every request in flight;
 * connections that have none in flight end here. */
void uconn_kill(struct uconn *c)
{
	if (c->pending || c->is_deferred)
		return;
	if (c->state == CS_WAIT_SLOT) {
		slots_cancel_wait(&c->uw->slots, &c->waiter);
		if (c->resp)
			uconn_response_abort(c);
		else
			uconn_close(c, true);
	}
}
