// SPDX-License-Identifier: MIT
/*
 * The io_uring transport's respond: a response's head and body go out
 * here. A body comes from a chain submitted at once:
 *
 *   openat2(slot F)  -LINK->  read(F)  -LINK->  send(sock)  -HARDLINK->
 *   close(F)
 *
 * open and read are IOSQE_IO_LINK: a failed open or a short read cancels
 * everything after it, so no send ever carries stale buffer bytes. The
 * send is IOSQE_IO_HARDLINK: whether the client took the bytes or not,
 * the close of F runs, so the common "client went away" case needs no
 * repair. When the open succeeded but the close came back -ECANCELED
 * (the read failed), we submit the close ourselves; F goes back to the
 * allocator only when its close has completed.
 *
 * A file larger than the buffer goes in bounded read/send pairs (read at
 * an offset into the same buffer, send it); the last pair carries the
 * close.
 *
 * send_timeout means "no progress for this long", as on every engine:
 * sends go without MSG_WAITALL, so each send completes as soon as some
 * bytes went out, and the timer armed with it (the worker's wheel, not a
 * linked timeout) bounds the wait for that progress only. A short send
 * is progress: the rest follows in a send of its own before anything
 * else happens on the connection.
 *
 * A hot file needs no chain: its bytes kept by the stat cache go beside
 * the head in one SEND (up to 4 KiB, copied behind it) or one SENDMSG
 * (two iovecs); a large one kept open goes by sendfile(2) from this
 * thread to a real socket fd (the slot on `specific`, the slot installed
 * as an fd on `direct`, kept for the connection's next large bodies),
 * and a full socket waits in a POLL_ADD for POLLOUT under the same send
 * timeout.
 *
 * The outcome goes up to the HTTP/1 core through its responded().
 */
#include <errno.h>
#include <limits.h>
#include <linux/openat2.h>
#include <poll.h>
#include <stddef.h>
#include <string.h>
#include <sys/sendfile.h>
#include <unistd.h>

#include "log.h"
#include "server.h"
#include "uring.h"

#define STEP(s)	       (1u << (s))
#define SEND_FLAGS     MSG_NOSIGNAL
/* A kept body up to this size is copied behind its head (one SEND); a
 * larger one goes beside it in one SENDMSG, copied by the kernel only,
 * unless it is over STAT_CACHE_DATA_FILE and kept open: sendfile then. */
#define BODY_COPY_MAX  4096u
/* Bytes of a kept body handed to one send. */
#define BODY_PIECE     (16u << 20)
/* Bytes sendfile moves per turn, so one big download cannot starve the
 * other connections of the worker (as on epoll). */
#define SENDFILE_CHUNK (1u << 20)

static void chain_submit(struct uconn *c, bool with_open);

static void begin(struct uconn *c)
{
	uring_batch_begin(c);
	c->state = CS_RESP;
	c->iov_sent = false;
}

static struct h1_resp *resp_of(struct uconn *c)
{
	return c->h1.resp;
}

/* A send must make progress within send_timeout; a send again after
 * one that moved nothing keeps the deadline it had. */
static void arm_send_timer(struct uconn *c)
{
	if (c->send_again)
		tw_arm(&c->uw->tw, &c->timer, c->timer.deadline);
	else
		tw_arm(&c->uw->tw, &c->timer,
		       c->uw->now_ms + c->send_timeout_ms);
	c->send_again = false;
}

static void prep_send(struct uconn *c, struct io_uring_sqe *sqe)
{
	/* A head with a kept body behind it: let TCP fill the segment. */
	io_uring_prep_send(sqe, c->sock, c->send_ptr, c->send_len,
			   SEND_FLAGS | (c->body_left ? MSG_MORE : 0));
	uring_on_sock(c, sqe);
	uring_track(c, sqe, ST_SEND, (uint32_t)c->send_len);
	arm_send_timer(c);
}

/* send_ptr[0, send_len) and the kept body's next piece in one SENDMSG;
 * the piece counts as handed out (judge_send takes it back if the send
 * ends inside the head). */
