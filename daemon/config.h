/* SPDX-License-Identifier: MIT */
/*
 * Configuration: parsed into a new immutable struct, swapped whole on
 * reload. Nothing here changes after config_finalize().
 */
#ifndef ORCD_CONFIG_H
#define ORCD_CONFIG_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/socket.h>

#define ORCD_MAX_LISTEN 16
/* Room for any message the config_* functions write: a value shown in
 * one (escaped, up to 800 bytes) with its file:line and the reason. */
#define CONFIG_ERR_MAX 2048
/* Directives the file may hold (config.c checks its table fits). */
#define CONFIG_DIRECTIVES_MAX 40

enum orcd_engine_kind {
	ORCD_ENGINE_AUTO,
	ORCD_ENGINE_SPECIFIC,
	ORCD_ENGINE_DIRECT,
	ORCD_ENGINE_EPOLL,
};

struct orcd_listen {
	struct sockaddr_storage addr;
	socklen_t addrlen;
	char text[64]; /* as written: "127.0.0.1:8080", "[::1]:8080" */
};

struct orcd_config {
	char *source;			/* file it came from, or NULL */
	struct orcd_listen listen[ORCD_MAX_LISTEN];
	unsigned n_listen;		/* default: one, 127.0.0.1:8080 */
	char *root;			/* default "/var/www/html" */
	char *index;			/* default "index.html" */
	enum orcd_engine_kind engine;	/* default auto */
	unsigned threads;		/* default 1; 0 = one per CPU */
	bool cpu_affinity;		/* worker_cpu_affinity auto; default off */
	unsigned slots;			/* fd slots per worker, default 4096 */
	unsigned stat_cache;		/* cached lookups per worker, 0 off */
	unsigned accepts;		/* accepts in flight per worker, default 16 */
	unsigned batch_wait_us;		/* io_uring min wait, default 100; 0 off */
	unsigned max_connections;	/* per worker; 0 unset (conn_budget.h) */
	unsigned idle_timeout_ms;	/* keep-alive idle, default 60000 */
	unsigned header_timeout_ms;	/* whole head must arrive, default 10000 */
	unsigned send_timeout_ms;	/* no send progress, default 60000 */
	unsigned shutdown_timeout_ms;	/* a stop's drain, default 10000 */
	unsigned max_request_line;	/* default 8192 */
	unsigned max_header_bytes;	/* default 16384 */
	unsigned max_headers;		/* default 100 */
	unsigned buffer_size;		/* per-connection I/O buffer, default 65536 */
	char *access_log;		/* NULL = off, "-" or "stdout", or a path */
	char *user, *group;		/* NULL = don't change identity */
	char *mime_types;		/* default "/etc/mime.types" */
	char *default_type;		/* default "application/octet-stream" */
	bool metrics;			/* default off */
	struct orcd_listen metrics_listen; /* default 127.0.0.1:9180 */
	char *metrics_path;		/* default "/metrics" */
	/* The line of the file each directive was last set on (0: not
	 * by the file), by its place in config.c's table: config_where(). */
	unsigned line_of[CONFIG_DIRECTIVES_MAX];
	struct mime_table *mime;	/* loaded by config_finalize */
	int root_fd;			/* O_PATH|O_DIRECTORY, opened by config_finalize */
	/* A worker's view (config_view()): the settings above are borrowed
	 * from base, which it holds a reference to; only root_fd is its
	 * own. NULL in the configuration the server loaded. */
	struct orcd_config *base;
	/* A view's requests in flight, counted by its one worker thread
	 * only (server_cfg_pin()), so no request writes memory that
	 * another worker touches. */
	unsigned pins;
	/* References held by the server, the workers and their caches;
	 * taken when a worker adopts a configuration, never per request.
	 * config_put() of the last frees it. */
	_Atomic unsigned refs;
};

/* When a changed directive takes effect. */
enum config_apply {
	CONFIG_ON_RELOAD = 1,	/* the workers take it on SIGHUP */
	CONFIG_ON_NEW_WORKERS,	/* when a worker starts: at start-up, and by
				 * a reload that changes listen (it starts
				 * new workers) */
	CONFIG_ON_RESTART,	/* read once at start-up */
};

/* 0 for an unknown directive. */
enum config_apply config_directive_apply(const char *directive);

typedef void config_change_fn(void *ctx, const char *directive,
			      const char *was, const char *now);

/*
 * Calls fn once per directive whose value differs between `was` and
 * `now` and that a reload cannot apply (new_workers: the reload starts new
 * workers, so CONFIG_ON_NEW_WORKERS ones do apply), with both values as
 * text (strings escaped, "(unset)" for none). `engine auto` in `now`
 * differs from no engine `was` runs. Returns how many.
 */
