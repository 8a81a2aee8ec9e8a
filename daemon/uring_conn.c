// SPDX-License-Identifier: MIT
/*
 * The io_uring engines' transport under the HTTP/1 core (http1.h): a
 * connection's socket ops (recv, the lingering close's shutdown and
 * drain, the close of its socket slot; their deadlines in the worker's
 * timer wheel), respond through uring_chain.c, and the two engine structs. What the loop
 * reports comes in through the hooks below; what the core asked for goes
 * back up through h1_core.
 */
#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "engine.h"
#include "log.h"
#include "server.h"
#include "uring.h"

/* ---- recv ---- */

/*
 * A recv of `buf` (cap bytes), or, with buf NULL, of a provided buffer the
 * kernel picks when bytes arrive (so a waiting connection holds none);
 * mshot: a multishot one on provided buffers (below).
 */
static void prep_recv(struct uconn *c, struct io_uring_sqe *sqe, char *buf,
		      size_t cap, bool mshot)
{
	struct uring_worker *uw = c->uw;

	if (buf) {
		io_uring_prep_recv(sqe, c->sock, buf, cap, 0);
	} else {
		/* A multishot RECV with a length is -EINVAL on 6.1:
		 * it takes the provided buffer's. */
		io_uring_prep_recv(sqe, c->sock, NULL, mshot ? 0 : uw->br_size,
				   0);
		sqe->flags |= IOSQE_BUFFER_SELECT;
		sqe->buf_group = URING_BGID;
	}
	uring_on_sock(c, sqe);
	/* Never completed inline at submission, always by task work queued
	 * after its bytes arrived: the inotify poll's CQE then comes first
	 * (engine_uring.c, notify_arm()). A multishot recv posts each CQE
	 * that way too. */
	if (uw->notify.usable)
		sqe->ioprio |= IORING_RECVSEND_POLL_FIRST;
	if (mshot) {
		sqe->ioprio |= IORING_RECV_MULTISHOT;
		uring_track(c, sqe, ST_MSHOT, 0);
		c->ms = MS_COUNTED;
	} else {
		uring_track(c, sqe, ST_RECV, 0);
	}
}

/*
 * Keep-alive recvs are one multishot recv on the buffer ring (where the
 * kernel frees file-table entries one by one: uring_worker.mshot),
 * armed at a connection's second request and left armed: a request then
 * costs no recv SQE and no poll arming, and a client's next request can
 * arrive while its response's CQE is still to be handled. The core still
 * asks for each recv; the multishot is counted in `pending` only while
 * it does (MS_COUNTED), so that its next CQE completes that recv.
 *
 * Bytes that come while the core is not reading (a client pipelining
 * during a response) wait in the connection's stash, and complete its
 * next recv a turn later (never inside the core's call). Once the stash
 * holds a provided buffer's worth (hw.in_min) the multishot is cancelled
 * ("paused"), so that TCP holds the rest back, as it does for a single
 * recv; it is armed again once the stash has gone to the core. Until the
 * cancel takes effect the stash can grow only by what the kernel had
 * taken in already, and that can be much: within one wait the kernel
 * runs the multishot as long as bytes and ring buffers last (a review
 * measured 300-470 KiB per connection from clients that pipelined
 * megabytes and read nothing). So a stash holds at most four whole heads
 * (max_header_bytes), and 64 KiB at least; past that the multishot ends
 * with -EMSGSIZE: the requests the stash holds are answered, then the
 * core closes the connection gracefully (nginx reads pipelined bytes only
 * into its header buffers; a client this far ahead of its answers should
 * retry the rest, RFC 9112 9.3.2). A close or a linger cancels it and
 * waits for its end.
 */
#define STASH_MIN (64u << 10)

static size_t stash_max(const struct uconn *c)
{
	size_t heads = 4 * (size_t)c->uw->w->cfg->max_header_bytes;

	return heads > STASH_MIN ? heads : STASH_MIN;
}

/* The stash goes (its bytes read, or the connection's end). */
static void stash_free(struct uconn *c)
{
	free(c->stash);
	c->stash = NULL;
	c->stash_off = c->stash_len = c->stash_cap = 0;
}

/* Append to the stash; -EMSGSIZE past its bound, -ENOMEM when it cannot
 * grow. */