static void prep_sendmsg(struct uconn *c, struct io_uring_sqe *sqe)
{
	uint64_t n = c->body_left < BODY_PIECE ? c->body_left : BODY_PIECE;

	c->iov[0].iov_base = (void *)c->send_ptr;
	c->iov[0].iov_len = c->send_len;
	c->iov[1].iov_base = (void *)c->body_ptr;
	c->iov[1].iov_len = (size_t)n;
	memset(&c->msg, 0, sizeof(c->msg));
	c->msg.msg_iov = c->iov;
	c->msg.msg_iovlen = 2;
	c->body_ptr += n;
	c->body_left -= n;
	if (uring_fault_send_eagain(c->uw)) {
		/* Tests: this SENDMSG as io-wq can end it (uring_setup.c). */
		uring_prep_fail_nop(sqe, -EAGAIN);
	} else {
		io_uring_prep_sendmsg(sqe, c->sock, &c->msg,
				      SEND_FLAGS |
					      (c->body_left ? MSG_MORE : 0));
		uring_on_sock(c, sqe);
	}
	uring_track(c, sqe, ST_SEND, (uint32_t)(c->send_len + n));
	c->iov_sent = true;
	arm_send_timer(c);
}

/* Send send_ptr[0, send_len) with nothing read from a file: heads, error
 * pages, kept bodies, and the rest of a short send. A head with a kept
 * body behind it that is not for sendfile takes the body's first piece
 * along. */
static void send_plain(struct uconn *c)
{
	struct io_uring_sqe *sqe = uring_sqe(c->uw, 1);

	if (!sqe) {
		uring_defer(c, send_plain);
		return;
	}
	begin(c);
	if (c->send_len && c->body_left && c->sf_sock < 0)
		prep_sendmsg(c, sqe);
	else
		prep_send(c, sqe);
}

/*
 * The head of a kept body that will go by sendfile(2): the kernel hands
 * the page-cache pages to the socket, with no copy at all, where a send
 * from the mapping copies once. sendfile needs a real socket fd: the
 * slot itself on `specific`; on `direct` the slot is installed as one
 * (6.8+) in the same batch as the head's send, once per connection, while
 * the worker holds fewer than sock_fds_max such fds (beyond that the body
 * goes by sends from the mapping).
 */
static void send_head_sf(struct uconn *c)
{
	struct uring_worker *uw = c->uw;
	bool install = !uw->fl->real_fds && c->sock_fd < 0;
	struct io_uring_sqe *sqe = uring_sqe(uw, install ? 2 : 1);

	if (!sqe) {
		uring_defer(c, send_head_sf);
		return;
	}
	begin(c);
	if (install) {
		uring_prep_fd_install(sqe, c->sock);
		uring_track(c, sqe, ST_INSTALL, 0);
		sqe = uring_sqe_more(uw);
	} else {
		c->sf_sock = uw->fl->real_fds ? c->sock : c->sock_fd;
	}
	prep_send(c, sqe);
}

/* The install's CQE: without an fd the body goes by sends instead. */
static void took_install(struct uconn *c)
{
	int r = c->res[ST_INSTALL];

	if (r < 0) {
		/* Once per worker: at the fd limit this would be every
		 * response. */
		if (!c->uw->install_warned)
			log_msg(LOG_WARNING,
				"worker %u: install of socket slot %d as an fd: "
				"%s; bodies go by sends until it works",
				c->uw->w->id, c->sock, strerror(-r));
		c->uw->install_warned = true;
		return;
	}
	c->sf_sock = r;
	c->uw->sock_fds++;
	if (c->uw->sock_fds <= c->uw->sock_fds_max)
		c->sock_fd = r;
	else /* another connection's install took the last place */
		c->sf_installed = true;
}

/* The sendfile part is over: an fd installed for this body only is
 * closed. */
static void sf_end(struct uconn *c)
{
	uring_close_sock_fds(c, false);
	c->sf_sock = -1;
	c->sf_started = false;
	c->sf_polling = false;
}

/* The next piece of a kept body (a send's length is 32 bits). */
static void next_body_piece(struct uconn *c)
{
	uint64_t n = c->body_left < BODY_PIECE ? c->body_left : BODY_PIECE;

	c->send_ptr = c->body_ptr;
	c->send_len = (size_t)n;
	c->body_ptr += n;
	c->body_left -= n;
}

