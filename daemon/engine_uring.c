// SPDX-License-Identifier: MIT
/*
 * The two io_uring engines: one ring per worker, accepts always in flight
 * on pre-chosen slots, a wake-up poll on the worker's eventfd, and the
 * loop that submits everything an iteration produced with one
 * io_uring_enter. Connections live in uring_conn.c, the per-request chain
 * in uring_chain.c.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "engine.h"
#include "log.h"
#include "server.h"
#include "uring.h"

/* How long a stopping worker lets in-flight responses finish. */
#define DRAIN_MS 10000
/* After the drain bound: how long cancelled work may take to unwind. */
#define UNWIND_MS 3000

/* ---- the table: how each engine names a slot ---- */

static void direct_prep_accept(struct io_uring_sqe *sqe, int lfd,
			       struct sockaddr *addr, socklen_t *alen, int slot)
{
	/* No SOCK_CLOEXEC: 6.1 rejects it together with a file_index. */
	io_uring_prep_accept_direct(sqe, lfd, addr, alen, 0, (unsigned)slot);
}

static void direct_prep_open(struct io_uring_sqe *sqe, int dfd,
			     const char *path, struct orcd_open_how *how,
			     int slot)
{
	/* No O_CLOEXEC for the same reason; a direct descriptor is never
	 * in the fd table anyway. No O_NONBLOCK either: 6.1 marks reads of
	 * an O_NONBLOCK regular file REQ_F_NOWAIT unless its superblock has
	 * a nowait block device (not tmpfs, overlayfs, NFS), and a page
	 * cache miss then completes the read with -EAGAIN: a spurious short
	 * read that would cancel the chain. */
	how->flags = O_RDONLY | O_NOCTTY;
	io_uring_prep_rw(IORING_OP_OPENAT2, sqe, dfd, path,
			 ORCD_OPEN_HOW_SIZE_VER0, (uint64_t)(uintptr_t)how);
	__io_uring_set_target_fixed_file(sqe, (unsigned)slot);
}

static void direct_prep_close(struct io_uring_sqe *sqe, int slot)
{
	io_uring_prep_close_direct(sqe, (unsigned)slot);
}

static int direct_ok_result(int slot)
{
	(void)slot;
	return 0;
}

static void specific_prep_accept(struct io_uring_sqe *sqe, int lfd,
				 struct sockaddr *addr, socklen_t *alen,
				 int slot)
{
	io_uring_prep_accept(sqe, lfd, addr, alen, SOCK_CLOEXEC);
	sqe->ioprio |= ORCD_IORING_ACCEPT_SPECIFIC_FD;
	sqe->len = (uint32_t)slot;
}

static void specific_prep_open(struct io_uring_sqe *sqe, int dfd,
			       const char *path, struct orcd_open_how *how,
			       int slot)
{
	how->flags = O_RDONLY | O_NOCTTY | O_CLOEXEC | ORCD_O_SPECIFIC_FD;
	how->fd = (uint32_t)slot;
	io_uring_prep_rw(IORING_OP_OPENAT2, sqe, dfd, path,
			 ORCD_OPEN_HOW_SIZE_VER1, (uint64_t)(uintptr_t)how);
}

static void specific_prep_close(struct io_uring_sqe *sqe, int slot)
{
	io_uring_prep_close(sqe, slot);
}

static int specific_ok_result(int slot)
{
	return slot;
}

const struct uring_flavor uring_flavor_direct = {
	.name = "direct",
	.slot_sqe_flag = IOSQE_FIXED_FILE,
	.how_size = ORCD_OPEN_HOW_SIZE_VER0,
	.prep_accept = direct_prep_accept,
	.prep_open = direct_prep_open,
	.prep_close = direct_prep_close,
	.ok_result = direct_ok_result,
};

