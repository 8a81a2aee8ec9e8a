// SPDX-License-Identifier: MIT
/*
 * The process around the workers: listeners, privilege drop, threads,
 * signals (handled by the main thread only, through a signalfd), config
 * reload by whole-struct swap (and by a new generation of workers when the
 * listen addresses change), graceful stop, and systemd notification.
 */
#include "server.h"

#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdalign.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/signalfd.h>
#include <systemd/sd-daemon.h>
#include <time.h>
#include <unistd.h>

#include "affinity.h"
#include "cli.h"
#include "conn_budget.h"
#include "engine.h"
#include "listen.h"
#include "log.h"
#include "http1.h"
#include "metrics.h"
#include "mono.h"

int server_load_config(const struct cli_opts *o, struct orcd_config **out,
		       char *err, size_t cap)
{
	struct orcd_config *c = config_new();
	const char *file = o->config_file;
	int e;

	if (!c) {
		snprintf(err, cap, "out of memory");
		return -ENOMEM;
	}
	e = file ? config_load_file(c, file, err, cap) : 0;
	if (!e)
		e = cli_apply(o, c, err, cap);
	if (!e)
		e = config_finalize(c, err, cap);
	if (e) {
		config_free(c);
		return e;
	}
	*out = c;
	return 0;
}

/* Tests only: the count the environment variable `name` gives (0 where
 * unset). */
static unsigned long test_knob(const char *name)
{
	const char *v = getenv(name);

	return v ? strtoul(v, NULL, 10) : 0;
}

/* Tests only: the calling thread waits here for the milliseconds `name`
 * gives, so that a test can act inside a window otherwise microseconds
 * long. */
static void test_pause(const char *name)
{
	unsigned long ms = test_knob(name);
	struct timespec ts;

	if (!ms || ms > 60000)
		return;
	ts.tv_sec = (time_t)(ms / 1000);
	ts.tv_nsec = (long)(ms % 1000) * 1000000;
	while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
		;
}

/* The worker's part of a reopen (see reopen_access_log), else lines
 * that waited long enough go out. */
void server_log_tick(struct orcd_worker *w)
{
	unsigned req = atomic_load_explicit(&w->srv->log_flush_req,
					    memory_order_acquire);

	if (req == w->log_seen) {
		access_log_tick(&w->log, mono_ms());
		return;
	}
	access_log_flush(&w->log);
	w->log_seen = req;
	atomic_store_explicit(&w->log_flushed, req, memory_order_release);
}

void server_worker_refresh(struct orcd_worker *w)
{
	struct orcd_server *s = w->srv;
	struct orcd_config *base = NULL, *view, *old = w->cfg;
	unsigned fails, gen;
	int err = 0;

	if (w->log.l)
		server_log_tick(w);

	pthread_mutex_lock(&s->cfg_lock);
	gen = s->cfg_gen;
	if (old->base != s->cfg)
		base = config_get(s->cfg);
	pthread_mutex_unlock(&s->cfg_lock);
	if (!base) {
		atomic_store_explicit(&w->cfg_gen, gen, memory_order_release);
		return;
	}
	test_pause("ORCD_TEST_REFRESH_PAUSE_MS");
	fails = atomic_load(&s->test_view_fails);
	while (fails && !atomic_compare_exchange_weak(&s->test_view_fails,
						      &fails, fails - 1))
		;
	if (fails) {
		view = NULL; /* tests: as when no fd is left for the root */
		err = -EMFILE;
	} else {
		view = config_view(base, &err);
	}
	if (!view) {
		if (!atomic_load(&w->cfg_stale))
			log_msg(LOG_ERR,
				"worker %u: cannot open the new root %s again (%s); serving the previous configuration, trying again each second",
				w->id, base->root, strerror(-err));
		atomic_store(&w->cfg_stale, true);
	} else if (atomic_exchange(&w->cfg_stale, false)) {
		log_msg(LOG_NOTICE,
			"worker %u: serving the current configuration now",
			w->id);
	}
	config_put(base);
	if (view) {
		w->cfg = view;
		/* Requests still pinning the old view drop it when they
		 * end. */
		if (!old->pins)
			config_put(old);
	}
	atomic_store_explicit(&w->cfg_gen, gen, memory_order_release);
}

struct orcd_config *server_cfg_pin(struct orcd_worker *w)
{
	w->cfg->pins++;
	return w->cfg;
}

void server_cfg_unpin(struct orcd_worker *w, struct orcd_config *cfg)
{
	if (!--cfg->pins && cfg != w->cfg)
		config_put(cfg); /* the worker's reference to a view it left */
}

bool server_stopping(const struct orcd_worker *w)
{
	return atomic_load(&w->srv->stopping) || atomic_load(&w->retiring);
}

/* Workers started together, at start-up or by a reload that changed the
 * listen addresses; a replaced one drains while its successor serves. */
struct orcd_generation {
	struct orcd_worker *workers;
	unsigned n;
	/* The sockets only it held are closed (close_retired_listeners). */
	bool listeners_closed;
	/* Started for a reload that failed: it never served. */
	bool never_served;
	struct orcd_generation *next;
};

static void stats_add(struct orcd_stats *dst, const struct orcd_stats *src)
{
	_Atomic uint64_t *d = (_Atomic uint64_t *)dst;
	const _Atomic uint64_t *v = (const _Atomic uint64_t *)src;
	size_t n = sizeof(*dst) / sizeof(*d), i;

	for (i = 0; i < n; i++)
		atomic_fetch_add_explicit(
			&d[i], atomic_load_explicit(&v[i], memory_order_relaxed),
			memory_order_relaxed);
}

void server_stats_sum(const struct orcd_server *s, struct orcd_stats *out)
{
	const struct orcd_generation *g;
	unsigned k;

	memset(out, 0, sizeof(*out));
	stats_add(out, &s->retired);
	for (k = 0; k < s->n_workers; k++)
		stats_add(out, &s->workers[k].stats);
	for (g = s->retiring; g; g = g->next)
		for (k = 0; k < g->n; k++)
			stats_add(out, &g->workers[k].stats);
}

/* An array of n zeroed workers, aligned as struct orcd_worker says. */
static struct orcd_worker *workers_new(unsigned n)
{
	size_t size = (size_t)(n ? n : 1) * sizeof(struct orcd_worker);
	struct orcd_worker *ws =
		aligned_alloc(alignof(struct orcd_worker), size);

	if (ws)
		memset(ws, 0, size);
	return ws;
}