static void drop_body(struct uconn *c)
{
	sf_end(c);
	stat_cache_body_put(c->body);
	c->body = NULL;
	c->body_left = 0;
}

void uchain_drop(struct uconn *c)
{
	drop_body(c);
}

static void chain_first(struct uconn *c)
{
	chain_submit(c, true);
}

static void chain_next(struct uconn *c)
{
	chain_submit(c, false);
}

static void chain_begin(struct uconn *c)
{
	c->chained = true;
	c->file_off = resp_of(c)->plan.offset;
	c->file_left = resp_of(c)->plan.length;
	chain_first(c);
}

void uchain_respond(struct h1_conn *h, unsigned timeout_ms)
{
	struct uconn *c = uconn_of(h);
	struct uring_worker *uw = c->uw;
	const struct response_plan *p = &h->resp->plan;
	struct sc_body *b;

	c->send_timeout_ms = timeout_ms;
	c->send_ptr = h->resp->buf;
	c->send_len = p->head_len;
	c->file_left = 0;
	c->chained = false;
	if (!p->send_file || !p->length) {
		send_plain(c);
		return;
	}
	b = stat_cache_body(uw->sc, h->cfg, p->relpath, &p->meta);
	if (b && !b->mapped && p->length <= BODY_COPY_MAX &&
	    p->length <= h->resp->cap - p->head_len) {
		/* A hot small file: copied behind the head, one send. (Never
		 * a mapped one: a file truncated under its mapping would
		 * fault here; the kernel's copy in send just fails.) */
		memcpy(h->resp->buf + p->head_len, b->data + p->offset,
		       p->length);
		stat_cache_body_put(b);
		c->send_len += p->length;
		send_plain(c);
		return;
	}
	if (b) {
		/* A larger one: the head, then the kept bytes by sendfile
		 * where the file is kept open and the socket can be a real
		 * fd, else beside the head in a SENDMSG and by sends straight
		 * from them (the kernel copies them once; a mapped file's
		 * from the page cache). */
		c->body = b;
		c->body_ptr = b->data + p->offset;
		c->body_left = p->length;
		if (b->fd >= 0 && p->length > STAT_CACHE_DATA_FILE &&
		    (uw->fl->real_fds || c->sock_fd >= 0 ||
		     (uw->fd_install && uw->sock_fds < uw->sock_fds_max)))
			send_head_sf(c);
		else
			send_plain(c);
		return;
	}
	/* A body needs a file slot; wait in line if there is none. */
	if (c->file < 0) {
		int slot = slots_alloc_or_wait(&uw->slots, &c->waiter);

		uring_sync_slot_stats(uw);
		if (slot < 0) {
			/* A chain keeps its slot for its whole body, which a
			 * slow reader stretches: the wait is bounded like a
			 * send that moves nothing (uchain_wait_expired). */
			c->state = CS_WAIT_SLOT;
			tw_arm(&uw->tw, &c->timer, uw->now_ms + c->send_timeout_ms);
			return;
		}
		c->file = slot;
	}
	chain_begin(c);
}

void uchain_slot_ready(struct slot_waiter *wt)
{
	struct uconn *c =
		(struct uconn *)((char *)wt - offsetof(struct uconn, waiter));

	tw_cancel(&c->uw->tw, &c->timer);
	c->file = wt->slot;
	chain_begin(c);
}

static void count_chain(struct uring_worker *uw)
{
	STAT_INC(uw->w, chains_submitted);
	uw->chains_inflight++;
	STAT_INC(uw->w, chains_inflight);
	if (uw->chains_inflight > uw->w->stats.chains_inflight_peak)
		atomic_store_explicit(&uw->w->stats.chains_inflight_peak,
				      uw->chains_inflight,
				      memory_order_relaxed);
}