const struct uring_flavor uring_flavor_specific = {
	.name = "specific",
	.slot_sqe_flag = 0,
	.how_size = ORCD_OPEN_HOW_SIZE_VER1,
	.prep_accept = specific_prep_accept,
	.prep_open = specific_prep_open,
	.prep_close = specific_prep_close,
	.ok_result = specific_ok_result,
};

/* ---- ring set-up ---- */

/* Depth: room for every accept plus a few whole chains per iteration;
 * ORCD_URING_ENTRIES overrides (tests use a tiny ring). Chains never
 * split across submissions (uring_sqe), so 8 is the floor. */
static unsigned ring_depth(const struct orcd_config *cfg)
{
	const char *env = getenv("ORCD_URING_ENTRIES");
	unsigned d = 256;

	if (env && *env) {
		d = (unsigned)strtoul(env, NULL, 10);
	} else {
		while (d < cfg->accepts * 4u && d < 4096)
			d <<= 1;
	}
	if (d < 8)
		d = 8;
	if (d > 32768)
		d = 32768;
	return d;
}

static int ring_init(struct io_uring *ring, unsigned entries)
{
	/* Newest flags first; each older kernel refuses with EINVAL. */
	static const unsigned tries[] = {
		IORING_SETUP_SUBMIT_ALL | IORING_SETUP_COOP_TASKRUN |
			IORING_SETUP_SINGLE_ISSUER |
			IORING_SETUP_DEFER_TASKRUN,
		IORING_SETUP_SUBMIT_ALL | IORING_SETUP_COOP_TASKRUN,
		IORING_SETUP_SUBMIT_ALL,
		0,
	};
	int r = -EINVAL;

	for (size_t i = 0; i < sizeof(tries) / sizeof(tries[0]); i++) {
		struct io_uring_params p = {
			.flags = tries[i] | IORING_SETUP_CQSIZE,
			.cq_entries = entries * 4,
		};

		r = io_uring_queue_init_params(entries, ring, &p);
		if (r != -EINVAL)
			return r;
	}
	return r;
}

static const struct {
	int op;
	const char *name;
} needed_ops[] = {
	{ IORING_OP_ACCEPT, "ACCEPT" },
	{ IORING_OP_OPENAT2, "OPENAT2" },
	{ IORING_OP_READ, "READ" },
	{ IORING_OP_SEND, "SEND" },
	{ IORING_OP_RECV, "RECV" },
	{ IORING_OP_CLOSE, "CLOSE" },
	{ IORING_OP_LINK_TIMEOUT, "LINK_TIMEOUT" },
	{ IORING_OP_TIMEOUT, "TIMEOUT" },
	{ IORING_OP_ASYNC_CANCEL, "ASYNC_CANCEL" },
	{ IORING_OP_POLL_ADD, "POLL_ADD" },
	{ IORING_OP_SHUTDOWN, "SHUTDOWN" },
};

/* The ring works and has every opcode the chain uses. */
static int probe_ring(struct io_uring *ring, char *why, size_t cap)
{
	struct io_uring_probe *p;
	int r = ring_init(ring, 8);

	if (r < 0) {
		snprintf(why, cap, "io_uring_queue_init: %s", strerror(-r));
		return r;
	}
	p = io_uring_get_probe_ring(ring);
	if (!p) {
		snprintf(why, cap, "io_uring probe failed");
		io_uring_queue_exit(ring);
		return -ENOTSUP;
	}
	for (size_t i = 0; i < sizeof(needed_ops) / sizeof(needed_ops[0]);
	     i++) {
		if (!io_uring_opcode_supported(p, needed_ops[i].op)) {
			snprintf(why, cap, "io_uring lacks IORING_OP_%s",
				 needed_ops[i].name);
			io_uring_free_probe(p);
			io_uring_queue_exit(ring);
			return -ENOTSUP;
		}
	}
	io_uring_free_probe(p);
	return 0;
}