static int stash_add(struct uconn *c, const char *p, size_t n)
{
	if (!n)
		return 0;
	if (c->stash_len + n > stash_max(c))
		return -EMSGSIZE;
	if (c->stash_off && c->stash_off + c->stash_len + n > c->stash_cap) {
		memmove(c->stash, c->stash + c->stash_off, c->stash_len);
		c->stash_off = 0;
	}
	if (c->stash_len + n > c->stash_cap) {
		size_t cap = c->stash_cap ? 2 * c->stash_cap : 4096;
		char *q;

		while (cap < c->stash_len + n)
			cap *= 2;
		q = realloc(c->stash, cap);
		if (!q)
			return -ENOMEM;
		c->stash = q;
		c->stash_cap = cap;
	}
	memcpy(c->stash + c->stash_off + c->stash_len, p, n);
	c->stash_len += n;
	return 0;
}

/* The stash's oldest bytes, at most cap, into buf; an empty stash goes. */
static size_t stash_take(struct uconn *c, char *buf, size_t cap)
{
	size_t n = c->stash_len < cap ? c->stash_len : cap;

	memcpy(buf, c->stash + c->stash_off, n);
	c->stash_off += n;
	c->stash_len -= n;
	if (!c->stash_len)
		stash_free(c);
	return n;
}

/* Cancel c's op in step st, counted in pending (its CQE is ST_CANCEL). */
static void prep_cancel(struct uconn *c, struct io_uring_sqe *sqe,
			enum ustep st)
{
	io_uring_prep_cancel64(sqe, (uint64_t)(uintptr_t)c | st, 0);
	uring_track(c, sqe, ST_CANCEL, 0);
}

/* Stop the multishot until the stash has been read (its end comes back
 * -ECANCELED with ms_paused set). No SQ room: next time. */
static void mshot_pause(struct uconn *c)
{
	struct io_uring_sqe *sqe = uring_sqe(c->uw, 1);

	if (!sqe)
		return;
	io_uring_prep_cancel64(sqe, (uint64_t)(uintptr_t)c | ST_MSHOT, 0);
	io_uring_sqe_set_data64(sqe, 0);
	c->ms_paused = true;
}

/* A close or linger: cancel the armed multishot and count its end, in
 * the SQE the caller made room for; returns the next one. */
static struct io_uring_sqe *mshot_end(struct uconn *c, struct io_uring_sqe *sqe)
{
	prep_cancel(c, sqe, ST_MSHOT);
	c->ms = MS_COUNTED;
	c->pending++;
	return uring_sqe_more(c->uw);
}

/* The core's recv completes with this CQE of the multishot: its bytes
 * into the core's buffer (what does not fit waits in the stash), or how
 * it ended; a pause's end is an -EAGAIN that arms it again. */
static int mshot_deliver(struct uconn *c, const char *data, int res,
			 bool pause_end)
{
	char *buf;
	size_t cap, n;
	int e;

	if (res <= 0)
		return pause_end && res == -ECANCELED && !c->cancel_sent ?
			       -EAGAIN :
			       res;
	c->uw->core->rbuf(&c->h1, &buf, &cap);
	n = (size_t)res < cap ? (size_t)res : cap;
	if (!n)
		return -ENOMEM;
	e = stash_add(c, data + n, (size_t)res - n);
	if (e)
		return e;
	memcpy(buf, data, n);
	return (int)n;
}

/* Bytes, or an end, that came while the core was not reading: kept for
 * its next recv. An end that only means "arm it again" is not kept. */
static void mshot_keep(struct uconn *c, const char *data, int res,
		       bool pause_end)
{
	if (c->ms_end_set) {
		/* Bytes behind an end (a stash that could not grow) would
		 * leave a hole: they go, and the recv stops. */
		if (res > 0 && c->ms == MS_ARMED && !c->ms_paused)
			mshot_pause(c);
		return;
	}
	if (res > 0) {
		int e = stash_add(c, data, (size_t)res);

		if (e) {
			c->ms_end = e;
			c->ms_end_set = true;
		}
		if (c->ms == MS_ARMED && !c->ms_paused &&
		    (e || c->stash_len >= c->uw->hw.in_min))
			mshot_pause(c);
		return;
	}
	if (res == -ENOBUFS || res == -EAGAIN || res == -EINTR ||
	    (pause_end && res == -ECANCELED))
		return;
	c->ms_end = res;
	c->ms_end_set = true;
}