static void wake(struct orcd_worker *ws, unsigned n)
{
	uint64_t one = 1;
	unsigned i;

	for (i = 0; i < n; i++)
		if (write(ws[i].wake_fd, &one, sizeof(one)) < 0)
			log_msg(LOG_ERR, "wake worker %u: %s", i,
				strerror(errno));
}

static void wake_workers(struct orcd_server *s)
{
	wake(s->workers, s->n_workers);
}

/*
 * worker_cpu_affinity auto: the worker runs on one CPU only, and its own
 * listeners say so (SO_INCOMING_CPU), so that the kernel hands a
 * connection whose packets that CPU took to this worker, among the
 * SO_REUSEPORT group (Linux 6.1's reuseport_select_sock_by_hash prefers
 * such a socket). Passed sockets are one for all workers: no hint there.
 */
static void pin_worker(struct orcd_worker *w)
{
	const struct orcd_server *s = w->srv;
	int cpu = affinity_pick(&s->cpus, w->id);
	cpu_set_t one;
	unsigned i;
	int e;

	if (cpu < 0)
		return;
	CPU_ZERO(&one);
	CPU_SET(cpu, &one);
	e = pthread_setaffinity_np(pthread_self(), sizeof(one), &one);
	if (e) {
		log_msg(LOG_WARNING, "worker %u: pinning to CPU %d: %s", w->id,
			cpu, strerror(e));
		return;
	}
	for (i = 0; i < w->n_listen && !s->socket_activated; i++)
		if (setsockopt(w->listen_fds[i], SOL_SOCKET, SO_INCOMING_CPU,
			       &cpu, sizeof(cpu)))
			log_msg(LOG_WARNING,
				"worker %u: SO_INCOMING_CPU %d: %s", w->id,
				cpu, strerror(errno));
}

static void *worker_main(void *arg)
{
	struct orcd_worker *w = arg;
	uint64_t one = 1;
	char name[16];

	/* Tells the workers apart in top -H and /proc/PID/task. */
	snprintf(name, sizeof(name), "orcd-w%u", w->id);
	pthread_setname_np(pthread_self(), name);
	if (w->srv->pin_workers)
		pin_worker(w);
	test_pause("ORCD_TEST_WORKER_PAUSE_MS");

	access_log_buf_init(&w->log, w->srv->access_log);
	w->result = w->srv->engine->run(w);
	/* Before done: a stop or a reopen counts on every line being out. */
	access_log_buf_fini(&w->log);
	atomic_store(&w->done, true);
	if (w->result < 0)
		log_msg(LOG_ERR, "worker %u: engine %s failed: %s", w->id,
			w->srv->engine->name, strerror(-w->result));
	if (write(w->srv->done_fd, &one, sizeof(one)) < 0)
		log_msg(LOG_ERR, "worker %u: done notify: %s", w->id,
			strerror(errno));
	return NULL;
}

/* Starts n workers on ws (listeners already set); returns how many
 * started. One that failed holds nothing. */
static unsigned start_workers(struct orcd_server *s, struct orcd_worker *ws,
			      unsigned n, struct orcd_config *cfg)
{
	unsigned k;
	int err = 0;

	for (k = 0; k < n; k++) {
		struct orcd_worker *w = &ws[k];
		const char *what = NULL;

		w->id = k;
		w->srv = s;
		w->core = &h1_core;
		w->wake_fd = -1;
		atomic_store(&w->cfg_gen, s->cfg_gen);
		w->cfg = config_view(cfg, &err);
		if (!w->cfg) {
			what = "opening the root again";
		} else if ((w->wake_fd = eventfd(0, EFD_CLOEXEC |
							  EFD_NONBLOCK)) < 0) {
			what = "eventfd";
			err = -errno;
		} else if ((err = -pthread_create(&w->thread, NULL,
						  worker_main, w))) {
			what = "a thread";
		}
		if (what) {
			log_msg(LOG_ERR, "starting worker %u failed: %s: %s", k,
				what, strerror(-err));
			if (w->wake_fd >= 0)
				close(w->wake_fd);
			w->wake_fd = -1;
			config_put(w->cfg);
			w->cfg = NULL;
			return k;
		}
	}
	return n;
}

static bool all_done(const struct orcd_worker *ws, unsigned n)
{
	unsigned k;

	for (k = 0; k < n; k++)
		if (!atomic_load(&ws[k].done))
			return false;
	return true;
}

static bool any_done(const struct orcd_worker *ws, unsigned n)
{
	unsigned k;

	for (k = 0; k < n; k++)
		if (atomic_load(&ws[k].done))
			return true;
	return false;
}

static bool holds_fd(const struct orcd_worker *ws, unsigned n, int fd)
{
	unsigned k, i;

	for (k = 0; k < n; k++)
		for (i = 0; i < ws[k].n_listen; i++)
			if (ws[k].listen_fds[i] == fd)
				return true;
	return false;
}

/* The current generation or one still retiring listens on fd. */
static bool listen_fd_in_use(const struct orcd_server *s, int fd)
{
	const struct orcd_generation *g;

	if (holds_fd(s->workers, s->n_workers, fd))
		return true;
	for (g = s->retiring; g; g = g->next)
		if (!g->listeners_closed && holds_fd(g->workers, g->n, fd))
			return true;
	return false;
}

/* Listeners in ws[from..n) that no live generation holds are closed. */
static void close_unused_listeners(struct orcd_server *s,
				   struct orcd_worker *ws, unsigned from,
				   unsigned n)
{
	unsigned k, i;

	for (k = from; k < n; k++) {
		for (i = 0; i < ws[k].n_listen; i++)
			if (!listen_fd_in_use(s, ws[k].listen_fds[i]))
				close(ws[k].listen_fds[i]);
		ws[k].n_listen = 0;
	}
}

/* Joins a generation no longer on any list: its counters go to
 * s->retired (gauges, peaks too, of a finished worker are 0) and the
 * listeners only it held are closed. */
static void generation_free(struct orcd_server *s, struct orcd_generation *g)
{
	unsigned k;

	for (k = 0; k < g->n; k++) {
		struct orcd_worker *w = &g->workers[k];

		pthread_join(w->thread, NULL);
		atomic_store(&w->stats.conns_open, 0);
		atomic_store(&w->stats.chains_inflight, 0);
		atomic_store(&w->stats.slots_inuse, 0);
		/* Its peaks were of its own life, not the server's now. */
		atomic_store(&w->stats.chains_inflight_peak, 0);
		atomic_store(&w->stats.slots_peak, 0);
		stats_add(&s->retired, &w->stats);
		if (w->wake_fd >= 0)
			close(w->wake_fd);
		if (w->cfg)
			config_put(w->cfg);
	}
	if (!g->listeners_closed)
		close_unused_listeners(s, g->workers, 0, g->n);
	free(g->workers);
	free(g);
}