/*
 * An empty registered-file table of n slots. IORING_RSRC_REGISTER_SPARSE
 * is 5.19+; 5.15..5.18 accept a table of -1 entries instead.
 */
static int register_sparse(struct io_uring *ring, unsigned n)
{
	int r = io_uring_register_files_sparse(ring, n);

	if (r == -EINVAL) {
		int *fds = malloc(n * sizeof(*fds));

		if (!fds)
			return -ENOMEM;
		for (unsigned i = 0; i < n; i++)
			fds[i] = -1;
		r = io_uring_register_files(ring, fds, n);
		free(fds);
	}
	return r;
}

static int direct_probe(const struct orcd_config *cfg, char *why, size_t cap)
{
	struct io_uring ring;
	int r;

	(void)cfg;
	r = probe_ring(&ring, why, cap);
	if (r)
		return r;
	r = register_sparse(&ring, 4);
	io_uring_queue_exit(&ring);
	if (r) {
		snprintf(why, cap, "no sparse registered files: %s",
			 strerror(-r));
		return r;
	}
	return 0;
}

/* openat2 with O_SPECIFIC_FD at a number we know is free. */
static int specific_open_test(char *why, size_t cap)
{
	struct orcd_open_how how = {
		.flags = O_RDONLY | O_CLOEXEC | ORCD_O_SPECIFIC_FD,
	};
	int want = open("/dev/null", O_RDONLY | O_CLOEXEC), fd;

	if (want < 0) {
		snprintf(why, cap, "open /dev/null: %s", strerror(errno));
		return -errno;
	}
	/* Move it up so the number we aim at is not also the lowest free
	 * one (which a kernel ignoring the flag would hand out anyway). */
	fd = fcntl(want, F_DUPFD_CLOEXEC, want + 7);
	close(want);
	if (fd < 0)
		return -errno;
	want = fd;
	close(want);
	how.fd = (uint32_t)want;
	fd = (int)syscall(SYS_openat2, AT_FDCWD, "/dev/null", &how,
			  (size_t)ORCD_OPEN_HOW_SIZE_VER1);
	if (fd < 0) {
		int e = errno;

		snprintf(why, cap, "openat2 O_SPECIFIC_FD: %s", strerror(e));
		return -e;
	}
	close(fd);
	if (fd != want) {
		snprintf(why, cap, "openat2 O_SPECIFIC_FD ignored (got %d, asked %d)",
			 fd, want);
		return -ENOTSUP;
	}
	return 0;
}

static int specific_probe(const struct orcd_config *cfg, char *why,
			  size_t cap)
{
	struct io_uring ring;
	int r;

	(void)cfg;
	if (prctl(ORCD_PR_INCREASE_MIN_FD, 0, 0, 0, 0) < 0) {
		snprintf(why, cap, "no PR_INCREASE_MIN_FD: %s",
			 strerror(errno));
		return -ENOTSUP;
	}
	r = specific_open_test(why, cap);
	if (r)
		return -ENOTSUP;
	r = probe_ring(&ring, why, cap);
	if (r)
		return r;
	io_uring_queue_exit(&ring);
	return 0;
}

/*
 * Reserve n = slots x workers fd numbers for the whole process. The
 * previous minimum becomes the base; numbers in the range that are
 * already open (stdio, listeners, root_fd: the first reservation starts
 * at 0) are found by each worker and never handed out.
 */
