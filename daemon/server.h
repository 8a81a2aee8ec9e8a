/* SPDX-License-Identifier: MIT */
/* The process: shared server state, per-thread workers and their counters. */
#ifndef ORCD_SERVER_H
#define ORCD_SERVER_H

#include <pthread.h>
#include <sched.h>
#include <stdalign.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "config.h"
#include "log.h"

struct orcd_engine;
struct access_log;
struct h1_core;

/*
 * Counters of one worker. Written only by the worker's own thread
 * (relaxed atomics so the metrics reader sees whole values).
 */
struct orcd_stats {
	_Atomic uint64_t conns_accepted;
	_Atomic uint64_t conns_open;
	_Atomic uint64_t idle_closed; /* closed by h1 shed() to make room */
	_Atomic uint64_t requests;
	_Atomic uint64_t status_class[6]; /* [2] = 2xx ... [5] = 5xx */
	_Atomic uint64_t bytes_sent;
	/* io_uring engines */
	_Atomic uint64_t chains_submitted;
	_Atomic uint64_t chains_completed;
	_Atomic uint64_t chains_inflight;
	_Atomic uint64_t chains_inflight_peak;
	_Atomic uint64_t slots_inuse;
	_Atomic uint64_t slots_peak;
	_Atomic uint64_t slot_waits;
	_Atomic uint64_t slot_wait_timeouts; /* answered 503 for want of one */
	_Atomic uint64_t chain_open_failed;
	_Atomic uint64_t chain_short_read;
	_Atomic uint64_t chain_send_error;
	_Atomic uint64_t chain_client_gone;
	_Atomic uint64_t chain_close_repaired;
	_Atomic uint64_t sendfile_bodies; /* kept bodies sent by sendfile */
	_Atomic uint64_t send_again; /* sends that moved nothing (-EAGAIN) */
	_Atomic uint64_t ebusy;
	_Atomic uint64_t submits; /* io_uring_enter / event-loop wakeups */
	_Atomic uint64_t sq_full; /* work that found no SQ room: next turn */
	_Atomic uint64_t batched_waits; /* of those, waits for more than one */
	/* stat cache (every engine), in stat_cache.h's SC_* order */
	_Atomic uint64_t stat_cache[9];
};

/* A worker's counters have one writer, the worker: metrics and the main
 * thread only read them (and add them up once it has ended). A relaxed
 * load and store keeps each read whole without the locked add a
 * fetch_add costs per request, as stat_cache.c's count() does. */
static inline void stat_bump(_Atomic uint64_t *c, uint64_t n)
{
	atomic_store_explicit(c,
			      atomic_load_explicit(c, memory_order_relaxed) + n,
			      memory_order_relaxed);
}

#define STAT_INC(w, f) stat_bump(&(w)->stats.f, 1)
#define STAT_ADD(w, f, n) stat_bump(&(w)->stats.f, (uint64_t)(n))
#define STAT_DEC(w, f) stat_bump(&(w)->stats.f, (uint64_t)-1)

struct orcd_server;

/*
 * Workers of a generation sit in one array. Each starts on a cacheline
 * of its own (and so ends before the next one's), so that the counters
 * and the heartbeat a worker writes per request and per turn never share
 * a line with what its neighbour reads per request (its cfg, srv).
 */
struct orcd_worker {
	alignas(64) unsigned id;
	struct orcd_server *srv;
	pthread_t thread;
	int listen_fds[ORCD_MAX_LISTEN];
	unsigned n_listen;
	int wake_fd;		/* eventfd: the main thread signals reload/stop */
	/* This worker's view of the current configuration (config_view():
	 * its own root_fd), one reference held for as long as it serves
	 * with it; replaced on wake after a reload. */
	struct orcd_config *cfg;
	/* The HTTP/1 connection core the engine serves under (http1.h):
	 * engines reach it only through this pointer. */
	const struct h1_core *core;
	struct orcd_stats stats;
	/* Bumped by the engine at least once a second (io_uring: on
	 * every turn of its loop): the main thread pings the systemd
	 * watchdog only while every worker's count moves. */
	_Atomic uint64_t heartbeat;
	/* Its access log lines, written in batches (log.h); handed out
	 * when the main thread asks (log_flush_req) before a reopen. */
	struct access_log_buf log;
	unsigned log_seen;		/* the last request it saw */
	_Atomic unsigned log_flushed;	/* the last request it answered */
	_Atomic bool done;	/* run() returned (its log lines written) */
	/* Its generation was replaced by a reload that changed the listen
	 * addresses: stop accepting and drain, like a stop of its own. */
	_Atomic bool retiring;
	/* Stopping or retiring, it takes no connection any more (its
	 * engine says so: server_accepts_gone()). */
	_Atomic bool accepts_gone;
	/* A new generation's worker takes no connection until the reload
	 * knows every new worker runs and the old ones accept no more:
	 * server_may_accept(). */
	_Atomic bool hold_accepts;
	/* Its refresh could not take a view of the current configuration
	 * (config_view() failed): the main thread wakes it again each
	 * second until it does. */
	_Atomic bool cfg_stale;
	/* The srv->cfg_gen its last refresh looked at, serving it or
	 * stale: a reload is done once each worker has. */
	_Atomic unsigned cfg_gen;
	int result;		/* engine run() return value */
};