/*
 * A retired generation whose accepts are all gone closes the sockets only
 * it held at once, not when its last connection has drained: a client of
 * an address the reload removed is refused instead of queued where no one
 * accepts, and a later reload may bind that address again. Its workers
 * touch their listeners no more once they said server_accepts_gone(), and
 * no two workers of a generation share one (only passed sockets are
 * shared, and those never change generation).
 */
static void close_retired_listeners(struct orcd_server *s,
				    struct orcd_generation *g)
{
	unsigned k, i;

	g->listeners_closed = true;
	for (k = 0; k < g->n; k++)
		for (i = 0; i < g->workers[k].n_listen; i++)
			if (!listen_fd_in_use(s, g->workers[k].listen_fds[i]))
				close(g->workers[k].listen_fds[i]);
}

/* Frees the retiring generations whose workers all returned (all of them
 * when wait: they are stopping, so the joins end). */
static void reap_retiring(struct orcd_server *s, bool wait)
{
	struct orcd_generation **pp = &s->retiring;

	while (*pp) {
		struct orcd_generation *g = *pp;

		if (!wait && !all_done(g->workers, g->n)) {
			pp = &g->next;
			continue;
		}
		bool never_served = g->never_served;

		*pp = g->next;
		generation_free(s, g);
		log_msg(LOG_INFO, "%s", never_served ?
			"workers started for the failed reload finished" :
			"workers of the previous listen addresses finished");
	}
}

/* The workers ws[0..n) stop accepting and drain; g tracks them until
 * reap_retiring() joins them. */
static void retire(struct orcd_server *s, struct orcd_worker *ws, unsigned n,
		   struct orcd_generation *g)
{
	unsigned k;

	for (k = 0; k < n; k++)
		atomic_store(&ws[k].retiring, true);
	wake(ws, n);
	g->workers = ws;
	g->n = n;
	g->next = s->retiring;
	s->retiring = g;
}

static uint64_t mono_usec(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000ULL + (uint64_t)ts.tv_nsec / 1000;
}

/* The first of ws[0..n) that may still take a connection (neither said
 * server_accepts_gone() nor ended), or n. */
static unsigned still_accepting(const struct orcd_worker *ws, unsigned n)
{
	unsigned k;

	for (k = 0; k < n; k++)
		if (!atomic_load(&ws[k].done) &&
		    !atomic_load(&ws[k].accepts_gone))
			break;
	return k;
}

/*
 * io_uring accepts wait exclusively: a new connection wakes one waiting
 * accept, and when that accept is being cancelled by a retiring worker the
 * connection stays queued on the socket the generations share, with no
 * one woken (seen as Recv-Q > 0 on an idle worker's socket). So with the
 * io_uring engines the old generation's accepts must be gone before the
 * new one arms its own. epoll's level-triggered readiness has no such
 * hole, so there the new generation starts first. On every engine the
 * reload is logged only after this wait: a client that sees "configuration
 * reloaded" knows no retiring worker takes its next connection (and
 * closes it as idle after one response). Waits until each worker said
 * server_accepts_gone() or ended, at most 2s; connections meanwhile wait
 * in the backlog.
 */
static bool wait_accepts_gone(const struct orcd_worker *ws, unsigned n)
{
	uint64_t deadline = mono_usec() + 2000000;
	struct timespec ms = { 0, 1000000 };
	unsigned k;

	while ((k = still_accepting(ws, n)) < n) {
		if (mono_usec() >= deadline) {
			log_msg(LOG_WARNING,
				"reload: worker %u of the previous listen addresses still accepts after 2s; going on",
				ws[k].id);
			return false;
		}
		nanosleep(&ms, NULL);
	}
	return true;
}

/* A retired generation whose accepts outlasted its reload's wait: its
 * listeners close once they are gone (each turn of the main loop), not
 * when its last connection has drained. */
static void close_late_listeners(struct orcd_server *s)
{
	struct orcd_generation *g;

	for (g = s->retiring; g; g = g->next)
		if (!g->listeners_closed && still_accepting(g->workers, g->n) ==
						    g->n)
			close_retired_listeners(s, g);
}

/* Whether every worker of ws[0..n) runs its loop (its heartbeat moved)
 * within 5 s: false as soon as one has ended, its engine having failed
 * to start (it said why). */
static bool workers_run(const struct orcd_worker *ws, unsigned n)
{
	uint64_t deadline = mono_usec() + 5000000;
	struct timespec ms = {0, 1000000};
	unsigned k, running;

	for (;;) {
		for (k = running = 0; k < n; k++) {
			if (atomic_load(&ws[k].done))
				return false;
			running += atomic_load_explicit(&ws[k].heartbeat,
							memory_order_relaxed) != 0;
		}
		if (running == n)
			return true;
		if (mono_usec() >= deadline)
			break;
		nanosleep(&ms, NULL);
	}
	log_msg(LOG_WARNING,
		"reload: the workers for the new listen addresses do not run after 5 s");
	return false;
}

/* Called once, by the worker's own thread; the line goes out before the
 * flag that lets the reload log its own. */
void server_accepts_gone(struct orcd_worker *w)
{
	if (server_spare_fresh(w))
		log_msg(LOG_INFO,
			"worker %u: retired by a reload; accepts no more connections",
			w->id);
	atomic_store(&w->accepts_gone, true);
}

static bool same_listen(const struct orcd_listen *a,
			const struct orcd_listen *b)
{
	return a->addrlen == b->addrlen &&
	       !memcmp(&a->addr, &b->addr, a->addrlen);
}

/* c runs from now on: every worker takes a view of it at its next wake
 * (server_worker_refresh). */
static void publish_cfg(struct orcd_server *s, struct orcd_config *c)
{
	struct orcd_config *old;

	pthread_mutex_lock(&s->cfg_lock);
	old = s->cfg;
	s->cfg = c;
	s->cfg_gen++;
	pthread_mutex_unlock(&s->cfg_lock);
	config_put(old);
}

/*
 * A reload that changes the listen addresses starts a new generation of
 * workers on the new set, as nginx starts new worker processes: each new
 * worker takes over its predecessor's sockets for the addresses that stay
 * (nothing waiting in a backlog is lost) and opens the added ones; the old
 * generation stops accepting and drains, and the sockets only it held are
 * closed once its accepts are gone. Rings and loops are per worker, so no
 * engine needs a hook. Returns 0, or -errno with err set and nothing
 * changed.
 */