/* A CQE of the multishot recv; returns whether it counts in `pending`:
 * the one that completes the core's recv, or the end a close or linger
 * waits for. */
static bool mshot_cqe(struct uconn *c, int res, unsigned cflags)
{
	struct uring_worker *uw = c->uw;
	bool ended = !(cflags & IORING_CQE_F_MORE);
	bool counted = c->ms == MS_COUNTED && (c->state == CS_RECV || ended);
	bool pause_end = ended && c->ms_paused;
	const char *data = NULL;
	unsigned bid = 0;

	if (cflags & IORING_CQE_F_BUFFER) {
		bid = cflags >> IORING_CQE_BUFFER_SHIFT;
		data = uw->br_bufs + (size_t)bid * uw->br_size;
	}
	if (ended) {
		c->ms = MS_OFF;
		c->ms_paused = false;
	} else if (counted) {
		c->ms = MS_ARMED;
		/* Bytes that beat a cancel (the idle timer's, a shed's) are
		 * answered, as a single recv's would be; the cancel's end
		 * then only means "arm it again", as a pause's does. */
		if (c->cancel_sent)
			c->ms_paused = true;
	}
	if (c->state == CS_LINGER || c->state == CS_CLOSING)
		; /* nobody reads any more: the bytes go */
	else if (counted)
		c->res[ST_RECV] = mshot_deliver(c, data, res, pause_end);
	else
		mshot_keep(c, data, res, pause_end);
	if (data)
		uring_br_recycle(uw, bid);
	return counted;
}

/*
 * `specific`: a connection that came back for another request is a
 * keep-alive one; its socket goes into the ring's file table just before
 * this recv, so that its recvs and sends skip the fd lookup and reference
 * count a real fd costs per op, as direct's do. The number was chosen at
 * the accept, so the update names it without waiting for anything. A
 * connection that ends after one response never pays for the table (6.1
 * switches resource nodes when an entry goes).
 *
 * Not linked: the update runs inline at issue, so the recv behind it in
 * the SQ finds the entry, and the recv is issued at submission as every
 * recv is, where a cancel (shed, stop) can find it. A linked recv would
 * wait for task work, and a cancel in the same submission would miss it.
 */
static struct io_uring_sqe *prep_register(struct uconn *c,
					  struct io_uring_sqe *sqe)
{
	struct uring_worker *uw = c->uw;

	c->reg_fd = c->sock;
	io_uring_prep_files_update(sqe, &c->reg_fd, 1,
				   c->sock - uw->slots.base);
	uring_track(c, sqe, ST_REGISTER, 0);
	c->sock_fixed = c->sock - uw->slots.base;
	return uring_sqe_more(uw);
}

/* The core's recv, from what the multishot left in the stash. */
static void recv_stashed(struct uconn *c)
{
	int r;

	if (c->stash_len) {
		char *buf;
		size_t cap;

		c->uw->core->rbuf(&c->h1, &buf, &cap);
		r = cap ? (int)stash_take(c, buf, cap) : -ENOMEM;
	} else {
		r = c->ms_end;
		c->ms_end_set = false;
	}
	tw_cancel(&c->uw->tw, &c->timer);
	c->state = CS_IDLE;
	c->uw->core->received(&c->h1, r);
}

static void arm_recv(struct uconn *c)
{
	struct uring_worker *uw = c->uw;
	struct io_uring_sqe *sqe;
	char *buf = NULL;
	size_t cap = 0;
	bool reg, mshot;

	if (c->deferred_end) {
		/* Cancelled, or timed out, while waiting for SQ room or
		 * its turn. */
		int r = c->deferred_end;

		c->deferred_end = 0;
		c->state = CS_IDLE;
		uw->core->received(&c->h1, r);
		return;
	}
	if (c->stash_len || c->ms_end_set) {
		recv_stashed(c);
		return;
	}
	if (c->ms == MS_ARMED) {
		/* Armed already: its next CQE completes this recv. */
		uring_batch_begin(c);
		c->state = CS_RECV;
		c->ms = MS_COUNTED;
		c->pending++;
		return;
	}
	mshot = uw->mshot && !c->h1.fresh;
	/* With bytes buffered (or no buffer ring) the core's buffer takes
	 * the rest of the head. */
	if (!mshot && (c->h1.in_len || !uw->br)) {
		uw->core->rbuf(&c->h1, &buf, &cap);
		if (!cap) {
			c->state = CS_IDLE;
			uw->core->received(&c->h1, -ENOMEM);
			return;
		}
	}
	reg = uw->sock_table && c->sock_fixed < 0 && !c->reg_failed &&
	      !c->h1.fresh;
	/* Only now: an SQE taken is submitted, prepared or not. */
	sqe = uring_sqe(uw, reg ? 2 : 1);
	if (!sqe) {
		uring_defer(c, arm_recv);
		return;
	}
	uring_batch_begin(c);
	c->state = CS_RECV;
	if (reg)
		sqe = prep_register(c, sqe);
	prep_recv(c, sqe, buf, cap, mshot);
}

