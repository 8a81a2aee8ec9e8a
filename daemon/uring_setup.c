// SPDX-License-Identifier: MIT
/*
 * What the io_uring engines need from the kernel, set up once: the table
 * of how each engine names a slot in an SQE, the ring (newest flags the
 * kernel has), the registered-file table, the provided-buffer ring, the
 * probes engine_select() calls, and for `specific` the process-wide fd
 * reservation with PR_INCREASE_MIN_FD.
 */
#include <errno.h>
#include <limits.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "log.h"
#include "server.h"
#include "uring.h"

/* ---- the table: how each engine names a slot ---- */

/*
 * Accepted sockets are O_NONBLOCK from the start, so that sendfile(2)
 * from the worker (uring_chain.c) answers EAGAIN on a full socket
 * instead of blocking, with no fcntl per response. The ring's SEND and
 * RECV do not look at the flag (they hand their own MSG_ flags to the
 * socket layer: MSG_DONTWAIT when issued non-blocking, so that a full or
 * empty socket arms poll); POLL_ADD, SHUTDOWN and CLOSE do not either.
 * SENDMSG does (its ____sys_sendmsg adds MSG_DONTWAIT), which matters
 * only when it runs blocking in io-wq, after poll could not be armed (a
 * retry budget spent, no memory): it then completes with -EAGAIN where
 * it would have waited, and judge_send sends again under the same
 * deadline.
 */