static int swap_generation(struct orcd_server *s, struct orcd_config *c,
			   char *err, size_t cap)
{
	unsigned n = s->n_workers, k, i, j, started;
	bool gone;
	struct orcd_worker *ws = workers_new(n);
	struct orcd_generation *g = calloc(1, sizeof(*g));
	int e = 0;

	if (!ws || !g) {
		free(ws);
		free(g);
		snprintf(err, cap, "out of memory");
		return -ENOMEM;
	}
	/* Added addresses must be free before any new worker binds them. */
	for (i = 0; i < c->n_listen && !e; i++) {
		for (j = 0; j < s->cfg->n_listen; j++)
			if (same_listen(&s->cfg->listen[j], &c->listen[i]))
				break;
		if (j == s->cfg->n_listen)
			e = listen_check_free(&c->listen[i], err, cap);
	}
	for (k = 0; k < n && !e; k++) {
		const struct orcd_worker *old = &s->workers[k];

		ws[k].wake_fd = -1;
		for (i = 0; i < c->n_listen; i++) {
			int fd = -1;

			for (j = 0; j < s->cfg->n_listen && j < old->n_listen;
			     j++)
				if (same_listen(&s->cfg->listen[j],
						&c->listen[i]))
					fd = old->listen_fds[j];
			if (fd < 0)
				fd = listen_open(&c->listen[i], err, cap);
			if (fd < 0) {
				e = fd;
				break;
			}
			ws[k].listen_fds[ws[k].n_listen++] = fd;
		}
	}
	if (e) {
		close_unused_listeners(s, ws, 0, n);
		free(ws);
		free(g);
		return e;
	}
	/* The new workers start held: none takes a connection before all
	 * of them run (else the reload fails and the old ones serve on)
	 * and the old ones' accepts are gone (io_uring's wait exclusively:
	 * see wait_accepts_gone()). Until then clients wait in the
	 * backlog. */
	for (k = 0; k < n; k++)
		atomic_store(&ws[k].hold_accepts, true);
	started = start_workers(s, ws, n, c);
	if (started < n || !workers_run(ws, n)) {
		snprintf(err, cap,
			 "starting workers for the new listen addresses failed");
		/* The ones that did start go, having taken no connection. */
		close_unused_listeners(s, ws, started, n);
		if (started) {
			g->never_served = true;
			retire(s, ws, started, g);
		} else {
			free(ws);
			free(g);
		}
		return -EAGAIN;
	}
	retire(s, s->workers, n, g);
	gone = wait_accepts_gone(g->workers, n);
	s->workers = ws;
	/* Before they go: a woken worker's refresh takes what s->cfg names
	 * for newer than its own (the old configuration, a moment ago). */
	publish_cfg(s, c);
	for (k = 0; k < n; k++)
		atomic_store_explicit(&ws[k].hold_accepts, false,
				      memory_order_release);
	wake(ws, n);
	if (gone)
		close_retired_listeners(s, g);
	return 0;
}

static int can_drop_privileges(const struct orcd_config *c, char *err,
			       size_t cap)
{
	if ((c->user || c->group) && geteuid() != 0) {
		snprintf(err, cap, "user/group set but not started as root");
		return -EPERM;
	}
	return 0;
}

/* Bind (and open the access log) before dropping privileges so ports
 * below 1024 and root-only log paths work; create rings
 * after, since a ring keeps acting with its creator's credentials. */
static int drop_privileges(const struct orcd_config *c, char *err, size_t cap)
{
	uid_t uid;
	gid_t gid;

	int e = can_drop_privileges(c, err, cap);

	if (e || (!c->user && !c->group))
		return e;
	e = config_identity(c, &uid, &gid, err, cap);
	if (e)
		return e;
	e = config_take_identity(uid, gid);
	if (e)
		snprintf(err, cap, "dropping privileges: %s", strerror(-e));
	return e;
}

/* The access log was opened before the drop; its reopen (SIGUSR1) runs
 * as the user and creates the file in its directory. Where the user may
 * not, each rotation would fail and the lines stay in the renamed file:
 * say so at start-up rather than at the first rotation. */
static void warn_unrotatable_log(const struct orcd_config *c)
{
	char dir[PATH_MAX];
	int e;

	if ((!c->user && !c->group) || !c->access_log ||
	    !strcmp(c->access_log, "-") || !strcmp(c->access_log, "stdout"))
		return;
	e = config_access_log_dir(c, dir, sizeof(dir));
	if (!e)
		return;
	log_msg(LOG_WARNING,
		"access_log %s: the user orcd runs as cannot create files in %s (%s): a reopen for rotation (SIGUSR1) will fail and lines stay in the renamed file; give the directory to the user, or rotate with copytruncate",
		config_show(c->access_log).s, config_show(dir).s, strerror(-e));
}

/* ORCD_TEST_* and ORCD_URING_* change what orcd does for its own tests
 * (pauses, injected faults, smaller rings): one left in a service's
 * environment should not go unnoticed. */
static void warn_test_hooks(void)
{
	extern char **environ;
	char **e;

	for (e = environ; *e; e++)
		if (!strncmp(*e, "ORCD_TEST_", 10) ||
		    !strncmp(*e, "ORCD_URING_", 11))
			log_msg(LOG_WARNING,
				"%.*s is set: a hook for orcd's tests, not for service (orcd(8), ENVIRONMENT)",
				(int)strcspn(*e, "="), *e);
}

/* A reload re-reads the configuration file and mime_types as the user
 * orcd runs as now (start-up read them as root): where that user may not
 * read one, every SIGHUP would fail. Say so at start-up. */
static void warn_unreloadable(const struct orcd_config *c)
{
	const char *files[] = { c->source, c->mime_types };

	if (!c->user && !c->group)
		return;
	for (size_t i = 0; i < sizeof(files) / sizeof(files[0]); i++)
		if (files[i] && access(files[i], R_OK))
			log_msg(LOG_WARNING,
				"%s: the user orcd runs as cannot read it (%s): every reload (SIGHUP) will fail; make it readable by that user, or restart to apply a change",
				config_show(files[i]).s, strerror(errno));
}

/* `threads 0`: one worker per CPU this process may run on (`cpus`, NULL
 * where unknown: a cpuset, taskset or CPUAffinity= may allow fewer than
 * are online, and pinned workers would otherwise share them), at most
 * threads' maximum. */
static unsigned workers_for(const cpu_set_t *cpus)
{
	long n = cpus ? CPU_COUNT(cpus) : sysconf(_SC_NPROCESSORS_ONLN);

	return n < 1 ? 1 : n > 256 ? 256 : (unsigned)n;
}

/* How many workers `threads` asks for here (the CPUs as start-up saw
 * them: s->cpus, empty where unknown). */