unsigned config_unapplied(const struct orcd_config *was,
			  const struct orcd_config *now, bool new_workers,
			  config_change_fn *fn, void *ctx);

/*
 * Gives `now` the running value (`was`'s) of every directive that a
 * reload cannot apply (the ones config_unapplied() looks at, changed or
 * not), so that the configuration a reload installs says what runs and
 * the next reload compares with that, not with the file read last. Call
 * it before any worker takes a view of `now`: strings are replaced.
 * 0, or -ENOMEM with `now` holding part of it (discard it).
 */
int config_keep_running(const struct orcd_config *was,
			struct orcd_config *now, bool new_workers);

/* The name of the i-th directive, NULL past the last (for tests that
 * hold every directive to something). */
const char *config_directive_name(size_t i);

/* refs starts at 1 from config_new() and config_view(). */
struct orcd_config *config_get(struct orcd_config *c);
void config_put(struct orcd_config *c);

/*
 * One worker's view of base: the same settings, with a root_fd of its
 * own, a new open file description of the same directory (not a dup,
 * whose file would be shared): every openat2 under the root takes a
 * reference to that file when the fd table is shared, as it is between
 * threads, and one file shared by every worker makes its count a
 * cacheline all of them write per request. NULL and *err = -errno when
 * the directory cannot be opened again.
 */
struct orcd_config *config_view(struct orcd_config *base, int *err);

/* A config holding the defaults above. NULL on ENOMEM. */
struct orcd_config *config_new(void);
/* Frees regardless of refs (for configs never published). */
void config_free(struct orcd_config *c);

/*
 * Parse the file into c (on top of what c already holds). Syntax:
 *   # comment
 *   directive value...;      (nginx-like: one directive per statement,
 *                             terminated by ';', values whitespace-separated,
 *                             double quotes allowed)
 * `listen` may repeat (the first `listen` in a file replaces the default).
 * Returns 0, or -EINVAL / -errno with err = "FILE:LINE: message" (or
 * "FILE: message" when the file cannot be read). On error c may hold part
 * of the file: discard it.
 */
int config_load_file(struct orcd_config *c, const char *path, char *err,
		     size_t errcap);

/*
 * Set one directive from a string (used by the command line and by the
 * file parser). `replace_listen` makes a `listen` replace the list rather
 * than append. Returns 0, or -EINVAL (-ENOMEM) with err set, without a
 * location, as `directive "value": reason`.
 */
int config_set(struct orcd_config *c, const char *directive,
	       const char *value, bool replace_listen, char *err,
	       size_t errcap);

/*
 * Validate cross-field facts (root is a directory, limits sane, ...) and
 * load the mime table, open root_fd. Returns 0 or -errno with err set.
 */
int config_finalize(struct orcd_config *c, char *err, size_t errcap);

/*
 * A value as it may appear inside a one-line message: at most SHOW_MAX
 * bytes (long enough for the paths people use, so a message still says
 * which file), with quotes, backslashes and non-printable bytes escaped.
 */
#define SHOW_MAX 200
struct shown {
	char s[4 * SHOW_MAX + 4];
};
struct shown config_show(const char *v);

/* ms as a duration is written in the file: "500ms", "10s", "5m", "1h". */
void config_fmt_duration(char *buf, size_t cap, unsigned long long ms);

/* "FILE:LINE: " where the file set `directive`, else "": the prefix of a
 * message about its value found after the file was read. */
const char *config_where(const struct orcd_config *c, const char *directive,
			 char *buf, size_t cap);

/* The identity `user` and `group` name (each unset one: the process's
 * own). 0, or -ENOENT with err set, naming the directive's file:line. */
int config_identity(const struct orcd_config *c, uid_t *uid, gid_t *gid,
		    char *err, size_t errcap);

/* Become uid:gid, with gid as the only group (start-up's drop, and
 * --check-config's child that tries the root as the workers will open
 * it). 0 or -errno. */
int config_take_identity(uid_t uid, gid_t gid);

/* What start-up would refuse beyond config_finalize, without changing
 * anything (--check-config): user or group set when not running as
 * root, an unknown user or group, a root they cannot open, an access
 * log that cannot be opened for appending or created. 0 or -errno, err
 * set. */
int config_check_start(const struct orcd_config *c, char *err, size_t errcap);

/* The directory of the access log file (a path, not "-"): in dir, and
 * whether this process may create files there (0 or -errno). */
int config_access_log_dir(const struct orcd_config *c, char *dir,
			  size_t cap);

/* "auto", "specific", ... */
const char *config_engine_name(enum orcd_engine_kind k);

/*
 * Parse "127.0.0.1:8080", "[::1]:80", "*:8080", "8080" (the last two are
 * the IPv4 wildcard). Numeric addresses only, ports 1..65535. 0 or -EINVAL.
 */
int config_parse_listen(const char *s, struct orcd_listen *out);

#endif