static void ur_recv(struct h1_conn *h, int64_t deadline_ms)
{
	struct uconn *c = uconn_of(h);

	tw_arm(&c->uw->tw, &c->timer, deadline_ms);
	if (c->stash_len || c->ms_end_set) {
		/* Completed from the stash, but not inside the core's call:
		 * at the top of the next turn. */
		c->state = CS_RECV;
		uring_defer(c, arm_recv);
		return;
	}
	arm_recv(c);
}

/* A recv that picked a provided buffer: hand the bytes to the core's
 * buffer now and give the provided one straight back to the ring. */
static int take_provided(struct uconn *c, int res, unsigned cflags)
{
	struct uring_worker *uw = c->uw;
	unsigned bid = cflags >> IORING_CQE_BUFFER_SHIFT;

	if (res > 0 && c->state == CS_RECV) {
		char *buf;
		size_t cap;

		uw->core->rbuf(&c->h1, &buf, &cap);
		if ((size_t)res <= cap)
			memcpy(buf, uw->br_bufs + (size_t)bid * uw->br_size,
			       (size_t)res);
		else
			res = -ENOMEM;
	}
	uring_br_recycle(uw, bid);
	return res;
}

/* Whether a recv that must go again may: not once the server stops,
 * unless a head has begun (the core reads it to its end: read_more()),
 * and not past the drain's bound. */
static bool may_rearm(const struct uconn *c)
{
	const struct uring_worker *uw = c->uw;

	return !uw->hw.stopping || (c->h1.in_len && !uw->hw.drain_expired);
}

static void recv_done(struct uconn *c)
{
	struct uring_worker *uw = c->uw;
	int r = c->res[ST_RECV];

	if ((c->step_mask & (1u << ST_REGISTER)) && c->res[ST_REGISTER] != 1) {
		/* The update failed, so the recv found no entry (-EBADF):
		 * this connection stays on its fd, under the deadline the
		 * recv had. Said once per worker: at a limit it would be
		 * every connection. */
		if (!uw->register_warned)
			log_msg(LOG_WARNING,
				"worker %u: socket %d into the file table: %s; "
				"such connections stay on their fds",
				uw->w->id, c->sock,
				strerror(c->res[ST_REGISTER] < 0 ?
						 -c->res[ST_REGISTER] :
						 EIO));
		uw->register_warned = true;
		c->sock_fixed = -1;
		c->reg_failed = true;
		if (r == -EBADF && may_rearm(c)) {
			tw_arm(&uw->tw, &c->timer, c->timer.deadline);
			arm_recv(c);
			return;
		}
	}
	if (r == -EINVAL && (c->step_mask & (1u << ST_MSHOT))) {
		/* Refused (it is armed only where the kernel has had it for
		 * years, so a filter or a custom kernel): single recvs, for
		 * this one and every other refused before this was known. */
		if (!uw->mshot_warned)
			log_msg(LOG_WARNING,
				"worker %u: multishot recv refused (%s); one recv per request",
				uw->w->id, strerror(EINVAL));
		uw->mshot_warned = true;
		uw->mshot = false;
		if (may_rearm(c)) {
			tw_arm(&uw->tw, &c->timer, c->timer.deadline);
			arm_recv(c);
			return;
		}
	}

	if ((r == -ENOBUFS || r == -EAGAIN || r == -EINTR) && may_rearm(c)) {
		/* Again, under the deadline it had (the last CQE cancelled
		 * the timer). -ENOBUFS: every provided buffer was taken this
		 * round; they come back as their CQEs are handled, so next
		 * iteration. */
		tw_arm(&uw->tw, &c->timer, c->timer.deadline);
		if (r == -ENOBUFS)
			uring_defer(c, arm_recv);
		else
			arm_recv(c);
		return;
	}
	if (r == -ECANCELED && c->timed_out)
		r = -ETIMEDOUT;
	c->state = CS_IDLE;
	uw->core->received(&c->h1, r);
}