static unsigned threads_here(const struct orcd_server *s, unsigned threads)
{
	if (threads)
		return threads;
	return workers_for(CPU_COUNT(&s->cpus) ? &s->cpus : NULL);
}

/* The same addresses, in any order (config.c refuses one twice). */
static bool same_listeners(const struct orcd_config *a,
			   const struct orcd_config *b)
{
	if (a->n_listen != b->n_listen)
		return false;
	for (unsigned i = 0; i < a->n_listen; i++) {
		unsigned k = 0;

		while (k < b->n_listen && !same_listen(&a->listen[i],
						       &b->listen[k]))
			k++;
		if (k == b->n_listen)
			return false;
	}
	return true;
}

/* max_connections beyond what the slots hold (io_uring engines): one
 * line at start-up and at each reload that keeps it so (conn_budget.h),
 * naming the slots the workers really have, which RLIMIT_NOFILE may cut
 * below cfg->slots (a worker that would get too few says so itself). */
static void say_budget(const struct orcd_server *s,
		       const struct orcd_config *cfg)
{
	struct conn_budget b;
	char line[256];
	int slots;

	if (!s->engine->worker_slots)
		return;
	slots = s->engine->worker_slots(s, cfg);
	if (slots < 0)
		return;
	conn_budget((unsigned)slots, cfg->max_connections, &b);
	if (b.capped) {
		conn_budget_describe(&b, (unsigned)slots, cfg->max_connections,
				     line, sizeof(line));
		log_msg(LOG_WARNING, "%s", line);
	}
}

static void warn_unapplied(void *ctx, const char *directive, const char *was,
			   const char *now)
{
	(void)ctx;
	log_msg(LOG_WARNING, "reload: %s %s -> %s needs a restart; keeping %s",
		directive, was, now, was);
}

static void reload_failed(struct orcd_config *c, const char *err)
{
	log_msg(LOG_ERR, "reload failed, keeping the running configuration: %s",
		err);
	config_put(c);
	sd_notify(0, "READY=1");
}

/*
 * Sleeps in 1 ms steps until answered(s, arg) holds, 2 s at most, and
 * says whether it did: how the main thread waits for every worker to
 * answer something it asked when it woke them.
 */
static bool wait_workers(const struct orcd_server *s,
			 bool (*answered)(const struct orcd_server *, unsigned),
			 unsigned arg)
{
	uint64_t deadline = mono_usec() + 2000000;
	struct timespec ms = { 0, 1000000 };

	while (!answered(s, arg)) {
		if (mono_usec() >= deadline)
			return false;
		nanosleep(&ms, NULL);
	}
	return true;
}

/* The first current worker whose last refresh did not look at
 * generation gen, NULL when all did (or are done). */
static const struct orcd_worker *behind_cfg(const struct orcd_server *s,
					    unsigned gen)
{
	for (unsigned k = 0; k < s->n_workers; k++) {
		const struct orcd_worker *w = &s->workers[k];

		if (!atomic_load(&w->done) &&
		    atomic_load_explicit(&w->cfg_gen, memory_order_acquire) !=
			    gen)
			return w;
	}
	return NULL;
}

static bool all_took_cfg(const struct orcd_server *s, unsigned gen)
{
	return !behind_cfg(s, gen);
}

/*
 * "configuration reloaded" and systemd's READY=1 say that what comes next
 * is served under the new configuration: each worker takes it when it
 * handles its wake, so wait until every one of them has (or found it
 * cannot: cfg_stale, said already), as a reopen waits for the workers'
 * buffered log lines.
 */
static void wait_workers_took_cfg(const struct orcd_server *s)
{
	const struct orcd_worker *w;

	if (wait_workers(s, all_took_cfg, s->cfg_gen))
		return;
	w = behind_cfg(s, s->cfg_gen);
	if (w)
		log_msg(LOG_WARNING,
			"reload: worker %u has not taken the new configuration after 2s; going on",
			w->id);
}

/* Only once orcd serves: READY=1 was sent at start-up. */
static void reload(struct orcd_server *s, const struct cli_opts *o)
{
	struct orcd_config *c;
	char err[CONFIG_ERR_MAX + 64];
	struct timespec ts;
	bool same, new_workers;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	sd_notifyf(0, "RELOADING=1\nMONOTONIC_USEC=%llu",
		   (unsigned long long)ts.tv_sec * 1000000ULL +
			   (unsigned long long)ts.tv_nsec / 1000);
	if (server_load_config(o, &c, err, sizeof(err))) {
		reload_failed(NULL, err);
		return;
	}
	c->threads = threads_here(s, c->threads);
	same = same_listeners(s->cfg, c);
	/* Passed sockets stay; specific's slot ranges are reserved once,
	 * for one set of workers. */
	new_workers = !same && !s->socket_activated &&
		      s->engine->kind != ORCD_ENGINE_SPECIFIC;
	config_unapplied(s->cfg, c, new_workers, warn_unapplied, NULL);
	/* s->cfg says what runs, so the next reload compares with that;
	 * before any worker takes a view of c, since strings change. */
	if (config_keep_running(s->cfg, c, new_workers)) {
		reload_failed(c, "out of memory");
		return;
	}
	if (!new_workers) {
		/* The listeners that run stay, and so does what names them,
		 * in their order (the file may list them in another). */
		memcpy(c->listen, s->cfg->listen, sizeof(c->listen));
		c->n_listen = s->cfg->n_listen;
	}
	if (same) {
		/* The usual case: the workers take the new config. */
	} else if (s->socket_activated) {
		log_msg(LOG_NOTICE,
			"reload: listen ignored: the service manager passes the sockets");
	} else if (!new_workers) {
		log_msg(LOG_WARNING,
			"reload: engine specific: listen addresses change on restart");
	} else if (swap_generation(s, c, err, sizeof(err))) {
		reload_failed(c, err);
		return;
	} else {
		log_msg(LOG_NOTICE,
			"reload: new workers serve the new listen addresses; the previous ones drain");
		test_pause("ORCD_TEST_RELOAD_PAUSE_MS");
	}
	/* c->slots is what the workers serving from now on started with. */
	say_budget(s, c);
	if (s->cfg != c)
		publish_cfg(s, c);
	wake_workers(s);
	wait_workers_took_cfg(s);
	log_msg(LOG_NOTICE, "configuration reloaded");
	sd_notify(0, "READY=1");
}

static void notify_status(struct orcd_server *s)
{
	struct orcd_stats t;

	server_stats_sum(s, &t);
	sd_notifyf(0, "STATUS=engine %s, %llu connections open, %llu requests",
		   s->engine->name, (unsigned long long)t.conns_open,
		   (unsigned long long)t.requests);
}