static int specific_setup(struct orcd_server *srv, char *err, size_t cap)
{
	struct orcd_config *cfg = srv->cfg;
	unsigned long n = (unsigned long)cfg->slots * srv->n_workers;
	struct rlimit rl;
	int base;

	base = prctl(ORCD_PR_INCREASE_MIN_FD, n, 0, 0, 0);
	if (base < 0) {
		snprintf(err, cap, "PR_INCREASE_MIN_FD %lu: %s", n,
			 strerror(errno));
		return -errno;
	}
	/* O_SPECIFIC_FD says EBADF at or above RLIMIT_NOFILE. */
	if (getrlimit(RLIMIT_NOFILE, &rl) == 0 &&
	    rl.rlim_cur < (rlim_t)base + n + 1024) {
		rl.rlim_cur = (rlim_t)base + n + 1024;
		if (rl.rlim_max != RLIM_INFINITY && rl.rlim_cur > rl.rlim_max)
			rl.rlim_cur = rl.rlim_max;
		setrlimit(RLIMIT_NOFILE, &rl);
		if (rl.rlim_cur < (rlim_t)base + n) {
			snprintf(err, cap,
				 "RLIMIT_NOFILE %llu too small for %lu slots from fd %d",
				 (unsigned long long)rl.rlim_cur, n, base);
			return -EMFILE;
		}
	}
	srv->slot_base = base;
	return 0;
}

/* ---- submission ---- */

/*
 * An SQE, with room for `need` in total: a chain must never straddle two
 * submissions, because the kernel ends an open link at the end of each
 * io_uring_enter. Submits early when the SQ is short (counted).
 */
struct io_uring_sqe *uring_sqe(struct uring_worker *uw, unsigned need)
{
	if (io_uring_sq_space_left(&uw->ring) < need) {
		int r = io_uring_submit(&uw->ring);

		STAT_INC(uw->w, submits);
		if (r < 0 && r != -EBUSY && r != -EAGAIN) {
			log_msg(LOG_ERR, "worker %u: io_uring_submit: %s",
				uw->w->id, strerror(-r));
			uw->fatal = r;
		}
		if (io_uring_sq_space_left(&uw->ring) < need)
			return NULL;
	}
	return io_uring_get_sqe(&uw->ring);
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
	if (wt) {
		struct uconn *c = (struct uconn *)((char *)wt -
						   offsetof(struct uconn, waiter));

		c->file = wt->slot;
		uchain_start(c);
	}
}

/*
 * Close a slot nothing else refers to (a socket we could not take on);
 * its slot comes back with the CQE, like every other.
 */
void uring_close_orphan(struct uring_worker *uw, int slot)
{
	struct io_uring_sqe *sqe = uring_sqe(uw, 1);

	if (!sqe) {
		/* No SQ room even after submitting: leaking one slot is
		 * safer than reusing it before its close. */
		log_msg(LOG_ERR, "worker %u: slot %d leaked (SQ full)",
			uw->w->id, slot);
		return;
	}
	uw->fl->prep_close(sqe, slot);
	io_uring_sqe_set_data64(sqe, ((uint64_t)(uint32_t)slot << 32) |
					     URING_ORPHAN_TAG);
}

/* ---- provided buffers for first recvs ---- */

#define BR_ENTRIES 256
#define BR_SIZE 4096

void uring_br_recycle(struct uring_worker *uw, unsigned bid)
{
	io_uring_buf_ring_add(uw->br, uw->br_bufs + (size_t)bid * uw->br_size,
			      uw->br_size, (unsigned short)bid,
			      io_uring_buf_ring_mask(uw->br_n), 0);
	io_uring_buf_ring_advance(uw->br, 1);
}

/* Not fatal when it fails: connections then keep their own buffers.
 * ORCD_URING_PBUFS (a power of two) shrinks the ring for tests that want
 * to see it run dry. */
