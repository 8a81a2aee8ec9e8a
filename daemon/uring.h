/* SPDX-License-Identifier: MIT */
/*
 * Internals shared by the two io_uring engines. Three layers, each
 * calling only the one below and hearing back through pointers:
 *
 *   uring_conn.c    the transport under the HTTP/1 core (http1.h): recv,
 *                   linger, close of a connection's socket; the engines
 *   uring_chain.c   the transport's respond: sends and the open-read-
 *                   send-close chain with its failure rules
 *   engine_uring.c  the loop: ring, submission, batches, slots, accepts,
 *                   wake-up, stop (uring_setup.c: what the kernel has)
 *
 * `direct` and `specific` differ only in how a slot number is named in an
 * SQE; that difference is the table `struct uring_flavor`, everything else
 * is one code path.
 */
#ifndef ORCD_URING_H
#define ORCD_URING_H

#include <liburing.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/socket.h>

#include "http1.h"
#include "slots.h"
#include "stat_cache.h"
#include "timerwheel.h"
#include "wait_batch.h"

struct orcd_worker;
struct orcd_config;
struct orcd_server;

/* open_how as the kernel series extends it (OPEN_HOW_SIZE_VER1, 32
 * bytes); our own so that host headers cannot change its size. */
struct orcd_open_how {
	uint64_t flags;
	uint64_t mode;
	uint64_t resolve;
	uint32_t fd;
	uint32_t padding;
};

#define ORCD_OPEN_HOW_SIZE_VER0	       24u
#define ORCD_OPEN_HOW_SIZE_VER1	       32u
#define ORCD_O_SPECIFIC_FD	       01000000000
#define ORCD_IORING_ACCEPT_SPECIFIC_FD (1U << 15)
#define ORCD_PR_INCREASE_MIN_FD	       0x4f524344
/* On direct, a connection keeps its socket installed as an fd after a
 * sendfile body, for the next one: a download client asks again. At most
 * this many per worker, like the files kept open (STAT_CACHE_MAP_FDS),
 * and fewer where RLIMIT_NOFILE is tight (uring_kept_fds). */
#define SOCK_FDS_KEPT		       256u
/* IORING_OP_NOP's flag (6.10+) to complete with sqe->len as the result. */
#define ORCD_IORING_NOP_INJECT_RESULT  (1U << 0)

/*
 * user_data is the address of the object a CQE belongs to with the step
 * in the low bits: every such object is aligned to URING_ALIGN.
 */
#define URING_ALIGN	 64
#define URING_STEP_MASK	 ((uint64_t)URING_ALIGN - 1)
/* Set above every user-space address: the close of an orphan slot
 * (uring_close_orphan()), whose number is the rest. */
#define URING_ORPHAN_TAG ((uint64_t)1 << 63)

enum uop_kind {
	UOP_ACCEPT = 1,
	UOP_WAKE,
	UOP_CONN,
	UOP_TIMER,
	UOP_LISTEN,
	UOP_NOTIFY,
};

/* What a connection's CQE was for. */
enum ustep {
	ST_RECV,
	ST_OPEN,
	ST_READ,
	ST_SEND,
	ST_CLOSE_FILE,
	ST_SHUTDOWN,
	ST_CLOSE_SOCK,
	ST_CANCEL,
	ST_INSTALL, /* a direct socket installed as a real fd */
	ST_REGISTER,   /* specific: the socket put in the ring's file table */
	ST_UNREGISTER, /* specific: and taken out of it at the close */
	ST_MSHOT,      /* a keep-alive connection's multishot recv */
	ST_MAX,
};

struct uring_worker;
struct uconn;

/* How the engine names a slot in an SQE: the one thing that differs. */
struct uring_flavor {
	const char *name;
	/* SQE flag for ops that use a slot as their fd (IOSQE_FIXED_FILE). */
	uint8_t slot_sqe_flag;
	/* A slot is a real fd that system calls take (sendfile). */
	bool real_fds;
	/* Size of open_how passed to the kernel. */
	uint32_t how_size;
	void (*prep_accept)(struct io_uring_sqe *sqe, int lfd,
			    struct sockaddr *addr, socklen_t *alen, int slot);
	void (*prep_open)(struct io_uring_sqe *sqe, int dfd, const char *path,
			  struct orcd_open_how *how, int slot);
	void (*prep_close)(struct io_uring_sqe *sqe, int slot);
	/* Close `slot` now, outside the ring: 0 or -errno. */
	int (*close_now)(struct io_uring *ring, int slot);
	/* The CQE result an accept/open into `slot` has on success. */
	int (*ok_result)(int slot);
};