/*
 * The systemd watchdog: every half interval, ping only when every worker's
 * loop has turned since the last look (a finished worker counts as alive).
 * The main thread alone proves nothing: it would go on pinging while a
 * worker hangs. Engines turn at least once a second when idle, so
 * WatchdogSec must be at least 3s.
 */
struct watchdog {
	uint64_t half_usec;	/* 0: no watchdog */
	uint64_t next;		/* CLOCK_MONOTONIC usec of the next look */
	uint64_t *seen;		/* heartbeat per worker at the last look */
};

static void watchdog_init(struct watchdog *wd, unsigned n_workers)
{
	uint64_t usec = 0;

	memset(wd, 0, sizeof(*wd));
	if (sd_watchdog_enabled(0, &usec) <= 0 || !usec)
		return;
	wd->seen = calloc(n_workers, sizeof(*wd->seen));
	if (!wd->seen) {
		log_msg(LOG_ERR, "watchdog: out of memory; not pinging");
		return;
	}
	wd->half_usec = usec / 2;
	wd->next = mono_usec() + wd->half_usec;
	if (usec < 3000000)
		log_msg(LOG_WARNING,
			"WatchdogSec=%llums is shorter than 3s: an idle worker turns only once a second",
			(unsigned long long)usec / 1000);
}

static void watchdog_check(struct watchdog *wd, const struct orcd_server *s)
{
	bool alive = true;
	unsigned k;

	if (!wd->half_usec || mono_usec() < wd->next)
		return;
	wd->next = mono_usec() + wd->half_usec;
	for (k = 0; k < s->n_workers; k++) {
		uint64_t hb = atomic_load_explicit(&s->workers[k].heartbeat,
						   memory_order_relaxed);

		if (hb == wd->seen[k] && !atomic_load(&s->workers[k].done)) {
			log_msg(LOG_WARNING,
				"watchdog: worker %u's loop has not turned in %llums; not pinging",
				k, (unsigned long long)wd->half_usec / 1000);
			alive = false;
		}
		wd->seen[k] = hb;
	}
	if (alive)
		sd_notify(0, "WATCHDOG=1");
}

/* Until the next look at the watchdog, at most a second (STATUS=). */
static int poll_timeout_ms(const struct watchdog *wd)
{
	uint64_t now = mono_usec();

	if (!wd->half_usec)
		return 1000;
	if (wd->next <= now)
		return 0;
	return wd->next - now < 1000000 ? (int)((wd->next - now + 999) / 1000) :
					  1000;
}

/* Every worker's loop has turned once: its ring or event loop exists and
 * its accepts are armed, so the server really serves. */
static bool all_turned(const struct orcd_server *s)
{
	unsigned k;

	for (k = 0; k < s->n_workers; k++)
		if (!atomic_load_explicit(&s->workers[k].heartbeat,
					  memory_order_relaxed))
			return false;
	return true;
}

/* Start-up waits for every worker's first turn, and signals wait with
 * it. Once, 5 s after `since`, name each worker that has not turned, so
 * that a start-up which hangs says where. */
static void warn_not_turned(const struct orcd_server *s, int64_t since,
			    bool *warned)
{
	unsigned k;

	if (*warned || mono_ms() - since < 5000)
		return;
	*warned = true;
	for (k = 0; k < s->n_workers; k++)
		if (!atomic_load_explicit(&s->workers[k].heartbeat,
					  memory_order_relaxed) &&
		    !atomic_load(&s->workers[k].done))
			log_msg(LOG_WARNING,
				"worker %u has not begun serving after 5 s; orcd is not ready yet, and signals wait until it is",
				k);
}

/* What the metrics page shows: the counters summed now, at the path
 * the current config names. Main thread only. */
static void metrics_snapshot(void *ctx, struct orcd_stats *out,
			     const char **path)
{
	struct orcd_server *s = ctx;

	server_stats_sum(s, out);
	*path = s->cfg->metrics_path;
}

static bool log_flushed(const struct orcd_worker *ws, unsigned n,
			unsigned req)
{
	unsigned k;

	for (k = 0; k < n; k++)
		if (!atomic_load(&ws[k].done) &&
		    atomic_load_explicit(&ws[k].log_flushed,
					 memory_order_acquire) != req)
			return false;
	return true;
}

static bool all_logs_flushed(const struct orcd_server *s, unsigned req)
{
	const struct orcd_generation *g;

	if (!log_flushed(s->workers, s->n_workers, req))
		return false;
	for (g = s->retiring; g; g = g->next)
		if (!log_flushed(g->workers, g->n, req))
			return false;
	return true;
}

/*
 * SIGUSR1 (logrotate renamed the file): the lines workers still buffer
 * belong to the file as it was, so every worker writes them out (woken
 * now; a draining one, which no longer watches its wake_fd, within its
 * heartbeat of a second) before the new file replaces the old one.
 */
static void reopen_access_log(struct orcd_server *s)
{
	unsigned req = atomic_fetch_add(&s->log_flush_req, 1) + 1;
	const struct orcd_generation *g;

	wake_workers(s);
	for (g = s->retiring; g; g = g->next)
		wake(g->workers, g->n);
	if (!wait_workers(s, all_logs_flushed, req))
		log_msg(LOG_WARNING,
			"reopening the access log: a worker did not write its buffered lines within 2 s; they go to the new file");
	int e = access_log_reopen(s->access_log);

	if (e)
		log_msg(LOG_ERR,
			"reopening the access log %s failed: %s; lines go on to the file it had open",
			config_show(s->cfg->access_log).s,
			access_log_strerror(e));
}

/* Wakes the workers whose configuration went stale (cfg_stale), once a
 * second; *at is when it last did. The poll timeout (milliseconds, at
 * most a second) is cut to the next time. */
static void wake_stale(struct orcd_server *s, int64_t *at, int *timeout)
{
	int64_t now = mono_ms(), left;
	bool any = false;

	for (unsigned k = 0; k < s->n_workers; k++)
		any |= atomic_load(&s->workers[k].cfg_stale);
	if (!any)
		return;
	if (now - *at >= 1000) {
		*at = now;
		for (unsigned k = 0; k < s->n_workers; k++)
			if (atomic_load(&s->workers[k].cfg_stale))
				wake(&s->workers[k], 1);
	}
	left = *at + 1000 - now;
	if (left < 0)
		left = 0;
	if (left < *timeout)
		*timeout = (int)left;
}

/* Wait for signals and worker exits, and serve the metrics page (m may
 * be NULL); returns the process exit code. */
