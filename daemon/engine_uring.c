// SPDX-License-Identifier: MIT
/*
 * The io_uring engines' loop: one ring per worker, accepts always in
 * flight on pre-chosen slots, a wake-up poll on the worker's eventfd, a
 * poll on the stat cache's inotify fd, and one io_uring_enter per
 * iteration for everything the iteration produced.
 * Every CQE goes up to its owner through the hooks the transport
 * (uring_conn.c) gave uring_run(); kernel set-up and probes are in
 * uring_setup.c.
 */
#include <errno.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "conn_budget.h"
#include "log.h"
#include "mono.h"
#include "server.h"
#include "uring.h"

/* After the drain bound: how long cancelled work may take to unwind. */
#define UNWIND_MS  3000
/* At exit: how long cancelled ops may take to come back before their
 * memory is kept rather than freed. */
#define QUIESCE_MS 2000
/* How long accepts pause after failing for want of files or memory (as
 * the epoll engine's accept_retry). */
#define ACCEPT_PAUSE_MS 100

/* ---- submission ---- */

/* Submit what is queued, now; the kernel (or the test knob) may refuse
 * it for a while (-EBUSY), anything else is fatal. */
static void submit_now(struct uring_worker *uw)
{
	int r = -EBUSY;

	if (!uring_fault_submit_refused(uw)) {
		r = io_uring_submit(&uw->ring);
		STAT_INC(uw->w, submits);
	}
	if (r < 0 && r != -EBUSY && r != -EAGAIN) {
		log_msg(LOG_ERR, "worker %u: io_uring_submit: %s", uw->w->id,
			strerror(-r));
		uw->fatal = r;
	}
}

/*
 * An SQE, with room for `need` in total: a chain must never straddle two
 * submissions, because the kernel ends an open link at the end of each
 * io_uring_enter. Submits early when the SQ is short (counted).
 */
struct io_uring_sqe *uring_sqe(struct uring_worker *uw, unsigned need)
{
	if (io_uring_sq_space_left(&uw->ring) < need) {
		submit_now(uw);
		if (io_uring_sq_space_left(&uw->ring) < need) {
			STAT_INC(uw->w, sq_full);
			return NULL;
		}
	}
	return uring_sqe_more(uw);
}

/* The next SQE of a group that uring_sqe() made room for. Every SQE of
 * the ring is taken here, so that uw->sqes counts them. */
struct io_uring_sqe *uring_sqe_more(struct uring_worker *uw)
{
	struct io_uring_sqe *sqe = io_uring_get_sqe(&uw->ring);

	if (sqe)
		uw->sqes++;
	return sqe;
}

/* ---- a connection's batch ---- */

/* Every SQE a connection submits belongs to its current batch; the batch
 * is judged only when all of its CQEs are in (c->pending == 0), so a
 * decision never races a completion still on its way. */
void uring_track(struct uconn *c, struct io_uring_sqe *sqe, enum ustep st,
		 uint32_t want)
{
	io_uring_sqe_set_data64(sqe, (uint64_t)(uintptr_t)c | (uint64_t)st);
	c->pending++;
	c->step_mask |= 1u << st;
	c->res[st] = INT_MIN;
	c->want[st] = want;
	c->uw->turn_sends += st == ST_SEND;
}

void uring_batch_begin(struct uconn *c)
{
	c->step_mask = 0;
	c->timed_out = false;
	c->cancel_sent = false;
}

/* No SQ room: run retry(c) at the top of the next iteration. */
void uring_defer(struct uconn *c, void (*retry)(struct uconn *c))
{
	struct uring_worker *uw = c->uw;

	c->retry = retry;
	if (c->is_deferred)
		return;
	c->is_deferred = true;
	c->next_deferred = uw->deferred;
	uw->deferred = c;
}

void uring_sync_slot_stats(struct uring_worker *uw)
{
	struct orcd_stats *s = &uw->w->stats;

	atomic_store_explicit(&s->slots_inuse, uw->slots.inuse,
			      memory_order_relaxed);
	atomic_store_explicit(&s->slots_peak, uw->slots.peak,
			      memory_order_relaxed);
	atomic_store_explicit(&s->slot_waits, uw->slots.waits,
			      memory_order_relaxed);
}

/* The close of `slot` completed (or nothing was ever installed). */
void uring_slot_freed(struct uring_worker *uw, int slot)
{
	int err;
	struct slot_waiter *wt = slots_free(&uw->slots, slot, &err);

	if (err)
		log_msg(LOG_ERR, "worker %u: slot %d freed twice (%s)",
			uw->w->id, slot, strerror(-err));
	uring_sync_slot_stats(uw);
	if (wt)
		uw->hooks->slot_ready(wt);
}

/* The fds a connection's socket was installed as for sendfile
 * (uring_chain.c, direct): the one installed for the body in flight, and
 * with `kept` the one kept for the connection's life. */
void uring_close_sock_fds(struct uconn *c, bool kept)
{
	if (c->sf_installed) {
		close(c->sf_sock);
		c->sf_installed = false;
		c->uw->sock_fds--;
	}
	if (kept && c->sock_fd >= 0) {
		close(c->sock_fd);
		c->sock_fd = -1;
		c->uw->sock_fds--;
	}
}

/* An orphan's close came back (res) or was made outside the ring. A
 * close cancelled with its shutdown (a stop's cancel-all) is made here:
 * the shutdown can no longer run. */
static void orphan_closed(struct uring_worker *uw, int slot, int res)
{
	if (res == -ECANCELED)
		res = uw->fl->close_now(&uw->ring, slot);
	if (res < 0) {
		/* It may still hold the socket: leaking one slot is safer
		 * than handing it out again. */
		log_msg(LOG_ERR, "worker %u: close of slot %d: %s; slot leaked",
			uw->w->id, slot, strerror(-res));
		return;
	}
	uring_slot_freed(uw, slot);
}

/*
 * Close a slot nothing else refers to (a socket we could not take on,
 * out of memory). On direct, with SQ room, a shutdown linked to the
 * close: on 6.1 a removed socket stays open while recvs submitted before
 * its removal wait (see close_sock()), and its peer would wait with them.
 * The slot is free only when the close's CQE is in (orphan_closed()):
 * 6.1 takes a shutdown's fixed file at submit, but later kernels (6.18
 * here) send every shutdown to io-wq and look its file up there, so a
 * slot handed out sooner could hold the next client's socket by then,
 * and the shutdown would end that connection instead. Without room (and
 * on `specific`, whose fds are real) it is closed outside the ring and
 * free at once, with no shutdown.
 */