extern const struct uring_flavor uring_flavor_direct;
extern const struct uring_flavor uring_flavor_specific;

/* uconn.ms */
enum uconn_mshot {
	MS_OFF,
	MS_ARMED,   /* in flight; its CQEs go to the stash */
	MS_COUNTED, /* in flight and counted in pending */
};

enum uconn_state {
	CS_IDLE,      /* nothing in flight (between ops) */
	CS_RECV,      /* a recv (with its timeout) is in flight */
	CS_WAIT_SLOT, /* a respond waits for a file slot */
	CS_RESP,      /* response ops in flight */
	CS_LINGER,    /* shut down for writing, draining the client */
	CS_CLOSING,   /* the socket's close is in flight */
};

/* After the current batch of a response completes: what next. */
enum uafter {
	AFTER_NONE,
	AFTER_CHUNK,	/* send the next bounded read/send pair */
	AFTER_DONE,	/* response complete */
	AFTER_REPLAN,	/* nothing sent yet: answer from fresh facts */
	AFTER_ABORT,	/* close the connection without more bytes */
	AFTER_DENIED,	/* the open was refused (403): nothing sent yet */
	AFTER_SENDFILE, /* the head is out: the kept body by sendfile */
	AFTER_BUSY,	/* no file slot within send_timeout: nothing sent */
};

struct uconn {
	uint8_t kind; /* UOP_CONN */
	uint8_t state;
	uint8_t after;	/* enum uafter, pending a repair close */
	bool timed_out; /* its timer fired during this batch */
	bool file_open; /* open succeeded, close not completed */
	bool cancel_sent;
	bool shut;	    /* a shutdown of the socket was submitted */
	bool reg_failed;    /* specific: registering the socket failed */
	/* A recv deferred for SQ room ends with this when it goes
	 * (-ECANCELED: cancelled; -ETIMEDOUT: its deadline passed); 0. */
	int deferred_end;
	/* A keep-alive connection's multishot recv (uring_conn.c): off,
	 * armed, or armed and counted in `pending` (the core waits on it,
	 * or a close or linger waits for its end); paused: a cancel of it
	 * is in flight whose end only means "arm it again" (bytes piled up
	 * in the stash, or bytes beat the timer's or a shed's cancel). */
	uint8_t ms;
	bool ms_paused;
	/* Bytes it brought while the core was not reading (a pipelining
	 * client during a response), and how it ended then (ms_end_set:
	 * 0 the peer closed, or -errno), for the core's next recv. */
	bool ms_end_set;
	int ms_end;
	char *stash;
	size_t stash_off, stash_len, stash_cap;
	/* specific: the socket's index in the ring's file table once a
	 * keep-alive connection registered it there (then its ops go by
	 * that, as direct's do), else -1; reg_fd is the update's array. */
	int sock_fixed;
	int reg_fd;
	struct uring_worker *uw;
	struct uconn *prev, *next; /* live list */
	int sock;		   /* slot of the socket */
	int file;		   /* slot of the file, -1 */
	unsigned pending;	   /* CQEs outstanding */
	uint32_t step_mask;	   /* steps submitted in this batch */
	int res[ST_MAX];
	uint32_t want[ST_MAX];
	struct slot_waiter waiter;
	uint64_t file_off;    /* next file byte to read */
	uint64_t file_left;   /* file bytes not read yet */
	const char *send_ptr; /* the current send: response buffer, */
	size_t send_len;      /* or a kept body */
	struct sc_body *body; /* a kept body being sent, referenced */
	const char *body_ptr; /* its bytes not handed to a send yet */
	uint64_t body_left;
	/* A kept body goes by sendfile() from its open file to this fd:
	 * the socket's own (specific), or one installed for the transfer
	 * (direct); -1 when it goes by sends. */
	int sf_sock;
	bool sf_installed;   /* sf_sock is ours to close after the body */
	bool sf_started;     /* the first sendfile of this body ran */
	bool send_again;     /* the next send keeps the timer's deadline */
	/* direct: the socket installed as an fd and kept for the
	 * connection's next large bodies (at most SOCK_FDS_KEPT per
	 * worker), closed with the connection; -1 when none. */
	int sock_fd;
	bool sf_polling;     /* the op in flight is a poll for POLLOUT */
	int64_t sf_deadline; /* send_timeout after the last progress */
	bool iov_sent;	     /* the send in flight is msg: head + body piece */
	struct msghdr msg;   /* a head and a kept body's piece, no copy */
	struct iovec iov[2];
	bool chained; /* this response's body came by a chain */
	/* This request's open found its path outside the dentry cache
	 * (RESOLVE_CACHED: -EAGAIN): the open after the replan may wait in
	 * io-wq (under the timer), after a fresh lookup of the type. */
	bool open_cold;
	unsigned send_timeout_ms; /* a send without progress fails */
	struct orcd_open_how how; /* the chain's open reads it at issue */
	/* The deadline of the op in flight (recv: the core's; sends: no
	 * progress for send_timeout), kept in the worker's wheel. */
	struct tw_timer timer;
	/* SQ had no room: run retry() at the top of the next iteration. */
	void (*retry)(struct uconn *c);
	struct uconn *next_deferred;
	bool is_deferred;
	struct h1_conn h1; /* the HTTP/1 core's part */
} __attribute__((aligned(URING_ALIGN)));