static void br_setup(struct uring_worker *uw)
{
	const char *env = getenv("ORCD_URING_PBUFS");
	unsigned n = BR_ENTRIES, size = BR_SIZE;
	size_t ring_bytes;
	struct io_uring_buf_reg reg = { 0 };
	void *ring;
	int r;

	if (env && *env) {
		n = (unsigned)strtoul(env, NULL, 10);
		if (!n || n > 32768 || (n & (n - 1)))
			n = BR_ENTRIES;
	}
	ring_bytes = n * sizeof(struct io_uring_buf);
	if (size > uw->w->cfg->max_header_bytes)
		size = uw->w->cfg->max_header_bytes;
	if (posix_memalign(&ring, 4096, ring_bytes))
		return;
	uw->br_bufs = malloc((size_t)n * size);
	if (!uw->br_bufs) {
		free(ring);
		return;
	}
	memset(ring, 0, ring_bytes);
	reg.ring_addr = (uint64_t)(uintptr_t)ring;
	reg.ring_entries = n;
	reg.bgid = URING_BGID;
	r = io_uring_register_buf_ring(&uw->ring, &reg, 0);
	if (r) {
		free(ring);
		free(uw->br_bufs);
		uw->br_bufs = NULL;
		return;
	}
	uw->br = ring;
	uw->br_n = n;
	uw->br_size = size;
	io_uring_buf_ring_init(uw->br);
	for (unsigned i = 0; i < n; i++)
		io_uring_buf_ring_add(uw->br, uw->br_bufs + (size_t)i * size,
				      size, (unsigned short)i,
				      io_uring_buf_ring_mask(n), (int)i);
	io_uring_buf_ring_advance(uw->br, n);
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
	uw->fl->prep_accept(sqe, a->lfd, (struct sockaddr *)&a->addr, &a->alen,
			    slot);
	io_uring_sqe_set_data64(sqe, (uint64_t)(uintptr_t)a);
	a->armed = true;
	a->cancel_sent = false;
	uw->acc_armed++;
}

/* Keep cfg->accepts accepts in flight while slots beyond the files'
 * reserve are free and nobody waits for one. */
static void accept_refill(struct uring_worker *uw)
{
	unsigned maxc = uw->w->cfg->max_connections;

	if (uw->stopping)
		return;
	for (unsigned i = 0; i < uw->n_acc; i++) {
		struct uacceptor *a = &uw->acc[i];

		if (a->armed)
			continue;
		if (uw->slots.wait_head ||
		    slots_available(&uw->slots) <= uw->file_reserve)
			return;
		if (maxc && uw->n_conns + uw->acc_armed >= maxc)
			return;
		accept_arm(a);
		if (!a->armed)
			return;
	}
}