void uring_close_orphan(struct uring_worker *uw, int slot)
{
	struct io_uring_sqe *sqe = NULL;
	int r;

	if (!uw->fl->real_fds)
		sqe = uring_sqe(uw, 2);
	if (sqe) {
		io_uring_prep_shutdown(sqe, slot, SHUT_RDWR);
		sqe->flags |= uw->fl->slot_sqe_flag | IOSQE_IO_HARDLINK;
		io_uring_sqe_set_data64(sqe, 0);
		sqe = uring_sqe_more(uw);
		uw->fl->prep_close(sqe, slot);
		io_uring_sqe_set_data64(sqe, URING_ORPHAN_TAG | (unsigned)slot);
		uw->n_closing++;
		return;
	}
	r = uw->fl->close_now(&uw->ring, slot);
	orphan_closed(uw, slot, r);
}

/* ---- accepts ---- */

static void accept_arm(struct uacceptor *a)
{
	struct uring_worker *uw = a->uw;
	struct io_uring_sqe *sqe;
	int slot;

	/* Only called with slots to spare, so this is never a wait. */
	if (!slots_available(&uw->slots))
		return;
	sqe = uring_sqe(uw, 1);
	if (!sqe)
		return;
	slot = slots_alloc(&uw->slots);
	uring_sync_slot_stats(uw);
	a->slot = slot;
	a->alen = sizeof(a->addr);
	a->fault = 0;
	if (uring_fault_accept_enfile(uw)) {
		/* Tests: the file table full (uring_setup.c). */
		io_uring_prep_nop(sqe);
		a->fault = -ENFILE;
	} else {
		uw->fl->prep_accept(sqe, a->lfd, (struct sockaddr *)&a->addr,
				    &a->alen, slot);
	}
	io_uring_sqe_set_data64(sqe, (uint64_t)(uintptr_t)a);
	a->armed = true;
	a->cancel_sent = false;
	uw->acc_armed++;
	a->lis->acc_armed++;
}

/* Room for one more accept: below the connection budget, nobody waiting
 * for a slot, and beyond the files' reserve a free slot for it and one
 * for the file its connection will ask for (conn_budget.h: a download
 * counts twice; downloads in flight already hold both of theirs). */
static bool accept_room(struct uring_worker *uw)
{
	struct conn_budget b;

	conn_budget(uw->slots.n, uw->w->cfg->max_connections, &b);
	return !uw->slots.wait_head &&
	       slots_available(&uw->slots) > uw->file_reserve + uw->acc_armed &&
	       uw->n_conns + uw->acc_armed < b.cap;
}

/* A poll on each listener that has no accept armed, unless its client
 * is known to wait (polled again, it would fire at once, every turn),
 * and on one an accept was taken back from (accept_done). */
static void listen_poll_arm(struct uring_worker *uw)
{
	for (unsigned i = 0; i < uw->w->n_listen; i++) {
		struct ulisten *l = &uw->lpoll[i];
		struct io_uring_sqe *sqe;

		if (l->armed || l->waiting || (l->acc_armed && !l->recheck))
			continue;
		sqe = uring_sqe(uw, 1);
		if (!sqe)
			return;
		io_uring_prep_poll_add(sqe, l->lfd, POLLIN);
		io_uring_sqe_set_data64(sqe, (uint64_t)(uintptr_t)l);
		l->armed = true;
		l->cancel_sent = false;
		uw->lpoll_armed++;
	}
}

/* Cancel the op in flight for obj (an acceptor, a listener poll): false
 * when the SQ has no room. */
static bool cancel_obj(struct uring_worker *uw, void *obj)
{
	struct io_uring_sqe *sqe = uring_sqe(uw, 1);

	if (!sqe)
		return false;
	io_uring_prep_cancel64(sqe, (uint64_t)(uintptr_t)obj, 0);
	io_uring_sqe_set_data64(sqe, 0);
	return true;
}

static void listen_poll_done(struct ulisten *l, struct uring_worker *uw,
			     int res)
{
	bool recheck = l->recheck;

	l->armed = false;
	l->recheck = false;
	uw->lpoll_armed--;
	if (res <= 0 || !(res & POLLIN))
		return;
	if (!l->acc_armed && !l->waiting) {
		l->waiting = true;
		uw->n_waiting++;
	} else if (recheck && !uw->hw.stopping) {
		/* A client in the backlog though accepts are armed: the
		 * one taken back may have had its wake-up (one accept is
		 * woken per client), which no other gets. Take them all
		 * back: with none left, its poll sees the client, and the
		 * accept armed for it then looks at the backlog first. */
		for (unsigned i = 0; i < uw->n_acc; i++) {
			struct uacceptor *a = &uw->acc[i];

			if (a->lis == l && a->armed && !a->cancel_sent)
				a->cancel_sent = cancel_obj(uw, a);
		}
	}
}

/* An armed accept, not being cancelled, on the listener with the fewest
 * of them: the one to take back for a client waiting elsewhere (a waiting
 * listener has none armed). The fewest, so that its listener is most
 * likely left with none, and polled. NULL when one is being cancelled
 * already (one at a time) or none is armed. */
static struct uacceptor *accept_to_take_back(struct uring_worker *uw)
{
	struct uacceptor *best = NULL;

	for (unsigned i = 0; i < uw->n_acc; i++) {
		struct uacceptor *a = &uw->acc[i];

		if (!a->armed)
			continue;
		if (a->cancel_sent)
			return NULL;
		if (!best || a->lis->acc_armed < best->lis->acc_armed)
			best = a;
	}
	return best;
}