static inline struct uconn *uconn_of(struct h1_conn *h)
{
	return (struct uconn *)((char *)h - offsetof(struct uconn, h1));
}

struct uacceptor {
	uint8_t kind; /* UOP_ACCEPT */
	bool armed;
	bool cancel_sent;
	struct uring_worker *uw;
	struct ulisten *lis; /* its listener's poll, which counts its accepts */
	int lfd;
	int slot;
	int fault; /* tests: a NOP stands in, and its CQE means this */
	socklen_t alen;
	struct sockaddr_storage addr;
} __attribute__((aligned(URING_ALIGN)));

/* With no accept armed on a listener (no room for another connection,
 * or room only for those armed on the others): a poll on it, so that a
 * client waiting in its backlog makes room for itself. */
struct ulisten {
	uint8_t kind; /* UOP_LISTEN */
	bool armed;
	bool cancel_sent;
	int lfd;
	unsigned acc_armed; /* accepts armed on this listener */
	bool waiting; /* its poll fired: a client waits, no accept for it */
	bool recheck; /* an accept taken back from it: look at its backlog */
} __attribute__((aligned(URING_ALIGN)));

struct uticker {
	uint8_t kind; /* UOP_WAKE or UOP_TIMER */
	bool armed;
	struct __kernel_timespec ts;
} __attribute__((aligned(URING_ALIGN)));

/*
 * The stat cache's inotify fd, polled by the ring (multishot) so that a
 * batch with no change pending costs no read(2): see engine_uring.c.
 * The step bits of its user_data carry the cache's fd generation the
 * poll was armed for.
 */
enum unotify_state {
	UN_OFF,	      /* not polled: every batch marks the cache */
	UN_SUBMITTED, /* the poll is in the SQ or went with the last enter */
	UN_ARMED,     /* armed before the last enter: its CQEs are news */
};

struct unotify {
	uint8_t kind; /* UOP_NOTIFY */
	uint8_t state;
	bool usable;  /* DEFER_TASKRUN: task work runs in order, here only */
	unsigned gen; /* the cache's fd generation the poll watches */
} __attribute__((aligned(URING_ALIGN)));

#define URING_NOTIFY_GEN_MASK 31u /* within URING_STEP_MASK */