static void chain_submit(struct uconn *c, bool with_open)
{
	struct uring_worker *uw = c->uw;
	const struct uring_flavor *fl = uw->fl;
	struct h1_resp *r = resp_of(c);
	size_t head = with_open ? r->plan.head_len : 0;
	uint64_t chunk = r->cap - head;
	bool last;
	struct io_uring_sqe *sqe;

	if (chunk >= c->file_left)
		chunk = c->file_left;
	last = chunk == c->file_left;
	sqe = uring_sqe(uw, (with_open ? 1 : 0) + 2 + (last ? 1 : 0));
	if (!sqe) {
		uring_defer(c, with_open ? chain_first : chain_next);
		return;
	}
	begin(c);
	if (with_open) {
		memset(&c->how, 0, sizeof(c->how));
		c->how.resolve = RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS;
		/* Facts from the cache may be old: a FIFO or device node
		 * put in the file's place since (a bind mount raises no
		 * inotify event) would be opened. io_uring's inline try
		 * opens O_NONBLOCK (a FIFO does not wait) but punts a path
		 * not in the dentry cache to io-wq, which opens blocking;
		 * RESOLVE_CACHED makes that -EAGAIN instead. Not on roots
		 * the cache does not vouch for (9p, NFS: lookups there
		 * leave the cache by design). */
		if (stat_cache_active(uw->sc) && !c->open_cold)
			c->how.resolve |= RESOLVE_CACHED;
		fl->prep_open(sqe, c->h1.cfg->root_fd,
			      r->plan.relpath[0] ? r->plan.relpath : ".",
			      &c->how, c->file);
		sqe->flags |= IOSQE_IO_LINK;
		uring_track(c, sqe, ST_OPEN, 0);
		sqe = uring_sqe_more(uw);
		count_chain(uw);
	}
	io_uring_prep_read(sqe, c->file, r->buf + head, (unsigned)chunk,
			   c->file_off);
	sqe->flags |= fl->slot_sqe_flag | IOSQE_IO_LINK;
	uring_track(c, sqe, ST_READ, (uint32_t)chunk);

	c->send_ptr = r->buf;
	c->send_len = head + chunk;
	sqe = uring_sqe_more(uw);
	io_uring_prep_send(sqe, c->sock, r->buf, c->send_len, SEND_FLAGS);
	uring_on_sock(c, sqe);
	sqe->flags |= last ? IOSQE_IO_HARDLINK : 0;
	uring_track(c, sqe, ST_SEND, (uint32_t)c->send_len);
	arm_send_timer(c);
	if (last) {
		sqe = uring_sqe_more(uw);
		fl->prep_close(sqe, c->file);
		uring_track(c, sqe, ST_CLOSE_FILE, 0);
	}
}

/* The open succeeded but its linked close was cancelled. */
static void repair_close(struct uconn *c)
{
	struct uring_worker *uw = c->uw;
	struct io_uring_sqe *sqe = uring_sqe(uw, 1);

	if (!sqe) {
		uring_defer(c, repair_close);
		return;
	}
	begin(c);
	uw->fl->prep_close(sqe, c->file);
	uring_track(c, sqe, ST_CLOSE_FILE, 0);
}

/* The file's slot is free again (closed, or never installed). */
static void chain_end(struct uconn *c, bool lost)
{
	struct uring_worker *uw = c->uw;
	int slot = c->file;

	c->file = -1;
	c->file_open = false;
	uw->chains_inflight--;
	STAT_DEC(uw->w, chains_inflight);
	STAT_INC(uw->w, chains_completed);
	if (!lost)
		uring_slot_freed(uw, slot);
}

/* Do what the batch decided, the file being closed if it had to be. */
static void act(struct uconn *c, enum uafter after)
{
	struct uring_worker *uw = c->uw;
	static const enum h1_end end[] = {
		[AFTER_DONE] = H1_SENT,
		[AFTER_REPLAN] = H1_REPLAN,
		[AFTER_DENIED] = H1_DENIED,
		[AFTER_ABORT] = H1_FAILED,
		[AFTER_BUSY] = H1_BUSY,
	};

	c->after = AFTER_NONE;
	if (uw->hw.drain_expired && after != AFTER_DONE) {
		if (c->file_open) {
			/* A chunk sent as the drain ran out (AFTER_CHUNK):
			 * its file is still open, and a slot comes back only
			 * through its close (repair_batch_done acts again). */
			c->after = AFTER_ABORT;
			repair_close(c);
			return;
		}
		after = AFTER_ABORT;
	}
	if (after != AFTER_REPLAN)
		c->open_cold = false;
	if (after == AFTER_CHUNK) {
		chain_next(c);
		return;
	}
	if (after == AFTER_DONE && c->chained) {
		/* Sent by a chain: a large file is mapped for the next
		 * request (the cache decides whether it may). */
		const struct response_plan *p = &resp_of(c)->plan;

		stat_cache_keep_map(uw->sc, c->h1.cfg, p->relpath, &p->meta);
	}
	drop_body(c);
	c->state = CS_IDLE;
	uw->core->responded(&c->h1,
			    after == AFTER_NONE ? H1_FAILED : end[after]);
}