static int main_loop(struct orcd_server *s, const struct cli_opts *o,
		     int sig_fd, int done_fd, struct metrics *m)
{
	struct watchdog wd;
	bool ready = false, start_warned = false;
	int64_t stale_at = mono_ms(), started = mono_ms();
	int rc = 0;

	watchdog_init(&wd, s->n_workers);
	while (!atomic_load(&s->stopping) || s->retiring ||
	       !all_done(s->workers, s->n_workers)) {
		struct pollfd p[2 + 17];
		unsigned np = 2;
		int timeout, mt;
		struct signalfd_siginfo si;
		uint64_t v;

		if (!ready && !atomic_load(&s->stopping) && all_turned(s)) {
			ready = true;
			log_msg(LOG_NOTICE,
				"serving %s with %u worker(s), engine %s",
				config_show(s->cfg->root).s, s->n_workers,
				s->engine->name);
			sd_notify(0, "READY=1");
			notify_status(s);
		} else if (!ready && !atomic_load(&s->stopping)) {
			warn_not_turned(s, started, &start_warned);
		}
		/* A signal waits (pending on sig_fd) until orcd serves; from
		 * the turn that found it serving on (which waits longer). */
		p[0] = (struct pollfd){ ready ? sig_fd : -1, POLLIN, 0 };
		p[1] = (struct pollfd){ done_fd, POLLIN, 0 };
		timeout = ready ? poll_timeout_ms(&wd) : 10;
		if (m) {
			np += metrics_pollfds(m, p + 2, 17);
			mt = metrics_timeout_ms(m);
			if (mt >= 0 && mt < timeout)
				timeout = mt;
		}
		wake_stale(s, &stale_at, &timeout);
		close_late_listeners(s);
		if (poll(p, np, timeout) < 0 && errno != EINTR) {
			log_msg(LOG_ERR, "poll: %s; stopping", strerror(errno));
			rc = 1;
			atomic_store(&s->stopping, true);
			wake_workers(s);
			break;
		}
		if (m)
			metrics_handle(m, p + 2, np - 2);
		if (ready) /* systemd arms the watchdog at READY=1 */
			watchdog_check(&wd, s);
		if (p[1].revents & POLLIN && read(done_fd, &v, sizeof(v)) > 0) {
			reap_retiring(s, false);
			if (!atomic_load(&s->stopping) &&
			    any_done(s->workers, s->n_workers)) {
				/* A worker gave up on its own: stop all. */
				rc = 1;
				atomic_store(&s->stopping, true);
				wake_workers(s);
			}
		}
		if (!(p[0].revents & POLLIN)) {
			if (ready)
				notify_status(s);
			continue;
		}
		if (read(sig_fd, &si, sizeof(si)) != sizeof(si))
			continue;
		switch (si.ssi_signo) {
		case SIGHUP:
			if (!atomic_load(&s->stopping))
				reload(s, o);
			break;
		case SIGUSR1:
			if (s->access_log)
				reopen_access_log(s);
			break;
		case SIGUSR2:
		case SIGWINCH:
			/* nginx's binary upgrade and its "stop the workers":
			 * one process here, so neither applies, and their
			 * default actions would kill the server. */
			log_msg(LOG_WARNING,
				"%s ignored: orcd has no binary upgrade or worker processes to stop",
				si.ssi_signo == SIGUSR2 ? "SIGUSR2" : "SIGWINCH");
			break;
		case SIGTERM:
		case SIGINT:
		case SIGQUIT:
			if (!atomic_load(&s->stopping)) {
				log_msg(LOG_NOTICE, "stopping: draining in-flight responses");
				sd_notify(0, "STOPPING=1");
				atomic_store(&s->stopping, true);
				wake_workers(s);
			}
			break;
		}
	}
	free(wd.seen);
	return s->failed ? 1 : rc;
}

/* Passed sockets when socket-activated (*metrics_passed: the one named
 * "metrics", or -1), else one SO_REUSEPORT set per worker. */
static int open_listeners(struct orcd_server *s, int *metrics_passed,
			  char *err, size_t cap)
{
	const struct orcd_config *c = s->cfg;
	int passed[ORCD_MAX_LISTEN];
	int n = listen_passed(passed, ORCD_MAX_LISTEN, metrics_passed, err,
			      cap);
	unsigned i, k;

	if (n < 0)
		return n;
	for (i = 0; n == 0 && i < c->n_listen; i++) {
		int e = listen_check_free(&c->listen[i], err, cap);

		if (e)
			return e;
	}
	for (k = 0; k < s->n_workers; k++) {
		struct orcd_worker *w = &s->workers[k];

		if (n > 0) {
			memcpy(w->listen_fds, passed, sizeof(int) * (size_t)n);
			w->n_listen = (unsigned)n;
			continue;
		}
		for (i = 0; i < c->n_listen; i++) {
			int fd = listen_open(&c->listen[i], err, cap);

			if (fd < 0)
				return fd;
			w->listen_fds[w->n_listen++] = fd;
		}
	}
	if (n > 0)
		log_msg(LOG_INFO, "using %d socket(s) passed by the service manager",
			n);
	s->socket_activated = n > 0;
	return 0;
}

static void close_listeners(struct orcd_server *s)
{
	unsigned i, k;

	for (k = 0; k < s->n_workers; k++) {
		struct orcd_worker *w = &s->workers[k];

		for (i = 0; i < w->n_listen; i++)
			/* Passed sockets are shared: close each once. */
			if (k == 0 || w->listen_fds[i] !=
					      s->workers[0].listen_fds[i])
				close(w->listen_fds[i]);
		w->n_listen = 0;
	}
}

/* What main_loop() reads from its signalfd. */
static void server_signals(sigset_t *set)
{
	sigemptyset(set);
	sigaddset(set, SIGHUP);
	sigaddset(set, SIGTERM);
	sigaddset(set, SIGINT);
	sigaddset(set, SIGUSR1);
	/* nginx's graceful stop; the default action cuts every response and
	 * drops the buffered log lines, with a core dump. */
	sigaddset(set, SIGQUIT);
	sigaddset(set, SIGUSR2);
	sigaddset(set, SIGWINCH);
}

void server_block_signals(void)
{
	sigset_t set;

	server_signals(&set);
	pthread_sigmask(SIG_BLOCK, &set, NULL);
}