static void accept_done(struct uacceptor *a, int res)
{
	struct uring_worker *uw = a->uw;
	int slot = a->slot;

	a->armed = false;
	a->slot = -1;
	uw->acc_armed--;
	if (res == uw->fl->ok_result(slot)) {
		struct uconn *c;

		STAT_INC(uw->w, conns_accepted);
		c = uconn_new(uw, slot, &a->addr, a->alen);
		if (!c) {
			log_msg(LOG_ERR, "worker %u: no memory for a connection",
				uw->w->id);
			return;
		}
		if (uw->stopping)
			uconn_close(c, true);
		else
			uconn_input(c);
		return;
	}
	if (res == -EBUSY) {
		/* Someone else holds our number: never hand it out again. */
		STAT_INC(uw->w, ebusy);
		log_msg(LOG_ERR, "worker %u: accept into fd %d: EBUSY", uw->w->id,
			slot);
		return;
	}
	if (res >= 0) {
		/* A kernel that ignored the chosen fd (cannot happen after a
		 * passing probe): do not serve on an fd we do not own. */
		log_msg(LOG_ERR, "worker %u: accept returned fd %d, asked %d",
			uw->w->id, res, slot);
		close(res);
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

static void begin_stop(struct uring_worker *uw)
{
	struct io_uring_sqe *sqe;

	uw->stopping = true;
	for (unsigned i = 0; i < uw->n_acc; i++) {
		struct uacceptor *a = &uw->acc[i];

		if (!a->armed || a->cancel_sent)
			continue;
		sqe = uring_sqe(uw, 1);
		if (!sqe)
			break;
		io_uring_prep_cancel64(sqe, (uint64_t)(uintptr_t)a, 0);
		io_uring_sqe_set_data64(sqe, 0);
		a->cancel_sent = true;
	}
	for (struct uconn *c = uw->conns, *next; c; c = next) {
		next = c->next;
		uconn_stop(c);
	}
	sqe = uring_sqe(uw, 1);
	if (sqe) {
		uw->drain.ts.tv_sec = DRAIN_MS / 1000;
		uw->drain.ts.tv_nsec = 0;
		io_uring_prep_timeout(sqe, &uw->drain.ts, 0, 0);
		io_uring_sqe_set_data64(sqe, (uint64_t)(uintptr_t)&uw->drain);
		uw->drain.armed = true;
	}
}

static void drain_expired(struct uring_worker *uw)
{
	struct io_uring_sqe *sqe;

	log_msg(LOG_WARNING,
		"worker %u: %u connections still busy after %ds; cancelling",
		uw->w->id, uw->n_conns, DRAIN_MS / 1000);
	uw->drain_expired = true;
	for (struct uconn *c = uw->conns, *next; c; c = next) {
		next = c->next;
		uconn_kill(c);
	}
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
	if (server_stopping(uw->w)) {
		if (!uw->stopping)
			begin_stop(uw);
		return;
	}
	if (res != -ECANCELED)
		wake_arm(uw);
}

static void dispatch(struct uring_worker *uw, uint64_t data, int res,
		     unsigned cflags)
{
	void *obj = (void *)(uintptr_t)(data & ~URING_STEP_MASK);
	unsigned step = (unsigned)(data & URING_STEP_MASK);

	if (step == URING_ORPHAN_TAG) {
		uring_slot_freed(uw, (int)(data >> 32));
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
	case UOP_TIMER:
		uw->drain.armed = false;
		if (res == -ETIME && !uw->drain_expired)
			drain_expired(uw);
		break;
	case UOP_CONN:
		uconn_handle_cqe(obj, (enum ustep)step, res, cflags);
		break;
	}
}

static int64_t mono_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
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

static int uring_loop(struct uring_worker *uw)
{
	struct __kernel_timespec tick = { .tv_sec = 1 };
	int64_t unwind_deadline = 0;

	for (;;) {
		struct io_uring_cqe *cqe;
		int r;

		server_heartbeat(uw->w); /* `tick` bounds an idle turn */
		run_deferred(uw);
		accept_refill(uw);
		if (uw->fatal)
			return uw->fatal;
		if (uw->stopping && !uw->n_conns && !uw->acc_armed)
			return 0;
		if (uw->drain_expired) {
			if (!unwind_deadline)
				unwind_deadline = mono_ms() + UNWIND_MS;
			else if (mono_ms() > unwind_deadline)
				return 0;
		}
		r = io_uring_submit_and_wait_timeout(&uw->ring, &cqe, 1, &tick,
						     NULL);
		STAT_INC(uw->w, submits);
		if (r < 0 && r != -ETIME && r != -EINTR && r != -EBUSY &&
		    r != -EAGAIN) {
			log_msg(LOG_ERR, "worker %u: io_uring_enter: %s",
				uw->w->id, strerror(-r));
			return r;
		}
		uw->now = time(NULL);
		for (;;) {
			struct io_uring_cqe *cqes[64];
			uint64_t data[64];
			int res[64];
			unsigned flags[64];
			unsigned n = io_uring_peek_batch_cqe(&uw->ring, cqes, 64);

			if (!n)
				break;
			for (unsigned i = 0; i < n; i++) {
				data[i] = cqes[i]->user_data;
				res[i] = cqes[i]->res;
				flags[i] = cqes[i]->flags;
			}
			/* Give the CQ back before handling, so a kernel
			 * holding overflowed CQEs can flush them. */
			io_uring_cq_advance(&uw->ring, n);
			for (unsigned i = 0; i < n; i++)
				dispatch(uw, data[i], res[i], flags[i]);
		}
	}
}

static void uring_cleanup(struct uring_worker *uw)
{
	/* Anything still live was cut short by the unwind bound. For
	 * `specific` its fds are real: close them here; a direct table goes
	 * with the ring. */
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
	free(uw->br);
	free(uw->br_bufs);
	uconn_free_all(uw);
	free(uw->acc);
	slots_destroy(&uw->slots);
}

static int slot_range(struct uring_worker *uw, int *base, unsigned *n)
{
	struct orcd_worker *w = uw->w;

	*n = w->cfg->slots;
	*base = 0;
	if (uw->fl != &uring_flavor_specific)
		return 0;
	/* The reservation was made by setup for every worker; its size is
	 * the current minimum minus the base (nothing else raises it). */
	int min = prctl(ORCD_PR_INCREASE_MIN_FD, 0, 0, 0, 0);

	if (min < 0)
		return -errno;
	unsigned total = (unsigned)(min - w->srv->slot_base);

	*n = total / w->srv->n_workers;
	*base = w->srv->slot_base + (int)(w->id * *n);
	return *n ? 0 : -ERANGE;
}

static int uring_run(struct orcd_worker *w, const struct uring_flavor *fl)
{
	struct uring_worker *uw = aligned_alloc(URING_ALIGN,
						(sizeof(*uw) + URING_ALIGN - 1) &
							~(size_t)(URING_ALIGN - 1));
	int base, r;
	unsigned n;

	if (!uw)
		return -ENOMEM;
	memset(uw, 0, sizeof(*uw));
	uw->w = w;
	uw->fl = fl;
	uw->wake.kind = UOP_WAKE;
	uw->drain.kind = UOP_TIMER;
	uw->now = time(NULL);
	r = slot_range(uw, &base, &n);
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
	 * never starve the chains that answer them. */
	uw->file_reserve = n / 8 ? n / 8 : 1;
	uw->ring_entries = ring_depth(w->cfg);
	r = ring_init(&uw->ring, uw->ring_entries);
	if (r) {
		log_msg(LOG_ERR, "worker %u: io_uring_queue_init(%u): %s", w->id,
			uw->ring_entries, strerror(-r));
		slots_destroy(&uw->slots);
		free(uw);
		return r;
	}
	if (fl == &uring_flavor_direct) {
		r = register_sparse(&uw->ring, n);
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
	br_setup(uw);
	uw->n_acc = w->n_listen * (w->cfg->accepts ? w->cfg->accepts : 1);
	uw->acc = aligned_alloc(URING_ALIGN, uw->n_acc * sizeof(*uw->acc));
	if (!uw->acc) {
		uring_cleanup(uw);
		free(uw);
		return -ENOMEM;
	}
	for (unsigned i = 0; i < uw->n_acc; i++) {
		memset(&uw->acc[i], 0, sizeof(uw->acc[i]));
		uw->acc[i].kind = UOP_ACCEPT;
		uw->acc[i].uw = uw;
		uw->acc[i].lfd = w->listen_fds[i % w->n_listen];
		uw->acc[i].slot = -1;
	}
	wake_arm(uw);
	if (server_stopping(w))
		begin_stop(uw);
	r = uring_loop(uw);
	uring_cleanup(uw);
	free(uw);
	return r;
}

static int direct_run(struct orcd_worker *w)
{
	return uring_run(w, &uring_flavor_direct);
}

static int specific_run(struct orcd_worker *w)
{
	return uring_run(w, &uring_flavor_specific);
}

const struct orcd_engine orcd_engine_direct = {
	.name = "direct",
	.kind = ORCD_ENGINE_DIRECT,
	.probe = direct_probe,
	.setup = NULL,
	.run = direct_run,
};

const struct orcd_engine orcd_engine_specific = {
	.name = "specific",
	.kind = ORCD_ENGINE_SPECIFIC,
	.probe = specific_probe,
	.setup = specific_setup,
	.run = specific_run,
};