/* Judge the batch's send. Returns what to do next. */
static enum uafter judge_send(struct uconn *c, bool more_file)
{
	struct uring_worker *uw = c->uw;
	int r = c->res[ST_SEND];

	if (r > 0)
		c->h1.bytes_sent += (uint64_t)r;
	if (r == (int)c->want[ST_SEND]) {
		if (more_file)
			return AFTER_CHUNK;
		if (!c->body_left)
			return AFTER_DONE;
		if (c->sf_sock >= 0)
			return AFTER_SENDFILE;
		next_body_piece(c);
		return AFTER_NONE;
	}
	if (r > 0 && !uw->hw.drain_expired && c->iov_sent) {
		/* Head and body piece, not all sent: what is left of the
		 * head goes with the piece again; what is left of the piece
		 * goes on its own. */
		size_t head = c->iov[0].iov_len;

		if ((size_t)r < head) {
			c->send_ptr += r;
			c->send_len -= (size_t)r;
			c->body_ptr -= c->iov[1].iov_len;
			c->body_left += c->iov[1].iov_len;
		} else {
			c->send_ptr = (const char *)c->iov[1].iov_base +
				      ((size_t)r - head);
			c->send_len = c->iov[1].iov_len - ((size_t)r - head);
		}
		return AFTER_NONE;
	}
	if (r == -EAGAIN && !uw->hw.drain_expired && !c->timed_out &&
	    uw->now_ms < c->timer.deadline) {
		/* A SENDMSG that ran blocking in io-wq on the O_NONBLOCK
		 * socket (uring_setup.c): nothing went out, nothing failed.
		 * The same bytes go again, under the same deadline, so that
		 * a socket that keeps answering so (memory pressure: poll
		 * says writable, the send finds no room) ends at
		 * send_timeout like any other that makes no progress. */
		if (c->iov_sent) {
			c->body_ptr -= c->iov[1].iov_len;
			c->body_left += c->iov[1].iov_len;
		}
		c->send_again = true;
		STAT_INC(uw->w, send_again);
		return AFTER_NONE;
	}
	if (r > 0 && !uw->hw.drain_expired) {
		/* Progress, but not all: the rest goes out next, under a
		 * fresh timeout. */
		c->send_ptr += r;
		c->send_len -= (size_t)r;
		return AFTER_NONE;
	}
	if (r == -EPIPE || r == -ECONNRESET || r == 0)
		STAT_INC(uw->w, chain_client_gone);
	else
		STAT_INC(uw->w, chain_send_error);
	return AFTER_ABORT;
}

/* Nothing went out yet: the core may answer again from fresh facts. */
static enum uafter replan_or_abort(const struct uconn *c)
{
	return c->h1.bytes_sent == 0 ? AFTER_REPLAN : AFTER_ABORT;
}

/* The drain bound passed while waiting for a slot. */
void uchain_kill(struct uconn *c)
{
	if (c->state != CS_WAIT_SLOT)
		return;
	slots_cancel_wait(&c->uw->slots, &c->waiter);
	act(c, AFTER_ABORT);
}

void uchain_wait_expired(struct uconn *c)
{
	if (c->state != CS_WAIT_SLOT)
		return;
	slots_cancel_wait(&c->uw->slots, &c->waiter);
	STAT_INC(c->uw->w, slot_wait_timeouts);
	act(c, AFTER_BUSY);
}

/* Wait until the socket takes more, for send_timeout after the last
 * progress. */