/*
 * No more accepts can be armed. A listener with none in flight has a
 * poll that watches for a client in its backlog. When one waits there
 * while accepts sit armed on other listeners (the room left held by
 * them), one of those is cancelled: the place it gives back goes to the
 * waiting listener (accept_refill, accept_first). When one waits and no accept
 * is armed at all, the oldest idle connections close to make room
 * (DESIGN.md 3, Exhaustion), a batch at a time: accepts are armed again
 * once their closes have given the slots back. (Shedding idle
 * connections cannot help a response waiting for a file slot: the files'
 * reserve is held by chains, which keep their slot for the whole body,
 * however slowly the client reads it. Such a wait ends at send_timeout
 * with a 503: uchain_wait_expired.)
 */
static void make_room(struct uring_worker *uw)
{
	listen_poll_arm(uw);
	if (!uw->n_waiting)
		return;
	if (uw->acc_armed) {
		/* Not while accepts are paused or a response waits for a
		 * slot: nothing would be armed in its place. */
		struct uacceptor *a = uw->now_ms < uw->accept_paused_until ||
					      uw->slots.wait_head ?
					      NULL :
					      accept_to_take_back(uw);

		if (a)
			a->cancel_sent = cancel_obj(uw, a);
		return;
	}
	/* The last batch is done only when its closes have come back:
	 * its recvs' cancels complete a turn before the slots do. */
	if (!uw->hw.n_shedding && !uw->n_closing &&
	    (uw->hw.idle.n || uw->hw.lingering.n)) {
		uw->core->shed(&uw->hw);
		/* Accepts paused: they go again when this batch is back. */
		uw->shed_in_pause = uw->now_ms < uw->accept_paused_until;
	}
}

/* Which of two listeners gets the next accept: one whose client waits,
 * else the one with fewer armed. */
static bool accept_first(const struct ulisten *x, const struct ulisten *y)
{
	if (x->waiting != y->waiting)
		return x->waiting;
	return x->acc_armed < y->acc_armed;
}

/* The next acceptor to arm (one is unarmed): with one listener the first
 * unarmed; with several, one of the listener accept_first() puts first,
 * so that where room is short each listener still has one (a client of
 * a listener with none would wait for another's to be used). */
static struct uacceptor *next_acceptor(struct uring_worker *uw)
{
	struct uacceptor *best = NULL;

	for (unsigned i = 0; i < uw->n_acc; i++) {
		struct uacceptor *a = &uw->acc[i];

		if (a->armed)
			continue;
		if (uw->w->n_listen == 1)
			return a;
		if (!best || accept_first(a->lis, best->lis))
			best = a;
	}
	return best;
}

/* Keep cfg->accepts accepts in flight while there is room and they are
 * not paused. */
static void accept_refill(struct uring_worker *uw)
{
	bool paused;

	if (uw->hw.stopping || !server_may_accept(uw->w))
		return;
	/* A batch closed for a client while accepts failed is back: its
	 * files are free now (one batch per failed try, as epoll). */
	if (uw->shed_in_pause && !uw->hw.n_shedding && !uw->n_closing) {
		uw->shed_in_pause = false;
		uw->accept_paused_until = 0;
	}
	paused = uw->now_ms < uw->accept_paused_until;
	while (uw->acc_armed < uw->n_acc && !paused && accept_room(uw)) {
		struct uacceptor *a = next_acceptor(uw);

		accept_arm(a);
		if (!a->armed)
			return;
		if (a->lis->waiting) {
			a->lis->waiting = false;
			uw->n_waiting--;
		}
	}
	if (uw->acc_armed < uw->n_acc)
		make_room(uw);
}

static void accept_done(struct uacceptor *a, int res)
{
	struct uring_worker *uw = a->uw;
	int slot = a->slot;

	a->armed = false;
	a->slot = -1;
	uw->acc_armed--;
	a->lis->acc_armed--;
	/* Taken back for another listener's client (make_room) while its
	 * own keeps others armed: make sure no client of its own was left
	 * behind (listen_poll_done). */
	if (res == -ECANCELED && a->cancel_sent && !uw->hw.stopping &&
	    a->lis->acc_armed)
		a->lis->recheck = true;
	if (a->fault && res >= 0)
		res = a->fault;
	if (res == uw->fl->ok_result(slot)) {
		uw->accept_failing = false;
		uw->hooks->accepted(uw, slot, &a->addr, a->alen);
		return;
	}
	if (res == -EBUSY) {
		/* Someone else holds our number: never hand it out again. */
		STAT_INC(uw->w, ebusy);
		log_msg(LOG_ERR, "worker %u: accept into fd %d: EBUSY",
			uw->w->id, slot);
		return;
	}
	if (res >= 0) {
		/* A kernel that ignored the chosen fd (cannot happen after a
		 * passing probe): do not serve on an fd we do not own. */
		log_msg(LOG_ERR, "worker %u: accept returned fd %d, asked %d",
			uw->w->id, res, slot);
		close(res);
	} else if (res == -ENFILE || res == -EMFILE || res == -ENOBUFS ||
		   res == -ENOMEM) {
		/*
		 * Out of files or memory. The kernel fails an accept so
		 * before it looks at the backlog, client or none: armed
		 * again at once, it failed again at once, turn after turn,
		 * a log line each. Pause instead; meanwhile make_room()
		 * polls the listeners, and a client waiting there makes
		 * idle connections close, as at max_connections.
		 */
		uw->accept_paused_until = uw->now_ms + ACCEPT_PAUSE_MS;
		if (!uw->accept_failing)
			log_msg(LOG_WARNING, "worker %u: accept: %s; pausing",
				uw->w->id, strerror(-res));
		uw->accept_failing = true;
	} else if (res != -ECANCELED && res != -EAGAIN &&
		   res != -ECONNABORTED && res != -EINTR) {
		log_msg(LOG_ERR, "worker %u: accept: %s", uw->w->id,
			strerror(-res));
	}
	uring_slot_freed(uw, slot);
}

/* ---- wake-up, stop, drain ---- */

static void wake_arm(struct uring_worker *uw)
{
	struct io_uring_sqe *sqe = uring_sqe(uw, 1);

	if (!sqe)
		return;
	/* A poll, then one read(2) when it fires: wake-ups are rare, and
	 * this does not depend on how a kernel treats a read of an
	 * O_NONBLOCK eventfd (the server creates it non-blocking). */
	io_uring_prep_poll_add(sqe, uw->w->wake_fd, POLLIN);
	io_uring_sqe_set_data64(sqe, (uint64_t)(uintptr_t)&uw->wake);
	uw->wake.armed = true;
}