int server_run(const struct cli_opts *o, struct orcd_config *cfg)
{
	struct orcd_server s = { .cfg = cfg, .done_fd = -1 };
	char err[CONFIG_ERR_MAX + 64], why[1024];
	sigset_t set;
	int sig_fd = -1, done_fd = -1, metrics_fd = -1, rc = 1;
	struct metrics *m = NULL;
	unsigned k, total, started = 0;
	bool have_cpus = false;
	int cpus_err = 0;

	pthread_mutex_init(&s.cfg_lock, NULL);
	s.test_view_fails = (unsigned)test_knob("ORCD_TEST_VIEW_FAILS");
	/* The CPUs this process may run on: how many workers `threads 0`
	 * means, and where worker_cpu_affinity auto pins them. */
	if (sched_getaffinity(0, sizeof(s.cpus), &s.cpus) == 0 &&
	    CPU_COUNT(&s.cpus)) {
		have_cpus = true;
	} else {
		cpus_err = errno ? errno : EINVAL;
		CPU_ZERO(&s.cpus);
	}
	/* Written back, as the engine is: a reload compares what runs
	 * with what its file asks for, `threads 0` counted the same way. */
	s.n_workers = cfg->threads = threads_here(&s, cfg->threads);
	s.workers = workers_new(s.n_workers);
	total = s.n_workers;
	if (!s.workers)
		goto out;
	for (k = 0; k < s.n_workers; k++)
		s.workers[k].wake_fd = -1;

	/* Blocked before any thread exists (main() did already), so only
	 * the signalfd sees them. */
	server_signals(&set);
	pthread_sigmask(SIG_BLOCK, &set, NULL);
	signal(SIGPIPE, SIG_IGN);
	/* An access log at RLIMIT_FSIZE fails its write (EFBIG), which the
	 * log reports, instead of killing the server. */
	signal(SIGXFSZ, SIG_IGN);
	sig_fd = signalfd(-1, &set, SFD_CLOEXEC | SFD_NONBLOCK);
	done_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	s.done_fd = done_fd;
	if (sig_fd < 0 || done_fd < 0) {
		log_msg(LOG_ERR, "signalfd/eventfd: %s", strerror(errno));
		goto out;
	}

	if (open_listeners(&s, &metrics_fd, err, sizeof(err))) {
		log_msg(LOG_ERR, "%s", err);
		goto out;
	}
	if (metrics_fd >= 0 && !cfg->metrics) {
		log_msg(LOG_WARNING,
			"socket activation: fd %d is named metrics but metrics is off; closing it (its socket unit still listens, and scrapes there wait unanswered: set metrics on, or stop and disable the unit)",
			metrics_fd);
		close(metrics_fd);
		metrics_fd = -1;
	} else if (cfg->metrics && metrics_fd < 0) {
		metrics_fd = listen_check_free(&cfg->metrics_listen, err,
					       sizeof(err));
		if (!metrics_fd)
			metrics_fd = listen_open(&cfg->metrics_listen, err,
						 sizeof(err));
		if (metrics_fd < 0) {
			log_msg(LOG_ERR, "metrics: %s", err);
			goto out;
		}
	}
	/* As root, like the listeners: a log only root may create or write
	 * (/var/log) stays writable through the open descriptor. */
	if (can_drop_privileges(cfg, err, sizeof(err))) {
		log_msg(LOG_ERR, "%s", err);
		goto out;
	}
	if (cfg->access_log) {
		int e = access_log_open(cfg->access_log, &s.access_log);

		if (e) {
			log_msg(LOG_ERR, "%saccess_log \"%s\": %s",
				config_where(cfg, "access_log", why,
					     sizeof(why)),
				config_show(cfg->access_log).s,
				access_log_strerror(e));
			goto out;
		}
	}
	if (drop_privileges(cfg, err, sizeof(err))) {
		log_msg(LOG_ERR, "%s", err);
		goto out;
	}
	warn_unrotatable_log(cfg);
	warn_unreloadable(cfg);
	warn_test_hooks();
	if (engine_select(cfg, &s.engine, why, sizeof(why))) {
		log_msg(LOG_ERR, "%s", why);
		goto out;
	}
	if (cfg->source)
		log_msg(LOG_INFO, "using configuration %s",
			config_show(cfg->source).s);
	else
		log_msg(LOG_INFO, "using the built-in defaults: no -c and no %s",
			ORCD_DEFAULT_CONF);
	log_msg(LOG_INFO, "%s", why);
	/* s->cfg says what runs, which a reload compares with: the engine
	 * auto chose, not "auto". */
	cfg->engine = s.engine->kind;
	if (cfg->cpu_affinity) {
		if (!have_cpus)
			log_msg(LOG_WARNING,
				"worker_cpu_affinity: reading the allowed CPUs: %s; not pinning",
				strerror(cpus_err));
		else
			s.pin_workers = true;
	}
	if (s.engine->setup && s.engine->setup(&s, err, sizeof(err))) {
		log_msg(LOG_ERR, "engine %s: %s", s.engine->name, err);
		goto out;
	}
	say_budget(&s, cfg);
	if (metrics_fd >= 0 &&
	    !(m = metrics_new(metrics_fd, s.engine->name, metrics_snapshot,
			      &s))) {
		log_msg(LOG_ERR, "metrics: out of memory");
		goto out;
	}
	started = start_workers(&s, s.workers, s.n_workers, cfg);
	if (started < s.n_workers) {
		/* The server could not start: exit 1 once those that did
		 * have stopped (orcd.8). */
		s.failed = true;
		atomic_store(&s.stopping, true);
		/* Only then: workers read n_workers while they set up (each
		 * one's share of the fd limit and of specific's range), and
		 * these are stopping anyway. */
		s.n_workers = started;
	}
	/* READY=1 comes from main_loop once every worker's loop runs. */
	wake_workers(&s);
	rc = main_loop(&s, o, sig_fd, done_fd, m);
	/* s.workers may be a later generation than the one started here. */
	for (k = 0; k < s.n_workers; k++) {
		pthread_join(s.workers[k].thread, NULL);
		if (s.workers[k].result < 0)
			rc = 1;
	}
	reap_retiring(&s, true);
	if (!rc)
		log_msg(LOG_NOTICE, "stopped");
out:
	s.n_workers = total;
	if (s.workers) {
		close_listeners(&s);
		for (k = 0; k < s.n_workers; k++) {
			if (s.workers[k].wake_fd >= 0)
				close(s.workers[k].wake_fd);
			if (s.workers[k].cfg)
				config_put(s.workers[k].cfg);
		}
	}
	access_log_close(s.access_log);
	if (sig_fd >= 0)
		close(sig_fd);
	if (done_fd >= 0)
		close(done_fd);
	metrics_free(m);
	if (metrics_fd >= 0)
		close(metrics_fd);
	free(s.workers);
	config_put(s.cfg);
	pthread_mutex_destroy(&s.cfg_lock);
	return rc;
}