static void sf_poll(struct uconn *c)
{
	struct uring_worker *uw = c->uw;
	struct io_uring_sqe *sqe = uring_sqe(uw, 1);

	if (!sqe) {
		uring_defer(c, sf_poll);
		return;
	}
	begin(c);
	io_uring_prep_poll_add(sqe, c->sock, POLLOUT);
	uring_on_sock(c, sqe);
	/* Tagged as the send it stands for: a timeout cancels it. */
	uring_track(c, sqe, ST_SEND, 0);
	c->sf_polling = true;
	tw_arm(&uw->tw, &c->timer, c->sf_deadline);
}

static void sf_fail(struct uconn *c, int err)
{
	struct uring_worker *uw = c->uw;

	if (err == 0)
		/* The file shrank: Content-Length cannot be met. */
		STAT_INC(uw->w, chain_short_read);
	else if (err == EPIPE || err == ECONNRESET)
		STAT_INC(uw->w, chain_client_gone);
	else
		STAT_INC(uw->w, chain_send_error);
	act(c, AFTER_ABORT);
}

/* As much of the kept body as the socket takes now, up to a turn's
 * share; then wait for room, or end. */
static void sf_push(struct uconn *c)
{
	struct uring_worker *uw = c->uw;
	uint64_t budget = SENDFILE_CHUNK;

	if (!c->sf_started) {
		/* The socket is O_NONBLOCK since its accept (uring_setup.c):
		 * a full one answers EAGAIN, it never blocks the worker. */
		c->sf_started = true;
		c->sf_deadline = uw->now_ms + c->send_timeout_ms;
		STAT_INC(uw->w, sendfile_bodies);
	}
	while (c->body_left && budget && !uw->hw.drain_expired) {
		off_t off = (off_t)(c->body_ptr - c->body->data);
		size_t want = c->body_left < budget ? (size_t)c->body_left :
						      (size_t)budget;
		ssize_t n = sendfile(c->sf_sock, c->body->fd, &off, want);

		if (n > 0) {
			c->h1.bytes_sent += (uint64_t)n;
			c->body_ptr += n;
			c->body_left -= (uint64_t)n;
			budget -= (uint64_t)n;
			c->sf_deadline = uw->now_ms + c->send_timeout_ms;
		} else if (n < 0 && errno == EINTR) {
			continue;
		} else if (n < 0 && errno == EAGAIN) {
			break;
		} else {
			sf_fail(c, n ? errno : 0);
			return;
		}
	}
	if (!c->body_left)
		act(c, AFTER_DONE);
	else if (uw->hw.drain_expired)
		act(c, AFTER_ABORT);
	else
		sf_poll(c);
}

/* The poll's CQE: room, or a timeout's cancel, or an error. */
static void sf_polled(struct uconn *c)
{
	int r = c->res[ST_SEND];

	c->sf_polling = false;
	if (r > 0)
		sf_push(c);
	else
		sf_fail(c, r == -ECANCELED ? ETIMEDOUT : -r);
}

/* A batch with only a send in it: a response without a file, or the rest
 * of a short send. With a file still open the rest of the body follows;
 * a failure closes the file first. */
static void send_batch_done(struct uconn *c)
{
	enum uafter after;

	if (c->step_mask & STEP(ST_INSTALL))
		took_install(c);
	if (c->sf_polling) {
		sf_polled(c);
		return;
	}
	after = judge_send(c, c->file_left > 0);
	if (after == AFTER_SENDFILE) {
		sf_push(c);
		return;
	}
	if (after == AFTER_NONE) {
		send_plain(c);
	} else if (c->file_open && after != AFTER_CHUNK) {
		c->after = after;
		repair_close(c);
	} else {
		act(c, after);
	}
}

/* A batch with only our repair close in it. */
static void repair_batch_done(struct uconn *c)
{
	struct uring_worker *uw = c->uw;
	int r = c->res[ST_CLOSE_FILE];

	if (r == -ECANCELED) {
		repair_close(c);
		return;
	}
	if (r < 0)
		log_msg(LOG_ERR, "worker %u: close of file slot %d: %s",
			uw->w->id, c->file, strerror(-r));
	chain_end(c, false);
	act(c, (enum uafter)c->after);
}