/* Stopping: cancel the accepts and listener polls still armed (again
 * each turn for any the SQ had no room for). */
static void cancel_accepts(struct uring_worker *uw)
{
	for (unsigned i = 0; i < uw->n_acc; i++) {
		struct uacceptor *a = &uw->acc[i];

		if (a->armed && !a->cancel_sent)
			a->cancel_sent = cancel_obj(uw, a);
	}
	for (unsigned i = 0; i < uw->w->n_listen; i++) {
		struct ulisten *l = &uw->lpoll[i];

		if (l->armed && !l->cancel_sent)
			l->cancel_sent = cancel_obj(uw, l);
	}
}

/* The bound on a stop's drain (worker_shutdown_timeout). */
static void drain_arm(struct uring_worker *uw)
{
	struct io_uring_sqe *sqe = uring_sqe(uw, 1);
	unsigned ms = uw->w->cfg->shutdown_timeout_ms;

	if (!sqe)
		return;
	uw->drain.ts.tv_sec = ms / 1000;
	uw->drain.ts.tv_nsec = (long)(ms % 1000) * 1000000;
	io_uring_prep_timeout(sqe, &uw->drain.ts, 0, 0);
	io_uring_sqe_set_data64(sqe, (uint64_t)(uintptr_t)&uw->drain);
	uw->drain.armed = true;
}

static void begin_stop(struct uring_worker *uw)
{
	uw->hw.stopping = true;
	cancel_accepts(uw);
	uw->hooks->stop_all(uw);
	drain_arm(uw);
}

/*
 * Each turn: what a wake-up or a stop could not submit for want of SQ
 * room (a submit refused under CQ overflow) goes now; once a stop's
 * accepts and listener polls are all gone, the server hears of it.
 */
static void stop_or_wake_retry(struct uring_worker *uw)
{
	if (!uw->hw.stopping) {
		if (!uw->wake.armed)
			wake_arm(uw);
		return;
	}
	if (!uw->drain.armed && !uw->hw.drain_expired)
		drain_arm(uw);
	if (uw->acc_armed || uw->lpoll_armed) {
		cancel_accepts(uw);
		return;
	}
	if (!atomic_load_explicit(&uw->w->accepts_gone, memory_order_relaxed))
		server_accepts_gone(uw->w);
}

static void drain_expired(struct uring_worker *uw)
{
	struct io_uring_sqe *sqe;
	char bound[24];

	config_fmt_duration(bound, sizeof(bound),
			    uw->w->cfg->shutdown_timeout_ms);
	/* With worker_shutdown_timeout 0 the bound may pass before the
	 * last connection is seen gone: nothing to say then. */
	if (uw->n_conns)
		log_msg(LOG_WARNING,
			"worker %u: %u connections still busy after %s; cancelling",
			uw->w->id, uw->n_conns, bound);
	uw->hw.drain_expired = true;
	uw->hooks->kill_all(uw);
	sqe = uring_sqe(uw, 1);
	if (sqe) {
		io_uring_prep_cancel64(sqe, 0, IORING_ASYNC_CANCEL_ANY);
		io_uring_sqe_set_data64(sqe, 0);
	}
}

static void wake_done(struct uring_worker *uw, int res)
{
	uint64_t v;

	uw->wake.armed = false;
	if (res < 0 && res != -ECANCELED)
		log_msg(LOG_ERR, "worker %u: wake poll: %s", uw->w->id,
			strerror(-res));
	/* Rare (reload, stop): one read(2) here costs nothing. */
	if (read(uw->w->wake_fd, &v, sizeof(v)) < 0 && errno != EAGAIN)
		log_msg(LOG_ERR, "worker %u: wake read: %s", uw->w->id,
			strerror(errno));
	server_worker_refresh(uw->w);
	stat_cache_use(uw->sc, uw->w->cfg);
	if (server_stopping(uw->w)) {
		if (!uw->hw.stopping)
			begin_stop(uw);
		return;
	}
	if (res != -ECANCELED)
		wake_arm(uw);
}

/* ---- the stat cache's change events ----
 *
 * The stat cache must read its inotify fd after a request's recv CQE was
 * taken and before that request is planned (stat_cache.h). Reading it
 * after every batch costs a read(2) per loop turn, most of them EAGAIN.
 * Instead a multishot poll on that fd sits in the ring, and a turn marks
 * the cache (stat_cache_batch(): read before the next lookup) only when
 * the poll may have news. Why a turn without its CQE has none, on a ring
 * with IORING_SETUP_DEFER_TASKRUN (6.1+; without it every turn marks):
 *
 * - a change completed before the request's bytes were sent has queued
 *   its event, and the poll's wake-up has queued the poll's task work on
 *   this ring, before those bytes arrived;
 * - a recv is sent with IORING_RECVSEND_POLL_FIRST (uring_conn.c), so
 *   it never completes inline at submission: its CQE is posted by task
 *   work queued when its bytes arrived, or when it was armed with bytes
 *   already there; either way after the poll's;
 * - DEFER_TASKRUN runs task work only in this thread's io_uring_enter
 *   with GETEVENTS, in the order it was queued (6.13+ runs at most a few
 *   dozen per call and keeps the rest, in order, for the next; 6.1 runs
 *   all of it), and posts a run's CQEs before the call returns, however
 *   many CQEs the call waited for (batch_wait_us, uring_wait());
 * - so the poll's CQE is posted no later than the enter that posts the
 *   recv's: in this turn's CQEs (all of them are scanned before any is
 *   handled) or an earlier turn's, which marked the cache then. Marks
 *   last until a read.
 *
 * Not quiet, so marked: a turn with a CQE of the poll, the turn right
 * after the poll was (re)armed (events from before arming are read once
 * it is armed), any turn while it is not armed on the cache's current
 * fd (a flush or reload makes a new inotify instance), and any turn
 * with CQEs held back in the kernel's overflow list (order unknown).
 *
 * Known gap, on 6.13+ only: a recv whose task work was queued by the
 * first bytes of a head, before the change, reads the rest of the head
 * when it runs. If more than the kernel's per-call limit (20) of task
 * work items ran first, the poll's item, queued after the recv's, may
 * wait for the next enter while the recv's CQE is in this one. The
 * kernel says so only through IORING_SQ_TASKRUN (with
 * IORING_SETUP_TASKRUN_FLAG), which would also make liburing's peeks
 * enter the kernel again: not taken without a measurement.
 */