/* The step of the recv in flight, as a cancel names it. */
static enum ustep recv_step(const struct uconn *c)
{
	return c->ms == MS_COUNTED ? ST_MSHOT : ST_RECV;
}

static void ur_cancel(struct h1_conn *h)
{
	struct uconn *c = uconn_of(h);
	struct uring_worker *uw = c->uw;
	struct io_uring_sqe *sqe;

	if (c->state == CS_LINGER) {
		/* Ends as at its deadline: conn_timeout cancels the recv. */
		tw_arm(&uw->tw, &c->timer, uw->now_ms);
		return;
	}
	if (c->is_deferred && c->retry == arm_recv) {
		/* Not submitted yet: the retry completes it instead. With
		 * bytes in the stash a request has begun: it is answered, as
		 * one that races a cancel is. */
		if (!c->stash_len && !c->deferred_end)
			c->deferred_end = -ECANCELED;
		return;
	}
	if (c->state != CS_RECV || c->cancel_sent || !c->pending)
		return;
	sqe = uring_sqe(uw, 1);
	if (!sqe) {
		/* No SQ room: the timer cancels it next turn instead (it
		 * then ends as a timeout, which closes the same way). */
		tw_arm(&uw->tw, &c->timer, uw->now_ms);
		return;
	}
	prep_cancel(c, sqe, recv_step(c));
	c->cancel_sent = true;
}

/* ---- closing ---- */

/* A shutdown of the socket, `link` (IOSQE_IO_LINK or _HARDLINK) to what
 * follows in the next SQE, which this returns. */
static struct io_uring_sqe *
prep_shutdown(struct uconn *c, struct io_uring_sqe *sqe, int how, uint8_t link)
{
	io_uring_prep_shutdown(sqe, c->sock, how);
	uring_on_sock(c, sqe);
	sqe->flags |= link;
	uring_track(c, sqe, ST_SHUTDOWN, 0);
	c->shut = true;
	return uring_sqe_more(c->uw);
}

/*
 * Closing a socket that is in the ring's file table (every direct one, a
 * registered specific one) removes its entry, but 6.1 puts the file only
 * once every request submitted before the removal has completed (its
 * resource nodes): with other connections' recvs waiting, a socket closed
 * for idleness or to make room sent no FIN for as long as they waited. A
 * shutdown first sends the FIN at once; hard-linked, the rest follows
 * whatever it returns. A lingering close has shut it down already, and
 * the close of a specific socket that is only an fd puts the file itself.
 */
static void close_sock(struct uconn *c)
{
	struct uring_worker *uw = c->uw;
	bool in_table = !uw->fl->real_fds || c->sock_fixed >= 0;
	bool shut_first = in_table && !c->shut;
	bool unregister = c->sock_fixed >= 0;
	bool end_ms = c->ms == MS_ARMED;
	struct io_uring_sqe *sqe =
		uring_sqe(uw, 1 + (shut_first ? 1 : 0) + (unregister ? 1 : 0) +
				      (end_ms ? 1 : 0));

	if (!sqe) {
		uring_defer(c, close_sock);
		return;
	}
	uring_batch_begin(c);
	c->state = CS_CLOSING;
	if (end_ms)
		sqe = mshot_end(c, sqe);
	if (shut_first)
		sqe = prep_shutdown(c, sqe, SHUT_RDWR, IOSQE_IO_HARDLINK);
	if (unregister) {
		/* specific: the table's entry, then the fd. */
		io_uring_prep_close_direct(sqe, (unsigned)c->sock_fixed);
		sqe->flags |= IOSQE_IO_HARDLINK;
		uring_track(c, sqe, ST_UNREGISTER, 0);
		c->sock_fixed = -1;
		sqe = uring_sqe_more(uw);
	}
	uw->fl->prep_close(sqe, c->sock);
	uring_track(c, sqe, ST_CLOSE_SOCK, 0);
}