static void direct_prep_accept(struct io_uring_sqe *sqe, int lfd,
			       struct sockaddr *addr, socklen_t *alen, int slot)
{
	/* No SOCK_CLOEXEC: 6.1 rejects it together with a file_index.
	 * SOCK_NONBLOCK: see above. */
	io_uring_prep_accept_direct(sqe, lfd, addr, alen, SOCK_NONBLOCK,
				    (unsigned)slot);
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

static int direct_close_now(struct io_uring *ring, int slot)
{
	int none = -1;
	int r = io_uring_register_files_update(ring, (unsigned)slot, &none, 1);

	return r < 0 ? r : 0;
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
	io_uring_prep_accept(sqe, lfd, addr, alen,
			     SOCK_CLOEXEC | SOCK_NONBLOCK);
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

static int specific_close_now(struct io_uring *ring, int slot)
{
	(void)ring;
	/* An error still gives the fd up; the caller keeps the slot out of
	 * use all the same. */
	return close(slot) ? -errno : 0;
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
	.close_now = direct_close_now,
	.ok_result = direct_ok_result,
};

const struct uring_flavor uring_flavor_specific = {
	.name = "specific",
	.slot_sqe_flag = 0,
	.real_fds = true,
	.how_size = ORCD_OPEN_HOW_SIZE_VER1,
	.prep_accept = specific_prep_accept,
	.prep_open = specific_prep_open,
	.prep_close = specific_prep_close,
	.close_now = specific_close_now,
	.ok_result = specific_ok_result,
};

/* ---- ring set-up ---- */

/* Depth: room for every accept plus a few whole chains per iteration;
 * ORCD_URING_ENTRIES overrides (tests use a tiny ring). Chains never
 * split across submissions (uring_sqe), so 8 is the floor. */
unsigned uring_ring_depth(const struct orcd_config *cfg)
{
	const char *env = getenv("ORCD_URING_ENTRIES");
	unsigned d = 256;

	if (env && *env) {
		d = (unsigned)strtoul(env, NULL, 10);
	} else {
		while (d < cfg->accepts * 4u && d < 4096)
			d <<= 1;
	}
	/* uring_ring_init asks for 4 CQEs per SQE, and the kernel takes
	 * at most 65536 CQEs (IORING_MAX_CQ_ENTRIES; it rounds both up to
	 * a power of two first): above 16384 every setup would fail. */
	if (d < 8)
		d = 8;
	if (d > 16384)
		d = 16384;
	return d;
}

int uring_ring_init(struct io_uring *ring, unsigned entries)
{
	/* Newest flags first; each older kernel refuses with EINVAL. */
	static const unsigned tries[] = {
		IORING_SETUP_SUBMIT_ALL | IORING_SETUP_COOP_TASKRUN |
			IORING_SETUP_SINGLE_ISSUER | IORING_SETUP_DEFER_TASKRUN,
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
	{IORING_OP_ACCEPT, "ACCEPT"},
	{IORING_OP_OPENAT2, "OPENAT2"},
	{IORING_OP_READ, "READ"},
	{IORING_OP_SEND, "SEND"},
	{IORING_OP_RECV, "RECV"},
	{IORING_OP_CLOSE, "CLOSE"},
	{IORING_OP_LINK_TIMEOUT, "LINK_TIMEOUT"},
	{IORING_OP_TIMEOUT, "TIMEOUT"},
	{IORING_OP_ASYNC_CANCEL, "ASYNC_CANCEL"},
	{IORING_OP_POLL_ADD, "POLL_ADD"},
	{IORING_OP_SHUTDOWN, "SHUTDOWN"},
};

/* The ring works and has every opcode the chain uses. */
static int probe_ring(struct io_uring *ring, char *why, size_t cap)
{
	struct io_uring_probe *p;
	int r = uring_ring_init(ring, 8);

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
int uring_register_sparse(struct io_uring *ring, unsigned n)
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

/* IORING_OP_FIXED_FD_INSTALL (6.8) is newer than Debian 12's liburing. */
#define ORCD_IORING_OP_FIXED_FD_INSTALL 54

bool uring_has_fd_install(struct io_uring *ring)
{
	struct io_uring_probe *p = io_uring_get_probe_ring(ring);
	bool ok = p &&
		  io_uring_opcode_supported(p, ORCD_IORING_OP_FIXED_FD_INSTALL);

	if (p)
		io_uring_free_probe(p);
	return ok;
}

/* Install a direct descriptor as a real fd (O_CLOEXEC); the CQE's result
 * is the fd. */
void uring_prep_fd_install(struct io_uring_sqe *sqe, int slot)
{
	io_uring_prep_rw(ORCD_IORING_OP_FIXED_FD_INSTALL, sqe, slot, NULL, 0,
			 0);
	sqe->flags |= IOSQE_FIXED_FILE;
}

/* A NOP that completes with err (negative) where NOP injects results. */
void uring_prep_fail_nop(struct io_uring_sqe *sqe, int err)
{
	io_uring_prep_nop(sqe);
	sqe->rw_flags = ORCD_IORING_NOP_INJECT_RESULT;
	sqe->len = (uint32_t)err;
}

/* A test knob's count N (2 or more; 0 where unset), or 0 with a warning.
 * With `what`, a knob that is on says so. */
static unsigned fault_every(struct uring_worker *uw, const char *name,
			    const char *what)
{
	const char *env = getenv(name);
	unsigned long n;

	if (!env || !*env)
		return 0;
	n = strtoul(env, NULL, 10);
	if (n < 2 || n > UINT_MAX) {
		log_msg(LOG_WARNING,
			"worker %u: %s=%s: want a count of 2 or more; off",
			uw->w->id, name, env);
		return 0;
	}
	if (what)
		log_msg(LOG_WARNING, "worker %u: %s=%lu: %s", uw->w->id, name,
			n, what);
	return (unsigned)n;
}

/* An injected-result knob asked for (n), and whether it is on. */
static void fault_said(struct uring_worker *uw, const char *name, unsigned n,
		       unsigned on, const char *what)
{
	if (n)
		log_msg(LOG_WARNING, "worker %u: %s=%u: %s", uw->w->id, name,
			n, on ? what :
				"no NOP with an injected result (Linux 6.10+); off");
}

/*
 * Tests only; each worker says which knob is on.
 *
 * ORCD_URING_SEND_EAGAIN=N makes every Nth SENDMSG a NOP that completes
 * with -EAGAIN, as a SENDMSG run blocking in io-wq on the non-blocking
 * socket does (see the accept flags above), so that a test can see the
 * send go again. It needs NOP's injected result (6.10+); a kernel
 * without it completes the probe NOP with 0, and the knob stays off.
 *
 * ORCD_URING_SUBMIT_REFUSE=N refuses every Nth submit as the kernel does
 * while it holds overflowed CQEs (-EBUSY): nothing queued goes in, and
 * the work that wanted SQ room waits for the next turn (uring_defer and
 * the stop's retries). With a tiny ring (ORCD_URING_ENTRIES) and a busy
 * test, work then finds the SQ full (tens of times a run; counted by
 * orcd_sq_full_total), on any kernel.
 *
 * ORCD_URING_CONN_NOMEM=N gives every Nth accepted socket no memory for
 * its connection, as a failed allocation would: it is closed unanswered.
 *
 * ORCD_URING_ACCEPT_ENFILE=N makes an accept armed while N or more
 * connections are open fail at once with ENFILE, as every accept does
 * while the system's file table is full (the kernel fails it before it
 * looks at the backlog): a NOP stands in for it, on any kernel.
 *
 * ORCD_URING_LINGER_NOBUFS=N makes every Nth recv of a lingering close a
 * NOP that completes with -ENOBUFS, as a recv finds the buffer ring run
 * dry, so that a test can see the drain go on. Injected, as SEND_EAGAIN.
 */
void uring_fault_setup(struct uring_worker *uw)
{
	unsigned eagain = fault_every(uw, "ORCD_URING_SEND_EAGAIN", NULL);
	unsigned nobufs = fault_every(uw, "ORCD_URING_LINGER_NOBUFS", NULL);
	struct io_uring_sqe *sqe;
	struct io_uring_cqe *cqe;
	int res = 0;

	uw->fault_refuse_every = fault_every(uw, "ORCD_URING_SUBMIT_REFUSE",
					     "every Nth submit is refused");
	uw->fault_nomem_every = fault_every(uw, "ORCD_URING_CONN_NOMEM",
					    "every Nth connection finds no memory");
	uw->fault_enfile_at = fault_every(uw, "ORCD_URING_ACCEPT_ENFILE",
					  "accepts fail with ENFILE from N "
					  "connections open");
	if (!eagain && !nobufs)
		return;
	/* The ring is empty yet: this NOP and its CQE are all there is. */
	sqe = io_uring_get_sqe(&uw->ring);
	if (sqe) {
		uring_prep_fail_nop(sqe, -EAGAIN);
		io_uring_sqe_set_data64(sqe, 0);
		res = io_uring_submit_and_wait(&uw->ring, 1);
		if (res >= 1 && io_uring_peek_cqe(&uw->ring, &cqe) == 0) {
			res = cqe->res;
			io_uring_cqe_seen(&uw->ring, cqe);
		}
	}
	if (res == -EAGAIN) {
		uw->fault_eagain_every = eagain;
		uw->fault_nobufs_every = nobufs;
	}
	fault_said(uw, "ORCD_URING_SEND_EAGAIN", eagain, uw->fault_eagain_every,
		   "every Nth SENDMSG fails with EAGAIN");
	fault_said(uw, "ORCD_URING_LINGER_NOBUFS", nobufs,
		   uw->fault_nobufs_every,
		   "every Nth lingering recv fails with ENOBUFS");
}

/* Whether this is the Nth time (N = every, 0: never) since the last. */
static bool every_nth(unsigned every, unsigned *count)
{
	return every && ++*count % every == 0;
}

bool uring_fault_send_eagain(struct uring_worker *uw)
{
	return every_nth(uw->fault_eagain_every, &uw->fault_eagain_n);
}

bool uring_fault_linger_nobufs(struct uring_worker *uw)
{
	return every_nth(uw->fault_nobufs_every, &uw->fault_nobufs_n);
}

bool uring_fault_submit_refused(struct uring_worker *uw)
{
	return every_nth(uw->fault_refuse_every, &uw->fault_refuse_n);
}

bool uring_fault_conn_nomem(struct uring_worker *uw)
{
	return every_nth(uw->fault_nomem_every, &uw->fault_nomem_n);
}

bool uring_fault_accept_enfile(const struct uring_worker *uw)
{
	return uw->fault_enfile_at && uw->n_conns >= uw->fault_enfile_at;
}

int uring_direct_probe(const struct orcd_config *cfg, char *why, size_t cap)
{
	struct io_uring ring;
	int r;

	(void)cfg;
	r = probe_ring(&ring, why, cap);
	if (r)
		return r;
	r = uring_register_sparse(&ring, 4);
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
	int want = open("/dev/null", O_RDONLY | O_CLOEXEC), fd, e;

	if (want < 0) {
		e = errno;
		snprintf(why, cap, "open /dev/null: %s", strerror(e));
		return -e;
	}
	/* Move it up so the number we aim at is not also the lowest free
	 * one (which a kernel ignoring the flag would hand out anyway). */
	fd = fcntl(want, F_DUPFD_CLOEXEC, want + 7);
	e = errno;
	close(want);
	if (fd < 0) {
		snprintf(why, cap, "no free fd above %d to open at: %s", want,
			 strerror(e));
		return -e;
	}
	want = fd;
	close(want);
	how.fd = (uint32_t)want;
	fd = (int)syscall(SYS_openat2, AT_FDCWD, "/dev/null", &how,
			  (size_t)ORCD_OPEN_HOW_SIZE_VER1);
	if (fd < 0) {
		e = errno;
		snprintf(why, cap, "openat2 O_SPECIFIC_FD: %s", strerror(e));
		return -e;
	}
	close(fd);
	if (fd != want) {
		snprintf(why, cap,
			 "openat2 O_SPECIFIC_FD ignored (got %d, asked %d)", fd,
			 want);
		return -ENOTSUP;
	}
	return 0;
}

int uring_specific_probe(const struct orcd_config *cfg, char *why, size_t cap)
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
int uring_specific_setup(struct orcd_server *srv, char *err, size_t cap)
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
			snprintf(
				err, cap,
				"RLIMIT_NOFILE %llu too small for %lu slots from fd %d",
				(unsigned long long)rl.rlim_cur, n, base);
			return -EMFILE;
		}
	}
	srv->slot_base = base;
	return 0;
}

/*
 * 6.1 refuses a registered-file table larger than RLIMIT_NOFILE (rsrc.c,
 * io_sqe_files_register: EMFILE), and the usual soft limit is 1024 while
 * slots defaults to 4096. The real fds a worker keeps (files the stat
 * cache keeps open, sockets installed for sendfile) should take at most
 * half of the limit, so that logs, listeners and a reload's opens always
 * find one. Raise the soft limit toward the hard one once, before the
 * workers start; a worker clamps its table and its kept sockets to what
 * is left.
 */
int uring_direct_setup(struct orcd_server *srv, char *err, size_t cap)
{
	struct rlimit rl;
	rlim_t table = srv->cfg->slots;
	rlim_t kept = (rlim_t)srv->n_workers * 2 *
		      (STAT_CACHE_MAP_FDS + SOCK_FDS_KEPT);
	rlim_t want = table > kept ? table : kept;

	(void)err;
	(void)cap;
	if (getrlimit(RLIMIT_NOFILE, &rl) || rl.rlim_cur >= want)
		return 0;
	rl.rlim_cur = want;
	if (rl.rlim_max != RLIM_INFINITY && rl.rlim_cur > rl.rlim_max)
		rl.rlim_cur = rl.rlim_max;
	if (setrlimit(RLIMIT_NOFILE, &rl))
		return 0;
	if (rl.rlim_cur < table)
		log_msg(LOG_WARNING,
			"engine direct: RLIMIT_NOFILE hard limit %llu < slots %u: "
			"each worker gets %llu slots",
			(unsigned long long)rl.rlim_max, srv->cfg->slots,
			(unsigned long long)rl.rlim_cur);
	return 0;
}

/*
 * The real fds a worker may keep: files its stat cache keeps open (at most
 * STAT_CACHE_MAP_FDS) and, on direct with IORING_OP_FIXED_FD_INSTALL,
 * sockets installed for sendfile (SOCK_FDS_KEPT). Across the workers they
 * take at most half of the ordinary fds RLIMIT_NOFILE leaves (on specific,
 * those above the reserved range), so that a lookup's O_PATH open, a log,
 * a listener or a reload's opens always find one: half of a worker's share
 * for the cache, the rest for sockets. (Before, only the sockets were
 * held to it, and the caches of a few workers could fill the limit: every
 * lookup was then EMFILE, a 503.)
 */
void uring_kept_fds(const struct uring_worker *uw, unsigned *cache_fds,
		    unsigned *sock_fds)
{
	const struct orcd_server *srv = uw->w->srv;
	struct rlimit rl;
	rlim_t room, per;

	*cache_fds = STAT_CACHE_MAP_FDS;
	*sock_fds = uw->fd_install ? SOCK_FDS_KEPT : 0;
	if (getrlimit(RLIMIT_NOFILE, &rl) || rl.rlim_cur == RLIM_INFINITY)
		return;
	room = rl.rlim_cur;
	if (uw->fl == &uring_flavor_specific) {
		int min = prctl(ORCD_PR_INCREASE_MIN_FD, 0, 0, 0, 0);

		room = min >= 0 && (rlim_t)min < room ? room - (rlim_t)min : 0;
	}
	per = room / 2 / (srv->n_workers ? srv->n_workers : 1);
	if (per / 2 < *cache_fds)
		*cache_fds = (unsigned)(per / 2);
	if (per - *cache_fds < *sock_fds)
		*sock_fds = (unsigned)(per - *cache_fds);
}

/* ---- provided buffers for first recvs ---- */

#define BR_ENTRIES 256
#define BR_SIZE	   4096

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
void uring_br_setup(struct uring_worker *uw)
{
	const char *env = getenv("ORCD_URING_PBUFS");
	unsigned n = BR_ENTRIES, size = BR_SIZE;
	size_t ring_bytes;
	struct io_uring_buf_reg reg = {0};
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

/* A registered table may not outgrow RLIMIT_NOFILE (see
 * uring_direct_setup, which raised the soft limit as far as it could). */
int uring_direct_slots(const struct orcd_server *srv,
		       const struct orcd_config *cfg)
{
	unsigned n = cfg->slots;
	struct rlimit rl;

	(void)srv;
	if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < n)
		n = (unsigned)rl.rlim_cur;
	return n >= 16 ? (int)n : -EMFILE;
}

/* The reservation was made by setup for every worker; its size is the
 * current minimum minus the base (nothing else raises it). */
int uring_specific_slots(const struct orcd_server *srv,
			 const struct orcd_config *cfg)
{
	int min = prctl(ORCD_PR_INCREASE_MIN_FD, 0, 0, 0, 0);
	unsigned n;

	(void)cfg;
	if (min < 0)
		return -errno;
	n = (unsigned)(min - srv->slot_base) / srv->n_workers;
	return n ? (int)n : -ERANGE;
}

int uring_slot_range(struct uring_worker *uw, int *base, unsigned *n)
{
	struct orcd_worker *w = uw->w;
	bool specific = uw->fl == &uring_flavor_specific;
	int r = specific ? uring_specific_slots(w->srv, w->cfg) :
			   uring_direct_slots(w->srv, w->cfg);

	if (r < 0)
		return r;
	*n = (unsigned)r;
	*base = specific ? w->srv->slot_base + (int)(w->id * *n) : 0;
	return 0;
}