static uint64_t notify_data(struct unotify *n, unsigned gen)
{
	return (uint64_t)(uintptr_t)n | (gen & URING_NOTIFY_GEN_MASK);
}

/* Poll fd (generation gen) for events through n, unless it already is:
 * a poll on an older fd is cancelled first. */
static void notify_arm_one(struct uring_worker *uw, struct unotify *n, int fd,
			   unsigned gen, unsigned events)
{
	struct io_uring_sqe *sqe;

	if (n->state != UN_OFF && n->gen == gen)
		return;
	if (n->state != UN_OFF) {
		/* Its fd names a new instance: let go of the old one. */
		sqe = uring_sqe(uw, 1);
		if (!sqe)
			return;
		io_uring_prep_cancel64(sqe, notify_data(n, n->gen), 0);
		io_uring_sqe_set_data64(sqe, 0);
		n->state = UN_OFF;
	}
	if (fd < 0)
		return;
	sqe = uring_sqe(uw, 1);
	if (!sqe)
		return;
	io_uring_prep_poll_multishot(sqe, fd, events);
	io_uring_sqe_set_data64(sqe, notify_data(n, gen));
	n->gen = gen;
	n->state = UN_SUBMITTED;
}

/* Top of a turn: poll the cache's current inotify fd, and its mount
 * table's fd for a change (stat_cache_mounts_fd(): POLLPRI, as a mount
 * queues no inotify event; the same order argument holds for it). */
static void notify_arm(struct uring_worker *uw)
{
	unsigned gen = 0;
	int fd;

	if (uw->hw.stopping)
		return;
	if (uw->notify.usable) {
		fd = stat_cache_notify_fd(uw->sc, &gen);
		notify_arm_one(uw, &uw->notify, fd, gen, POLLIN);
	}
	if (uw->mounts.usable)
		notify_arm_one(uw, &uw->mounts, stat_cache_mounts_fd(uw->sc),
			       0, POLLPRI);
}

/* Whether CQE data belongs to one of the cache's polls. */
static bool is_notify(const struct uring_worker *uw, uint64_t data)
{
	data &= ~URING_STEP_MASK;
	return data == (uint64_t)(uintptr_t)&uw->notify ||
	       data == (uint64_t)(uintptr_t)&uw->mounts;
}

/* After the enter: whether this turn's CQEs may skip the cache's read. */
static bool notify_quiet(struct uring_worker *uw)
{
	struct unotify *n = &uw->notify, *m = &uw->mounts;
	struct io_uring_cqe *cqe;
	unsigned head, gen = 0;
	bool quiet;

	quiet = n->state == UN_ARMED && m->state == UN_ARMED &&
		stat_cache_notify_fd(uw->sc, &gen) >= 0 && n->gen == gen &&
		!io_uring_cq_has_overflow(&uw->ring);
	/* Armed from now on once the enter took them from the SQ. */
	if (!io_uring_sq_ready(&uw->ring)) {
		if (n->state == UN_SUBMITTED)
			n->state = UN_ARMED;
		if (m->state == UN_SUBMITTED)
			m->state = UN_ARMED;
	}
	if (!quiet)
		return false;
	io_uring_for_each_cqe(&uw->ring, head, cqe)
	{
		if (is_notify(uw, cqe->user_data))
			return false;
	}
	return true;
}

static void notify_done(struct uring_worker *uw, struct unotify *n,
			unsigned step, int res, unsigned cflags)
{
	/* A cancelled poll on an older instance: nothing to do. */
	if (step != (n->gen & URING_NOTIFY_GEN_MASK) || n->state == UN_OFF)
		return;
	/* Read the events now, not at the next lookup: a file replaced or
	 * deleted is let go (it may be kept open and mapped) even by a
	 * worker no request comes to. Lookups still read first where this
	 * turn marked the cache. This poll may be the one that saw a mount
	 * change: the sync's own poll would not see it again. */
	if (res > 0 && n == &uw->mounts)
		stat_cache_mounts_changed(uw->sc);
	else if (res > 0)
		stat_cache_sync(uw->sc);
	if (!(cflags & IORING_CQE_F_MORE)) {
		/* Ended (CQ full, cancelled): armed again next turn. A poll
		 * the kernel refuses is not tried again: every batch marks
		 * the cache from now on. */
		if (res < 0 && res != -ECANCELED) {
			log_msg(LOG_WARNING,
				"worker %u: %s poll: %s; reading it "
				"after every batch instead",
				uw->w->id,
				n == &uw->mounts ? "mount table" : "inotify",
				strerror(-res));
			n->usable = false;
		}
		n->state = UN_OFF;
	}
}

static void dispatch(struct uring_worker *uw, uint64_t data, int res,
		     unsigned cflags)
{
	void *obj = (void *)(uintptr_t)(data & ~URING_STEP_MASK);
	unsigned step = (unsigned)(data & URING_STEP_MASK);

	if (data & URING_ORPHAN_TAG) {
		uw->n_closing--;
		orphan_closed(uw, (int)(data & ~URING_ORPHAN_TAG), res);
		return;
	}
	if (!obj)
		return; /* cancels and fillers */
	switch (*(uint8_t *)obj) {
	case UOP_ACCEPT:
		accept_done(obj, res);
		break;
	case UOP_WAKE:
		wake_done(uw, res);
		break;
	case UOP_NOTIFY:
		notify_done(uw, obj, step, res, cflags);
		break;
	case UOP_TIMER:
		uw->drain.armed = false;
		if (res == -ETIME && !uw->hw.drain_expired)
			drain_expired(uw);
		break;
	case UOP_CONN:
		uw->hooks->conn_cqe(obj, (enum ustep)step, res, cflags);
		break;
	case UOP_LISTEN:
		listen_poll_done(obj, uw, res);
		break;
	}
}

static void run_deferred(struct uring_worker *uw)
{
	struct uconn *list = uw->deferred;

	uw->deferred = NULL;
	while (list) {
		struct uconn *c = list;

		list = c->next_deferred;
		c->next_deferred = NULL;
		c->is_deferred = false;
		c->retry(c);
	}
}