/* Whether the worker may take connections: not while a reload holds
 * its new generation back. Engines ask before arming accepts; the reload
 * wakes them when it lets go. */
static inline bool server_may_accept(const struct orcd_worker *w)
{
	return !atomic_load_explicit(&w->hold_accepts, memory_order_acquire);
}

void server_log_tick(struct orcd_worker *w);

/* At least once a second (io_uring: every turn of its loop): also where
 * a worker's buffered access log lines go out on time. */
static inline void server_heartbeat(struct orcd_worker *w)
{
	stat_bump(&w->heartbeat, 1); /* one writer, as the counters */
	if (w->log.l)
		server_log_tick(w);
}

struct orcd_generation;

struct orcd_server {
	const struct orcd_engine *engine;
	pthread_mutex_t cfg_lock; /* guards cfg; taken only to swap or refresh */
	struct orcd_config *cfg; /* current; swapped whole on reload */
	unsigned cfg_gen;	/* bumped with each swap, under cfg_lock */
	_Atomic bool stopping;	/* SIGTERM: stop accepting, drain, exit */
	struct access_log *access_log;
	/* Bumped before a reopen: every worker hands out its buffered
	 * lines, to the file they were meant for, and says so. */
	_Atomic unsigned log_flush_req;
	unsigned n_workers;
	struct orcd_worker *workers; /* the current generation */
	/* Earlier generations still draining, and the counters of those
	 * that finished (main thread only). */
	struct orcd_generation *retiring;
	struct orcd_stats retired;
	bool socket_activated;	/* listeners came from the service manager */
	bool failed;		/* stopping because of an error: exit 1 */
	int done_fd;		/* eventfd: a worker's run() returned */
	/* Tests: this many refreshes fail (ORCD_TEST_VIEW_FAILS). */
	_Atomic unsigned test_view_fails;
	int slot_base;		/* first fd of the reserved range (specific) */
	/* epoll: the connections a worker may hold, and the files its
	 * stat cache may keep open, within its share of RLIMIT_NOFILE
	 * (engine_epoll.c); 0: no cap beyond max_connections. */
	unsigned conn_fds, cache_fds;
	/* worker_cpu_affinity auto: the CPUs the process was allowed at
	 * start-up, which workers are pinned to one each (affinity.h). */
	bool pin_workers;
	cpu_set_t cpus;
};

/*
 * A reload retired this worker (new listen addresses) and the server is
 * not stopping: a connection that has not sent its first request yet is
 * served rather than closed, since its client is about to send one and
 * nothing tells it to retry. A stop closes such connections as usual.
 */
static inline bool server_spare_fresh(const struct orcd_worker *w)
{
	return atomic_load(&w->retiring) && !atomic_load(&w->srv->stopping);
}

/*
 * Called by an engine when its wake_fd fires (after reading it): after a
 * reload the worker adopts a view of the new configuration and lets go
 * of its old one, which lives on while requests still pin it.
 */
void server_worker_refresh(struct orcd_worker *w);

/*
 * Called by an engine once it is stopping and will accept no more: its
 * listeners are out of its loop (epoll), or the cancels of its accepts
 * and listener polls have all completed (io_uring). A reload that
 * retires workers waits for this before it says "configuration
 * reloaded", so that a connection opened after that line is never taken
 * by a retiring worker, which would close it after one response.
 */
void server_accepts_gone(struct orcd_worker *w);

/*
 * A request planned under the worker's configuration pins it until its
 * response is done (root_fd for a linked open, limits, the stat cache's
 * key): a count in the view, which only this worker's thread writes, not
 * a reference count other workers share. Worker thread only.
 */
struct orcd_config *server_cfg_pin(struct orcd_worker *w);
void server_cfg_unpin(struct orcd_worker *w, struct orcd_config *cfg);
bool server_stopping(const struct orcd_worker *w);

struct cli_opts;

/* Block the signals server_run() reads from its signalfd (SIGHUP, SIGTERM,
 * ...), in the calling thread. main() calls it before it reads the
 * configuration, so that a reload or stop asked for while the server
 * starts waits for it instead of the default action killing it. */
void server_block_signals(void);

/* Build a config from the file named by (or defaulted for) the options,
 * with the command-line overrides applied on top, and finalize it. */
int server_load_config(const struct cli_opts *o, struct orcd_config **out,
		       char *err, size_t cap);

/* Run until SIGTERM; takes over the reference to cfg. Returns the exit code. */
int server_run(const struct cli_opts *o, struct orcd_config *cfg);

/* Counters summed over all workers, for metrics and STATUS=. */
void server_stats_sum(const struct orcd_server *s, struct orcd_stats *out);

#endif
