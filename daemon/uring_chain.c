// SPDX-License-Identifier: MIT
/*
 * The per-request chain, submitted at once:
 *
 *   openat2(slot F)  -LINK->  read(F)  -LINK->  send(sock)  -HARDLINK->
 *   [link timeout]  -LINK->  close(F)
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
 * close. Sends use MSG_WAITALL, which makes the kernel retry a partial
 * send on a stream socket itself; a send that still comes back short
 * (cancelled by its timeout, or an error after some bytes) has broken the
 * link, and the rest is sent before anything else is read.
 */
#include <errno.h>
#include <limits.h>
#include <linux/openat2.h>
#include <string.h>

#include "log.h"
#include "server.h"
#include "uring.h"

#define STEP(s) (1u << (s))

static void chain_submit(struct uconn *c, bool with_open);

static void begin(struct uconn *c)
{
	c->step_mask = 0;
	c->timed_out = false;
	c->cancel_sent = false;
	c->state = CS_RESP;
}

static void arm_send_timeout(struct uconn *c, struct io_uring_sqe *sqe,
			     bool more)
{
	unsigned ms = c->uw->w->cfg->send_timeout_ms;

	c->ts_send.tv_sec = ms / 1000;
	c->ts_send.tv_nsec = (long long)(ms % 1000) * 1000000;
	io_uring_prep_link_timeout(sqe, &c->ts_send, 0);
	if (more)
		sqe->flags |= IOSQE_IO_LINK;
	uconn_track(c, sqe, ST_SEND_LT, 0);
}

/* Send resp->buf[send_off, +send_len) with nothing from a file: heads
 * without a body, error pages, and the rest of a short send. */
void uconn_send_plain(struct uconn *c)
{
	struct uring_worker *uw = c->uw;
	struct io_uring_sqe *sqe = uring_sqe(uw, 2);

	if (!sqe) {
		uconn_defer(c, uconn_send_plain);
		return;
	}
	begin(c);
	io_uring_prep_send(sqe, c->sock, c->resp->buf + c->send_off,
			   c->send_len, MSG_NOSIGNAL | MSG_WAITALL);
	sqe->flags |= uw->fl->slot_sqe_flag | IOSQE_IO_LINK;
	uconn_track(c, sqe, ST_SEND, (uint32_t)c->send_len);
	arm_send_timeout(c, io_uring_get_sqe(&uw->ring), false);
}

static void chain_first(struct uconn *c)
{
	chain_submit(c, true);
}

static void chain_next(struct uconn *c)
{
	chain_submit(c, false);
}

/* A planned body needs a file slot; wait in line if there is none. */
void uchain_start(struct uconn *c)
{
	struct uring_worker *uw = c->uw;

	if (c->file < 0) {
		int slot = slots_alloc_or_wait(&uw->slots, &c->waiter);

		uring_sync_slot_stats(uw);
		if (slot < 0) {
			c->state = CS_WAIT_SLOT;
			return;
		}
		c->file = slot;
	}
	c->file_off = c->resp->plan.offset;
	c->file_left = c->resp->plan.length;
	chain_first(c);
}

static void chain_submit(struct uconn *c, bool with_open)
{
	struct uring_worker *uw = c->uw;
	const struct uring_flavor *fl = uw->fl;
	struct uresp *r = c->resp;
	size_t head = with_open ? r->plan.head_len : 0;
	uint64_t chunk = r->cap - head;
	bool last;
	struct io_uring_sqe *sqe;

	if (chunk >= c->file_left)
		chunk = c->file_left;
	last = chunk == c->file_left;
	sqe = uring_sqe(uw, (with_open ? 1 : 0) + 3 + (last ? 1 : 0));
	if (!sqe) {
		uconn_defer(c, with_open ? chain_first : chain_next);
		return;
	}
	begin(c);
	if (with_open) {
		memset(&r->how, 0, sizeof(r->how));
		r->how.resolve = RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS;
		fl->prep_open(sqe, c->cfg->root_fd,
			      r->plan.relpath[0] ? r->plan.relpath : ".",
			      &r->how, c->file);
		sqe->flags |= IOSQE_IO_LINK;
		uconn_track(c, sqe, ST_OPEN, 0);
		sqe = io_uring_get_sqe(&uw->ring);
		STAT_INC(uw->w, chains_submitted);
		uw->chains_inflight++;
		STAT_INC(uw->w, chains_inflight);
		if (uw->chains_inflight > uw->w->stats.chains_inflight_peak)
			atomic_store_explicit(
				&uw->w->stats.chains_inflight_peak,
				uw->chains_inflight, memory_order_relaxed);
	}
	io_uring_prep_read(sqe, c->file, r->buf + head, (unsigned)chunk,
			   c->file_off);
	sqe->flags |= fl->slot_sqe_flag | IOSQE_IO_LINK;
	uconn_track(c, sqe, ST_READ, (uint32_t)chunk);

	c->send_off = 0;
	c->send_len = head + chunk;
	sqe = io_uring_get_sqe(&uw->ring);
	io_uring_prep_send(sqe, c->sock, r->buf, c->send_len,
			   MSG_NOSIGNAL | MSG_WAITALL);
	sqe->flags |= fl->slot_sqe_flag |
		      (last ? IOSQE_IO_HARDLINK : IOSQE_IO_LINK);
	uconn_track(c, sqe, ST_SEND, (uint32_t)c->send_len);
	arm_send_timeout(c, io_uring_get_sqe(&uw->ring), last);
	if (last) {
		sqe = io_uring_get_sqe(&uw->ring);
		fl->prep_close(sqe, c->file);
		uconn_track(c, sqe, ST_CLOSE_FILE, 0);
	}
}