/* Connections whose op got no further by its deadline. */
static void expire_timers(struct uring_worker *uw)
{
	struct tw_timer *t;

	while ((t = tw_expire(&uw->tw, uw->now_ms)))
		uw->hooks->conn_timeout(
			(struct uconn *)((char *)t -
					 offsetof(struct uconn, timer)));
}

/* IORING_FEAT_MIN_TIMEOUT and the getevents field it reads (6.12) are
 * newer than Debian 12's liburing, which calls that field `pad`. */
#define ORCD_IORING_FEAT_MIN_TIMEOUT (1U << 15)
/* And IORING_FEAT_RW_ATTR (6.14), which it lacks too. */
#define ORCD_IORING_FEAT_RW_ATTR     (1U << 16)

/*
 * Submit what is queued and wait for `nr` CQEs, at most `ts`; with
 * min_us, return that long after the wait began once at least one CQE
 * is there (6.12+). liburing 2.3 has no call that passes a min wait, so
 * this one enters the kernel itself, as io_uring_submit_and_wait_timeout
 * does: SQEs are published by the SQ tail (release), which the kernel
 * reads at the enter. Returns the SQEs submitted or -errno.
 */
static int uring_wait(struct uring_worker *uw, unsigned nr, unsigned min_us,
		      struct __kernel_timespec *ts)
{
	struct io_uring_sq *sq = &uw->ring.sq;
	unsigned tail = sq->sqe_tail;
	struct io_uring_getevents_arg arg = {
		.sigmask_sz = _NSIG / 8,
		.pad = min_us, /* min_wait_usec */
		.ts = (uint64_t)(uintptr_t)ts,
	};
	unsigned flags = IORING_ENTER_GETEVENTS | IORING_ENTER_EXT_ARG;
	long r;

	if (uring_fault_submit_refused(uw))
		return -EBUSY; /* as the kernel would: nothing in, no wait */
	if (sq->sqe_head != tail) {
		sq->sqe_head = tail;
		io_uring_smp_store_release(sq->ktail, tail);
	}
	if (uw->ring_registered)
		flags |= IORING_ENTER_REGISTERED_RING;
	r = syscall(__NR_io_uring_enter, uw->ring.enter_ring_fd,
		    tail - io_uring_smp_load_acquire(sq->khead), nr, flags,
		    &arg, sizeof(arg));
	STAT_INC(uw->w, submits);
	return r < 0 ? -errno : (int)r;
}

/* Whether a CQE is an arrival for wait_batch.h: a client's bytes or a
 * new client, not the worker's own sends, opens, reads and closes, nor
 * its timers, signals, change events or cancelled recvs. Read before
 * the CQE is handled: until then the object it names is alive. */
static bool is_arrival(uint64_t data, int res)
{
	void *obj = (void *)(uintptr_t)(data & ~URING_STEP_MASK);
	unsigned step = (unsigned)(data & URING_STEP_MASK);

	if (!obj || res < 0 || (data & URING_ORPHAN_TAG))
		return false;
	switch (*(uint8_t *)obj) {
	case UOP_CONN:
		return (step == ST_RECV || step == ST_MSHOT) && res > 0;
	case UOP_ACCEPT:
		return true;
	default:
		return false;
	}
}

static int uring_loop(struct uring_worker *uw)
{
	struct __kernel_timespec tick;
	int64_t unwind_deadline = 0;

	for (;;) {
		int64_t wait, waited;
		unsigned ask, took = 0, arrivals = 0;
		bool quiet;
		int r;

		server_heartbeat(uw->w); /* `tick` bounds an idle turn */
		run_deferred(uw);
		accept_refill(uw);
		notify_arm(uw);
		if (uw->fatal)
			return uw->fatal;
		stop_or_wake_retry(uw);
		if (uw->hw.stopping && !uw->n_conns && !uw->acc_armed &&
		    !uw->lpoll_armed && !uw->n_closing)
			return 0;
		if (uw->hw.drain_expired) {
			if (!unwind_deadline)
				unwind_deadline = mono_ms() + UNWIND_MS;
			else if (mono_ms() > unwind_deadline)
				return 0;
		}
		/* At most a second, so that `heartbeat` moves when idle. */
		wait = tw_wait_ms(&uw->tw, uw->now_ms, 1000);
		if (uw->accept_paused_until > uw->now_ms &&
		    uw->accept_paused_until - uw->now_ms < wait)
			wait = uw->accept_paused_until - uw->now_ms;
		tick.tv_sec = wait / 1000;
		tick.tv_nsec = (wait % 1000) * 1000000;
		/* A timer due within the millisecond is not held for a
		 * batch: the kernel would wait out the min wait first. */
		ask = wait ? wb_ask(&uw->wb, uw->n_conns, uw->turn_sends) : 1;
		waited = mono_us();
		r = uring_wait(uw, ask, ask > 1 ? uw->wb.min_us : 0, &tick);
		waited = mono_us() - waited;
		if (r < 0 && r != -ETIME && r != -EINTR && r != -EBUSY &&
		    r != -EAGAIN) {
			log_msg(LOG_ERR, "worker %u: io_uring_enter: %s",
				uw->w->id, strerror(-r));
			return r;
		}
		/* Refused (overflowed CQEs): nothing went in and nobody
		 * waited; the sends are still to come. */
		if (r != -EBUSY) {
			uw->turn_sends = 0;
			if (ask > 1)
				STAT_INC(uw->w, batched_waits);
		}
		uw->hw.clock.now = time(NULL);
		uw->now_ms = mono_ms();
		expire_timers(uw);
		quiet = notify_quiet(uw);
		for (;;) {
			struct io_uring_cqe *cqes[64];
			uint64_t data[64];
			int res[64];
			unsigned flags[64];
			unsigned n =
				io_uring_peek_batch_cqe(&uw->ring, cqes, 64);

			if (!n)
				break;
			for (unsigned i = 0; i < n; i++) {
				data[i] = cqes[i]->user_data;
				res[i] = cqes[i]->res;
				flags[i] = cqes[i]->flags;
				/* A multishot's SQE ends with its last CQE. */
				uw->cqes += !(flags[i] & IORING_CQE_F_MORE);
				arrivals += is_arrival(data[i], res[i]);
			}
			took += n;
			/* Give the CQ back before handling, so a kernel
			 * holding overflowed CQEs can flush them. */
			io_uring_cq_advance(&uw->ring, n);
			/* After taking the CQEs: a change made before any of
			 * these requests was sent is among the events the
			 * next lookup reads (unless the ring's poll says
			 * there are none; a later chunk is checked too). */
			for (unsigned i = 0; i < n && quiet; i++)
				quiet = !is_notify(uw, data[i]);
			if (!quiet)
				stat_cache_batch(uw->sc);
			for (unsigned i = 0; i < n; i++)
				dispatch(uw, data[i], res[i], flags[i]);
		}
		/* Without the inotify poll (notify_done() reads on its CQE),
		 * an idle turn (at least one a second) reads change events,
		 * so that an idle worker lets go of replaced files too. */
		if (!took && (!uw->notify.usable || !uw->mounts.usable))
			stat_cache_sync(uw->sc);
		wb_took(&uw->wb, ask, took, arrivals, waited);
	}
}