static void ur_close(struct h1_conn *h)
{
	struct uconn *c = uconn_of(h);

	/* The core's part is released from here on, even while the close
	 * waits for SQ room. */
	c->state = CS_CLOSING;
	c->uw->n_closing++;
	close_sock(c);
}

static void arm_linger(struct uconn *c, bool shutdown_first)
{
	struct uring_worker *uw = c->uw;
	struct io_uring_sqe *sqe;
	char *buf = NULL;
	size_t cap = 0;
	bool end_ms = c->ms == MS_ARMED;

	/* The bytes are discarded: a provided buffer is enough, when
	 * there is a buffer ring. */
	if (!uw->br) {
		uw->core->rbuf(&c->h1, &buf, &cap);
		if (!cap) {
			c->state = CS_IDLE;
			uw->core->lingered(&c->h1, -ENOMEM);
			return;
		}
	}
	sqe = uring_sqe(uw, (shutdown_first ? 2 : 1) + (end_ms ? 1 : 0));
	if (!sqe) {
		/* Lingering is a courtesy: skip it when the SQ is full. */
		c->state = CS_IDLE;
		uw->core->lingered(&c->h1, -EBUSY);
		return;
	}
	uring_batch_begin(c);
	c->state = CS_LINGER;
	/* Its own recv drains; the multishot would take bytes from it. */
	if (end_ms)
		sqe = mshot_end(c, sqe);
	/* Not linked: a shutdown always runs in io-wq, and a recv linked
	 * behind it ran there too, blocking, with a ring buffer taken before
	 * it waited (6.1): lingering connections held the ring's buffers,
	 * and other connections' recvs went without, for up to LINGER_MS.
	 * Issued at once, the recv waits on a poll and takes a buffer only
	 * when bytes come; the batch ends when both are back. */
	if (shutdown_first)
		sqe = prep_shutdown(c, sqe, SHUT_WR, 0);
	if (uring_fault_linger_nobufs(uw)) {
		/* Tests: the ring run dry for this recv (uring_setup.c). */
		uring_prep_fail_nop(sqe, -ENOBUFS);
		uring_track(c, sqe, ST_RECV, 0);
		return;
	}
	prep_recv(c, sqe, buf, cap, false);
	/* A lingering recv carries no request, so the freshness order
	 * (prep_recv) does not need it polled first. (Linked behind the
	 * shutdown, a polled-first recv answered -EAGAIN in io-wq and ended
	 * the drain early: the close then reset a response's last bytes,
	 * test_send_timeout in QEMU.) */
	sqe->ioprio &= ~IORING_RECVSEND_POLL_FIRST;
}

static void ur_linger(struct h1_conn *h, bool first, int64_t deadline_ms)
{
	struct uconn *c = uconn_of(h);

	tw_arm(&c->uw->tw, &c->timer, deadline_ms);
	arm_linger(c, first);
}

/* The drain goes on under the deadline it had, if that is still ahead
 * (a recv deferred for SQ room or buffers may find it passed). */
static void linger_again(struct uconn *c)
{
	if (c->uw->now_ms >= c->h1.linger_deadline) {
		c->state = CS_IDLE;
		c->uw->core->lingered(&c->h1, -ETIMEDOUT);
		return;
	}
	ur_linger(&c->h1, false, c->h1.linger_deadline);
}

static void linger_done(struct uconn *c)
{
	int r = c->res[ST_RECV];

	if ((r == -ENOBUFS || r == -EAGAIN || r == -EINTR) &&
	    !c->uw->hw.drain_expired) {
		/* No end of the drain: closing with the client's bytes
		 * unread would reset what it has yet to receive. Again
		 * (linger_again); -ENOBUFS next iteration, once the buffers
		 * this round took are back. */
		if (r == -ENOBUFS)
			uring_defer(c, linger_again);
		else
			linger_again(c);
		return;
	}
	if (r > 0 && c->timed_out)
		r = -ETIMEDOUT;
	c->state = CS_IDLE;
	c->uw->core->lingered(&c->h1, r);
}

static void uconn_free(struct uconn *c)
{
	struct uring_worker *uw = c->uw;

	uring_close_sock_fds(c, true);
	stash_free(c);
	if (c->prev)
		c->prev->next = c->next;
	else
		uw->conns = c->next;
	if (c->next)
		c->next->prev = c->prev;
	uw->n_conns--;
	c->next = uw->free_conns;
	uw->free_conns = c;
}