static void repair_close(struct uconn *c);

static void repair_close_retry(struct uconn *c)
{
	repair_close(c);
}

/* The open succeeded but its linked close was cancelled. */
static void repair_close(struct uconn *c)
{
	struct uring_worker *uw = c->uw;
	struct io_uring_sqe *sqe = uring_sqe(uw, 1);

	if (!sqe) {
		uconn_defer(c, repair_close_retry);
		return;
	}
	begin(c);
	uw->fl->prep_close(sqe, c->file);
	uconn_track(c, sqe, ST_CLOSE_FILE, 0);
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

	c->after = AFTER_NONE;
	if (uw->drain_expired && after != AFTER_DONE)
		after = AFTER_ABORT;
	switch (after) {
	case AFTER_CHUNK:
		chain_next(c);
		break;
	case AFTER_DONE:
		uconn_response_done(c);
		break;
	case AFTER_REPLAN:
		/* Nothing went out: the file changed between the plan and
		 * the chain. Answer from fresh facts (a 404 after a delete,
		 * the new length after a truncate). */
		c->replans++;
		uconn_plan(c);
		break;
	case AFTER_DENIED:
		uconn_plan_denied(c);
		break;
	case AFTER_ABORT:
	default:
		uconn_response_abort(c);
		break;
	}
}

/* Send came back short or failed. Returns what to do next. */
static enum uafter judge_send(struct uconn *c, bool more_file)
{
	struct uring_worker *uw = c->uw;
	int r = c->res[ST_SEND];

	if (r > 0)
		c->bytes_sent += (uint64_t)r;
	if (r == (int)c->want[ST_SEND])
		return more_file ? AFTER_CHUNK : AFTER_DONE;
	if (r > 0 && !c->timed_out && !uw->drain_expired) {
		/* Short but not failed: finish these bytes first. */
		c->send_off += (size_t)r;
		c->send_len -= (size_t)r;
		return AFTER_NONE;
	}
	if (r == -EPIPE || r == -ECONNRESET || r == 0)
		STAT_INC(uw->w, chain_client_gone);
	else
		STAT_INC(uw->w, chain_send_error);
	return AFTER_ABORT;
}

static bool replan_ok(const struct uconn *c)
{
	return c->bytes_sent == 0 && c->replans < 2 && !c->uw->stopping;
}

void uchain_batch_done(struct uconn *c)
{
	struct uring_worker *uw = c->uw;
	uint32_t m = c->step_mask;
	enum uafter after;
	bool lost = false;

	if (!(m & (STEP(ST_OPEN) | STEP(ST_READ) | STEP(ST_CLOSE_FILE)))) {
		/* A send alone: a response without a file, or the rest of
		 * a short send. With a file still open the rest of the
		 * body follows; a failure closes the file first. */
		after = judge_send(c, c->file_left > 0);
		if (after == AFTER_NONE) {
			uconn_send_plain(c);
		} else if (c->file_open && after != AFTER_CHUNK) {
			c->after = after;
			repair_close(c);
		} else {
			act(c, after);
		}
		return;
	}
	if (m == STEP(ST_CLOSE_FILE)) {
		/* A repair close. */
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
		return;
	}
	if (m & STEP(ST_OPEN)) {
		int r = c->res[ST_OPEN];

		if (r == uw->fl->ok_result(c->file)) {
			c->file_open = true;
		} else if (r == -EBUSY) {
			/* Someone holds our number (must never happen). */
			STAT_INC(uw->w, ebusy);
			log_msg(LOG_ERR, "worker %u: open into fd %d: EBUSY",
				uw->w->id, c->file);
			lost = true;
		} else if (r >= 0) {
			log_msg(LOG_ERR,
				"worker %u: open returned %d, asked %d",
				uw->w->id, r, c->file);
			lost = true;
		} else {
			STAT_INC(uw->w, chain_open_failed);
		}
	}
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

		if ((r == -EACCES || r == -EPERM) && c->bytes_sent == 0)
			after = AFTER_DENIED;
		else
			after = replan_ok(c) ? AFTER_REPLAN : AFTER_ABORT;
	} else if (c->res[ST_READ] != (int)c->want[ST_READ]) {
		/* A short read: the file shrank (or broke) under us. If the
		 * head is still unsent, answer from fresh facts; else the
		 * promised Content-Length cannot be met. */
		if (c->res[ST_READ] != -ECANCELED)
			STAT_INC(uw->w, chain_short_read);
		after = replan_ok(c) ? AFTER_REPLAN : AFTER_ABORT;
	} else {
		uint64_t chunk = c->want[ST_READ];

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
		uconn_send_plain(c);
		return;
	}
	act(c, after);
}