/*
 * Before memory an SQE named is freed (connections' buffers, iovecs and
 * msghdrs, provided buffers, accept addresses): cancel everything still
 * in flight and take CQEs until every SQE has its CQE, for at most
 * QUIESCE_MS. Closing the ring is no substitute: the kernel tears a
 * ring down later, in a worker of its own, and an op running in io-wq
 * (a read) finishes writing whenever it finishes. Returns whether the
 * ring went quiet; CQEs are counted, not handled (nothing above runs
 * again).
 */
static bool uring_quiesce(struct uring_worker *uw)
{
	int64_t deadline = mono_ms() + QUIESCE_MS;

	while (uw->sqes != uw->cqes) {
		struct __kernel_timespec tick = {0, 50 * 1000000};
		struct io_uring_sqe *sqe;
		struct io_uring_cqe *cqe;
		int r;

		if (mono_ms() > deadline)
			return false;
		/* Again each turn: a cancel finds only what has started; a
		 * step queued behind it in a link goes with it. */
		sqe = uring_sqe(uw, 1);
		if (sqe) {
			io_uring_prep_cancel64(sqe, 0, IORING_ASYNC_CANCEL_ANY);
			io_uring_sqe_set_data64(sqe, 0);
		}
		r = io_uring_submit_and_wait_timeout(&uw->ring, &cqe, 1, &tick,
						     NULL);
		if (r < 0 && r != -ETIME && r != -EINTR && r != -EBUSY &&
		    r != -EAGAIN)
			return false;
		while (io_uring_peek_cqe(&uw->ring, &cqe) == 0) {
			uw->cqes += !(cqe->flags & IORING_CQE_F_MORE);
			io_uring_cqe_seen(&uw->ring, cqe);
		}
	}
	return true;
}

/* Returns whether uw may be freed: false when the kernel may still
 * write into it or into what it points to (then all of it stays). */
static bool uring_cleanup(struct uring_worker *uw)
{
	bool quiet = uring_quiesce(uw);

	if (!quiet)
		log_msg(LOG_ERR,
			"worker %u: %u operations still in flight %d ms after cancelling them; keeping their memory",
			uw->w->id, (unsigned)(uw->sqes - uw->cqes), QUIESCE_MS);
	/* Anything still live was cut short by the unwind bound. For
	 * `specific` its fds are real: close them here; a direct table goes
	 * with the ring, but not a socket installed from it as an fd. */
	for (struct uconn *c = uw->conns; c; c = c->next)
		uring_close_sock_fds(c, true);
	if (uw->fl == &uring_flavor_specific) {
		for (struct uconn *c = uw->conns; c; c = c->next) {
			if (c->file >= 0)
				close(c->file);
			close(c->sock);
		}
		for (unsigned i = 0; i < uw->n_acc; i++)
			if (uw->acc[i].armed && uw->acc[i].slot >= 0)
				close(uw->acc[i].slot); /* if it landed */
	}
	io_uring_queue_exit(&uw->ring);
	if (quiet)
		uw->hooks->teardown(uw);
	uw->core->worker_fini(&uw->hw);
	stat_cache_free(uw->sc);
	if (quiet) {
		free(uw->br);
		free(uw->br_bufs);
		free(uw->acc);
	}
	slots_destroy(&uw->slots);
	return quiet;
}
/* Recent kernels count a ring's memory against RLIMIT_MEMLOCK for a
 * process without CAP_IPC_LOCK; where that limit is small (64 KiB, the
 * old default, as in some containers) a second worker's ring fails with
 * ENOMEM, which names nothing. */
static const char *memlock_hint(int err, char *buf, size_t cap)
{
	struct rlimit rl;

	if (err != -ENOMEM || getrlimit(RLIMIT_MEMLOCK, &rl) ||
	    rl.rlim_cur == RLIM_INFINITY)
		return "";
	snprintf(buf, cap,
		 " (RLIMIT_MEMLOCK is %llu KiB, which each worker's ring may count against: raise it, as LimitMEMLOCK= does under systemd, or run fewer threads)",
		 (unsigned long long)rl.rlim_cur / 1024);
	return buf;
}


/* One worker of either engine: fl names slots, hooks are the transport
 * above. Returns when the worker has stopped. */