/* What the loop reports up to the transport (uring_conn.c). */
struct uring_hooks {
	const struct h1_transport *tp;
	/* An accept completed into `slot`: a connection starts. */
	void (*accepted)(struct uring_worker *uw, int slot,
			 const struct sockaddr_storage *peer, socklen_t plen);
	void (*conn_cqe)(struct uconn *c, enum ustep st, int res,
			 unsigned cflags);
	/* The connection's timer fired. */
	void (*conn_timeout)(struct uconn *c);
	/* A slot a waiter queued for was handed to it. */
	void (*slot_ready)(struct slot_waiter *wt);
	void (*stop_all)(struct uring_worker *uw);
	void (*kill_all)(struct uring_worker *uw);
	/* The loop ended: free every connection left. */
	void (*teardown)(struct uring_worker *uw);
};

struct uring_worker {
	struct h1_worker hw; /* the HTTP/1 core's part */
	const struct h1_core *core;
	const struct uring_hooks *hooks;
	struct orcd_worker *w;
	const struct uring_flavor *fl;
	struct io_uring ring;
	unsigned ring_entries;
	struct slots slots;
	unsigned file_reserve; /* slots accepts leave for files */
	struct uacceptor *acc;
	unsigned n_acc; /* acceptors (cfg->accepts x listeners) */
	unsigned acc_armed;
	struct ulisten lpoll[ORCD_MAX_LISTEN]; /* one per listener */
	unsigned lpoll_armed;
	unsigned n_waiting; /* listeners whose client waits (ulisten) */
	/* Accepts failed for want of files or memory: none is armed before
	 * this (CLOCK_MONOTONIC ms), and the failure is said once until an
	 * accept works again (engine_uring.c, accept_done()). */
	int64_t accept_paused_until;
	bool accept_failing;
	bool shed_in_pause; /* a batch closed meanwhile: go when it is back */
	struct uticker wake, drain;
	struct unotify notify, mounts; /* the cache's inotify and mount fds */
	struct uconn *conns; /* live connections */
	unsigned n_conns;
	unsigned n_closing; /* socket closes in flight (orphans' too) */
	struct uconn *free_conns;
	/* Provided-buffer ring for recvs with nothing buffered yet, so an
	 * idle keep-alive connection holds no buffer (5.19+; else each
	 * connection keeps its own). */
	struct io_uring_buf_ring *br;
	char *br_bufs;
	unsigned br_n, br_size;
	/* Keep-alive recvs are multishot on the buffer ring (6.14+, see
	 * uring_run(); cleared when the kernel refuses one), and whether
	 * that was said. */
	bool mshot;
	bool mshot_warned;
	struct uconn *deferred; /* waiting for SQ room (via next) */
	struct stat_cache *sc;	/* metadata lookups of this worker */
	bool fd_install;	/* IORING_OP_FIXED_FD_INSTALL works (6.8+) */
	bool sock_table;	/* specific: a file table for its sockets */
	bool register_warned;	/* a socket's registration failed once */
	int64_t nomem_said_ms;	/* last "no memory for a connection" */
	unsigned nomem_unsaid;	/* refused since then, not yet said */
	bool install_warned;	/* an install failed once: said so */
	unsigned sock_fds;	/* sockets installed as fds (sock_fd, sf_sock) */
	unsigned sock_fds_max;	/* at most this many (uring_kept_fds) */
	/* Tests: every Nth SENDMSG completes -EAGAIN instead, every Nth
	 * lingering recv -ENOBUFS, every Nth submit is refused as a full CQ
	 * refuses it, every Nth accepted socket finds no memory for its
	 * connection, and accepts fail with ENFILE from this many
	 * connections open (0: none). */
	unsigned fault_eagain_every, fault_eagain_n;
	unsigned fault_nobufs_every, fault_nobufs_n;
	unsigned fault_refuse_every, fault_refuse_n;
	unsigned fault_nomem_every, fault_nomem_n;
	unsigned fault_enfile_at;
	unsigned chains_inflight;
	/* Waits: how many CQEs the next asks for (wait_batch.h), sends
	 * submitted since the last, and whether the ring is entered by its
	 * registered index. */
	struct wait_batch wb;
	unsigned turn_sends;
	bool ring_registered;
	struct timerwheel tw;
	int64_t now_ms; /* CLOCK_MONOTONIC, taken once per loop turn */
	int fatal;	/* -errno that ends the loop */
	/* SQEs handed out and CQEs taken that end one (each SQE here ends
	 * in exactly one CQE without IORING_CQE_F_MORE: the stat cache's
	 * multishot poll and connections' multishot recvs post more before
	 * it, no CQE_SKIP): unequal
	 * while the kernel may still write memory an SQE named. */
	uint32_t sqes, cqes;
};