static void closing_done(struct uconn *c)
{
	struct uring_worker *uw = c->uw;
	int r = c->res[ST_CLOSE_SOCK];
	int sock = c->sock;

	if (r == -ECANCELED) {
		/* Whatever of the chain did not run runs again. */
		if ((c->step_mask & (1u << ST_SHUTDOWN)) &&
		    c->res[ST_SHUTDOWN] == -ECANCELED)
			c->shut = false;
		if ((c->step_mask & (1u << ST_UNREGISTER)) &&
		    c->res[ST_UNREGISTER] == -ECANCELED)
			c->sock_fixed = c->sock - uw->slots.base;
		close_sock(c);
		return;
	}
	if (r < 0)
		log_msg(LOG_ERR, "worker %u: close of socket slot %d: %s",
			uw->w->id, c->sock, strerror(-r));
	if ((c->step_mask & (1u << ST_UNREGISTER)) && c->res[ST_UNREGISTER] < 0)
		log_msg(LOG_ERR,
			"worker %u: socket slot %d out of the file table: %s",
			uw->w->id, c->sock, strerror(-c->res[ST_UNREGISTER]));
	c->sock = -1;
	uw->n_closing--;
	uconn_free(c);
	uring_slot_freed(uw, sock);
}

static const struct h1_transport uring_transport = {
	.recv = ur_recv,
	.respond = uchain_respond,
	.linger = ur_linger,
	.cancel = ur_cancel,
	.close = ur_close,
};

/* ---- what the loop reports ---- */