int uring_run(struct orcd_worker *w, const struct uring_flavor *fl,
	      const struct uring_hooks *hooks)
{
	struct uring_worker *uw =
		aligned_alloc(URING_ALIGN, (sizeof(*uw) + URING_ALIGN - 1) &
						   ~(size_t)(URING_ALIGN - 1));
	struct conn_budget budget;
	char hint[256];
	bool min_wait;
	int base, r;
	unsigned n, n_acc, cache_fds;

	if (!uw)
		return -ENOMEM;
	memset(uw, 0, sizeof(*uw));
	uw->w = w;
	uw->fl = fl;
	uw->hooks = hooks;
	uw->core = w->core;
	uw->core->worker_init(&uw->hw, w, hooks->tp);
	uw->wake.kind = UOP_WAKE;
	uw->drain.kind = UOP_TIMER;
	uw->notify.kind = UOP_NOTIFY;
	uw->mounts.kind = UOP_NOTIFY;
	uw->now_ms = mono_ms();
	tw_init(&uw->tw, uw->now_ms);
	r = uring_slot_range(uw, &base, &n);
	if (r) {
		log_msg(LOG_ERR, "worker %u: slot range: %s", w->id,
			strerror(-r));
		free(uw);
		return r;
	}
	r = slots_init(&uw->slots, base, n);
	if (r) {
		free(uw);
		return r;
	}
	if (fl == &uring_flavor_specific) {
		r = slots_reserve_open_fds(&uw->slots);
		if (r < 0) {
			slots_destroy(&uw->slots);
			free(uw);
			return r;
		}
	}
	/* Files get at least an eighth of the slots: accepted sockets can
	 * never starve the chains that answer them (conn_budget.h). */
	conn_budget(n, w->cfg->max_connections, &budget);
	uw->file_reserve = budget.file_reserve;
	uw->ring_entries = uring_ring_depth(w->cfg);
	r = uring_ring_init(&uw->ring, uw->ring_entries);
	if (r) {
		log_msg(LOG_ERR, "worker %u: io_uring_queue_init(%u): %s%s",
			w->id, uw->ring_entries, strerror(-r),
			memlock_hint(r, hint, sizeof(hint)));
		slots_destroy(&uw->slots);
		free(uw);
		return r;
	}
	if (fl == &uring_flavor_specific) {
		/* For keep-alive connections' sockets (uring_conn.c); without
		 * it they stay on their fds. */
		r = uring_register_sparse(&uw->ring, n);
		uw->sock_table = !r;
		if (r)
			log_msg(LOG_WARNING,
				"worker %u: no file table for sockets (%s); "
				"keep-alive connections stay on their fds",
				w->id, strerror(-r));
	} else {
		r = uring_register_sparse(&uw->ring, n);
		if (r) {
			log_msg(LOG_ERR,
				"worker %u: register %u sparse files: %s",
				w->id, n, strerror(-r));
			io_uring_queue_exit(&uw->ring);
			slots_destroy(&uw->slots);
			free(uw);
			return r;
		}
	}
	/* io_uring_enter by the ring's registered index, not its fd: no
	 * file-table lookup per call (5.18+; older kernels keep the fd). */
	uw->ring_registered = io_uring_register_ring_fd(&uw->ring) == 1;
	/* Batched waits need the kernel's min wait; without it every wait
	 * asks for one CQE, as before 6.12 (worker 0 says so). */
	min_wait = uw->ring.features & ORCD_IORING_FEAT_MIN_TIMEOUT;
	wb_init(&uw->wb, min_wait ? w->cfg->batch_wait_us : 0);
	if (!min_wait && w->cfg->batch_wait_us && w->id == 0)
		log_msg(LOG_INFO,
			"batch_wait_us %u: this kernel has no min wait for io_uring (Linux 6.12+); each wait takes one completion",
			w->cfg->batch_wait_us);
	uring_br_setup(uw);
	uw->hw.in_min = uw->br ? uw->br_size : 0;
	/* A multishot recv stays armed for a keep-alive connection's life.
	 * On a fixed file before 6.13 it would hold the ring's resource node
	 * that long, and with it every file-table entry removed after it
	 * (each response file's close_direct): kernels since then free
	 * entries one by one. IORING_FEAT_RW_ATTR (6.14) is the first
	 * feature flag after that. ORCD_URING_NO_MSHOT: tests and benches
	 * of single recvs. */
	uw->mshot = uw->br && (uw->ring.features & ORCD_IORING_FEAT_RW_ATTR) &&
		    !getenv("ORCD_URING_NO_MSHOT");
	/* Task work in queue order, in this thread only: see notify_arm().
	 * ORCD_URING_NO_NOTIFY_POLL: tests of a ring without it. */
	uw->notify.usable = (uw->ring.flags & IORING_SETUP_DEFER_TASKRUN) &&
			    !getenv("ORCD_URING_NO_NOTIFY_POLL");
	uw->mounts.usable = uw->notify.usable;
	uw->fd_install = fl == &uring_flavor_direct &&
			 uring_has_fd_install(&uw->ring);
	uring_kept_fds(uw, &cache_fds, &uw->sock_fds_max);
	uring_fault_setup(uw);
	uw->sc = stat_cache_new(w->cfg, w->stats.stat_cache);
	stat_cache_limit_fds(uw->sc, cache_fds);
	if (!uw->sc)
		log_msg(LOG_WARNING, "worker %u: no memory for the stat cache",
			w->id);
	uw->hw.bodies_in_buffer = true;
	uw->hw.lookup.fn = stat_cache_lookup_cb;
	uw->hw.lookup.ctx = uw->sc;
	uw->hw.lookup.readable = stat_cache_readable_cb;
	uw->hw.lookup_forget = stat_cache_forget_cb;
	for (unsigned i = 0; i < ORCD_MAX_LISTEN; i++) {
		memset(&uw->lpoll[i], 0, sizeof(uw->lpoll[i]));
		uw->lpoll[i].kind = UOP_LISTEN;
		uw->lpoll[i].lfd = i < w->n_listen ? w->listen_fds[i] : -1;
	}
	n_acc = w->n_listen * (w->cfg->accepts ? w->cfg->accepts : 1);
	uw->acc = aligned_alloc(URING_ALIGN, n_acc * sizeof(*uw->acc));
	if (!uw->acc) {
		/* n_acc stays 0: cleanup has no acceptors to look at. */
		if (uring_cleanup(uw))
			free(uw);
		return -ENOMEM;
	}
	for (unsigned i = 0; i < n_acc; i++) {
		memset(&uw->acc[i], 0, sizeof(uw->acc[i]));
		uw->acc[i].kind = UOP_ACCEPT;
		uw->acc[i].uw = uw;
		uw->acc[i].lis = &uw->lpoll[i % w->n_listen];
		uw->acc[i].lfd = w->listen_fds[i % w->n_listen];
		uw->acc[i].slot = -1;
	}
	uw->n_acc = n_acc;
	wake_arm(uw);
	if (server_stopping(w))
		begin_stop(uw);
	r = uring_loop(uw);
	if (uring_cleanup(uw))
		free(uw);
	return r;
}