/* An SQE on the connection's socket, prepared with c->sock as its fd:
 * by the slot (direct: a fixed file; specific: the fd), or by its index
 * in the file table once specific registered it. */
static inline void uring_on_sock(const struct uconn *c,
				 struct io_uring_sqe *sqe)
{
	if (c->sock_fixed >= 0) {
		sqe->fd = c->sock_fixed;
		sqe->flags |= IOSQE_FIXED_FILE;
	} else {
		sqe->flags |= c->uw->fl->slot_sqe_flag;
	}
}

/* uring_setup.c */
unsigned uring_ring_depth(const struct orcd_config *cfg);
int uring_ring_init(struct io_uring *ring, unsigned entries);
int uring_register_sparse(struct io_uring *ring, unsigned n);
bool uring_has_fd_install(struct io_uring *ring);
void uring_kept_fds(const struct uring_worker *uw, unsigned *cache_fds,
		    unsigned *sock_fds);
void uring_prep_fail_nop(struct io_uring_sqe *sqe, int err);
void uring_fault_setup(struct uring_worker *uw);
bool uring_fault_send_eagain(struct uring_worker *uw);
bool uring_fault_linger_nobufs(struct uring_worker *uw);
bool uring_fault_submit_refused(struct uring_worker *uw);
bool uring_fault_conn_nomem(struct uring_worker *uw);
bool uring_fault_accept_enfile(const struct uring_worker *uw);
void uring_prep_fd_install(struct io_uring_sqe *sqe, int slot);
void uring_br_setup(struct uring_worker *uw);
void uring_br_recycle(struct uring_worker *uw, unsigned bid);
int uring_slot_range(struct uring_worker *uw, int *base, unsigned *n);
int uring_direct_slots(const struct orcd_server *srv,
		       const struct orcd_config *cfg);
int uring_specific_slots(const struct orcd_server *srv,
			 const struct orcd_config *cfg);
int uring_direct_probe(const struct orcd_config *cfg, char *why, size_t cap);
int uring_specific_probe(const struct orcd_config *cfg, char *why, size_t cap);
int uring_specific_setup(struct orcd_server *srv, char *err, size_t cap);
int uring_direct_setup(struct orcd_server *srv, char *err, size_t cap);

/* engine_uring.c: the loop */
struct io_uring_sqe *uring_sqe(struct uring_worker *uw, unsigned need);
struct io_uring_sqe *uring_sqe_more(struct uring_worker *uw);
void uring_track(struct uconn *c, struct io_uring_sqe *sqe, enum ustep st,
		 uint32_t want);
void uring_batch_begin(struct uconn *c);
void uring_defer(struct uconn *c, void (*retry)(struct uconn *c));
void uring_sync_slot_stats(struct uring_worker *uw);
void uring_slot_freed(struct uring_worker *uw, int slot);
void uring_close_sock_fds(struct uconn *c, bool kept);
void uring_close_orphan(struct uring_worker *uw, int slot);
int uring_run(struct orcd_worker *w, const struct uring_flavor *fl,
	      const struct uring_hooks *hooks);
#define URING_BGID 1

/* uring_chain.c: the transport's respond */
void uchain_respond(struct h1_conn *h, unsigned timeout_ms);
void uchain_batch_done(struct uconn *c);
void uchain_slot_ready(struct slot_waiter *wt);
/* A respond's wait for a file slot outlived send_timeout. */
void uchain_wait_expired(struct uconn *c);
/* The drain bound passed: a respond waiting for a slot gives up. */
void uchain_kill(struct uconn *c);
/* Teardown: let go of a kept body a send still held. */
void uchain_drop(struct uconn *c);

#endif