/* The open's CQE: is F installed? *lost when its number must never be
 * handed out again. */
static void judge_open(struct uconn *c, bool *lost)
{
	struct uring_worker *uw = c->uw;
	int r = c->res[ST_OPEN];

	if (r == uw->fl->ok_result(c->file)) {
		c->file_open = true;
	} else if (r == -EBUSY) {
		/* Someone holds our number (must never happen). */
		STAT_INC(uw->w, ebusy);
		log_msg(LOG_ERR, "worker %u: open into fd %d: EBUSY", uw->w->id,
			c->file);
		*lost = true;
	} else if (r >= 0) {
		log_msg(LOG_ERR, "worker %u: open returned %d, asked %d",
			uw->w->id, r, c->file);
		*lost = true;
	} else {
		STAT_INC(uw->w, chain_open_failed);
	}
}

void uchain_batch_done(struct uconn *c)
{
	struct uring_worker *uw = c->uw;
	uint32_t m = c->step_mask;
	enum uafter after;
	bool lost = false;

	if (!(m & (STEP(ST_OPEN) | STEP(ST_READ) | STEP(ST_CLOSE_FILE)))) {
		send_batch_done(c);
		return;
	}
	if (m == STEP(ST_CLOSE_FILE)) {
		repair_batch_done(c);
		return;
	}
	if (m & STEP(ST_OPEN))
		judge_open(c, &lost);
	if (m & STEP(ST_CLOSE_FILE)) {
		int r = c->res[ST_CLOSE_FILE];

		if (r >= 0 || (r != -ECANCELED && c->file_open)) {
			if (r < 0)
				log_msg(LOG_ERR,
					"worker %u: close of file slot %d: %s",
					uw->w->id, c->file, strerror(-r));
			c->file_open = false;
		}
	}

	if ((m & STEP(ST_OPEN)) && !c->file_open &&
	    c->res[ST_OPEN] != uw->fl->ok_result(c->file)) {
		/* The open failed: nothing was sent, nothing to close. A
		 * refusal is an answer; anything else may be a race with a
		 * change to the file, so look again. */
		int r = c->res[ST_OPEN];

		if (r == -EAGAIN && (c->how.resolve & RESOLVE_CACHED))
			c->open_cold = true; /* the replan looks it up */
		if ((r == -EACCES || r == -EPERM) && c->h1.bytes_sent == 0)
			after = AFTER_DENIED;
		else
			after = replan_or_abort(c);
	} else if (c->res[ST_READ] != (int)c->want[ST_READ]) {
		/* A short read: the file shrank (or broke) under us. If the
		 * head is still unsent, answer from fresh facts; else the
		 * promised Content-Length cannot be met. */
		if (c->res[ST_READ] != -ECANCELED)
			STAT_INC(uw->w, chain_short_read);
		after = replan_or_abort(c);
	} else {
		uint64_t chunk = c->want[ST_READ];
		const struct response_plan *p = &resp_of(c)->plan;

		if ((m & STEP(ST_OPEN)) && !p->offset && chunk == p->meta.size)
			/* The whole file in one read: keep it for the next
			 * request (the cache decides whether it may). */
			stat_cache_keep_data(uw->sc, c->h1.cfg, p->relpath,
					     &p->meta,
					     resp_of(c)->buf + p->head_len,
					     chunk);
		c->file_off += chunk;
		c->file_left -= chunk;
		after = judge_send(c, c->file_left > 0);
	}

	if (c->file_open && (after == AFTER_REPLAN || after == AFTER_ABORT ||
			     (m & STEP(ST_CLOSE_FILE)))) {
		/* The chain's own close did not run (or there is none and
		 * the body ends here). A short send with a cancelled close
		 * cannot happen (the send is hard-linked to it); if it did,
		 * ending the connection is the safe answer. */
		if (m & STEP(ST_CLOSE_FILE))
			STAT_INC(uw->w, chain_close_repaired);
		c->after = after == AFTER_NONE ? AFTER_ABORT : after;
		repair_close(c);
		return;
	}
	if (!c->file_open && c->file >= 0)
		chain_end(c, lost);
	if (after == AFTER_NONE) {
		send_plain(c);
		return;
	}
	act(c, after);
}