static void conn_cqe(struct uconn *c, enum ustep st, int res, unsigned cflags)
{
	if (st == ST_MSHOT) {
		if (!mshot_cqe(c, res, cflags))
			return;
	} else {
		if (cflags & IORING_CQE_F_BUFFER)
			res = take_provided(c, res, cflags);
		if (st < ST_MAX && st != ST_CANCEL)
			c->res[st] = res;
	}
	if (st == ST_CANCEL && (res == -ENOENT || res == -EALREADY) &&
	    c->timed_out && c->pending > 1) {
		/* The timer's cancel found nothing (the step completed on
		 * its way), or found it running in io-wq, where only an
		 * interruptible wait ends: try again after another
		 * send_timeout. No cancel is in flight any more: the
		 * next expiry must be free to send one. */
		c->timed_out = false;
		c->cancel_sent = false;
		tw_arm(&c->uw->tw, &c->timer,
		       c->uw->now_ms + c->send_timeout_ms);
	}
	if (--c->pending)
		return;
	tw_cancel(&c->uw->tw, &c->timer);
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

/*
 * The step of a response batch a cancel can find: the first one not yet
 * back. The steps behind it in a linked chain are not issued yet. So a
 * chain whose open or read waits (a FIFO or a device node swapped in
 * under the root after the plan: an open in io-wq waiting for a writer,
 * a read polling a FIFO, not ready until a writer came and went or
 * wrote) is cancelled there, not left waiting for a send that never
 * starts.
 */
static enum ustep resp_step_in_flight(const struct uconn *c)
{
	static const enum ustep order[] = {ST_OPEN, ST_READ};

	for (size_t i = 0; i < sizeof(order) / sizeof(order[0]); i++)
		if ((c->step_mask & (1u << order[i])) &&
		    c->res[order[i]] == INT_MIN)
			return order[i];
	return ST_SEND;
}

/* The op in flight got no further by its deadline: cancel it; it comes
 * back -ECANCELED with c->timed_out set, which the batch reads as a
 * timeout. */
static void conn_timeout(struct uconn *c)
{
	struct uring_worker *uw = c->uw;
	struct io_uring_sqe *sqe;
	enum ustep st;

	if (!c->pending && c->is_deferred && c->retry == arm_recv &&
	    !c->stash_len && !c->ms_end_set) {
		/* Still waiting for SQ room (run_deferred found none this
		 * turn either): no recv is in flight to cancel, and its
		 * timer is spent. It ends as timed out when it goes. */
		if (!c->deferred_end)
			c->deferred_end = -ETIMEDOUT;
		return;
	}
	if (c->state == CS_WAIT_SLOT) {
		uchain_wait_expired(c);
		return;
	}
	if (!c->pending || c->cancel_sent)
		return;
	if (c->state == CS_RECV)
		st = recv_step(c);
	else if (c->state == CS_LINGER)
		st = ST_RECV;
	else if (c->state == CS_RESP)
		st = resp_step_in_flight(c);
	else
		return;
	sqe = uring_sqe(uw, 1);
	if (!sqe) {
		tw_arm(&uw->tw, &c->timer, uw->now_ms + TW_RES_MS);
		return;
	}
	prep_cancel(c, sqe, st);
	c->cancel_sent = true;
	c->timed_out = true;
}

static void accepted(struct uring_worker *uw, int slot,
		     const struct sockaddr_storage *peer, socklen_t plen)
{
	struct uconn *c = uw->free_conns;

	if (uring_fault_conn_nomem(uw))
		c = NULL; /* a test's: as if no memory were left */
	else if (c)
		uw->free_conns = c->next;
	else
		c = aligned_alloc(URING_ALIGN, sizeof(*c));
	if (!c) {
		/* Nothing can hold the socket (out of memory): close it.
		 * Said at most once a second, with a count: a client that
		 * connects in a loop would write a line for each. */
		uw->nomem_unsaid++;
		if (uw->now_ms - uw->nomem_said_ms >= 1000) {
			log_msg(LOG_ERR,
				"worker %u: no memory for a connection (%u "
				"refused since the last line)",
				uw->w->id, uw->nomem_unsaid);
			uw->nomem_said_ms = uw->now_ms;
			uw->nomem_unsaid = 0;
		}
		uring_close_orphan(uw, slot);
		return;
	}
	memset(c, 0, sizeof(*c));
	c->kind = UOP_CONN;
	c->uw = uw;
	c->sock = slot;
	c->sock_fixed = -1;
	c->file = -1;
	c->sf_sock = -1;
	c->sock_fd = -1;
	c->next = uw->conns;
	if (uw->conns)
		uw->conns->prev = c;
	uw->conns = c;
	uw->n_conns++;
	uw->core->accepted(&c->h1, &uw->hw, peer, plen);
}

/* SIGTERM: the core lets idle connections go; busy ones finish their
 * response first. */
static void stop_all(struct uring_worker *uw)
{
	for (struct uconn *c = uw->conns, *next; c; c = next) {
		next = c->next;
		uw->core->stop(&c->h1);
	}
}

/* The drain bound passed: the loop cancels every request in flight;
 * a respond waiting for a slot has none, and gives up here. */
static void kill_all(struct uring_worker *uw)
{
	for (struct uconn *c = uw->conns, *next; c; c = next) {
		next = c->next;
		if (!c->pending && !c->is_deferred)
			uchain_kill(c);
	}
}

static void teardown(struct uring_worker *uw)
{
	while (uw->conns) {
		struct uconn *c = uw->conns;

		if (c->sock >= 0 && c->state != CS_CLOSING)
			uw->core->discard(&c->h1);
		tw_cancel(&uw->tw, &c->timer);
		uchain_drop(c);
		uconn_free(c);
	}
	while (uw->free_conns) {
		struct uconn *c = uw->free_conns;

		uw->free_conns = c->next;
		free(c);
	}
}

static const struct uring_hooks hooks = {
	.tp = &uring_transport,
	.accepted = accepted,
	.conn_cqe = conn_cqe,
	.conn_timeout = conn_timeout,
	.slot_ready = uchain_slot_ready,
	.stop_all = stop_all,
	.kill_all = kill_all,
	.teardown = teardown,
};

static int direct_run(struct orcd_worker *w)
{
	return uring_run(w, &uring_flavor_direct, &hooks);
}

static int specific_run(struct orcd_worker *w)
{
	return uring_run(w, &uring_flavor_specific, &hooks);
}

const struct orcd_engine orcd_engine_direct = {
	.name = "direct",
	.kind = ORCD_ENGINE_DIRECT,
	.probe = uring_direct_probe,
	.setup = uring_direct_setup,
	.worker_slots = uring_direct_slots,
	.run = direct_run,
};

const struct orcd_engine orcd_engine_specific = {
	.name = "specific",
	.kind = ORCD_ENGINE_SPECIFIC,
	.probe = uring_specific_probe,
	.setup = uring_specific_setup,
	.worker_slots = uring_specific_slots,
	.run = specific_run,
};
