// SPDX-License-Identifier: MIT
/*
 * Configuration: defaults, one table of directives, an nginx-like file
 * parser, cross-field checks and reference counting.
 *
 * Every directive takes exactly one value and is described by one row of
 * `directives`; the file parser and the command line both go through
 * config_set(), so a value is checked the same way wherever it comes from.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <limits.h>
#include <netinet/in.h>
#include <pwd.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "config.h"
#include "log.h"
#include "mime.h"

#define KIB  1024u
#define MIB  (1024u * 1024u)
#define SEC  1000u
#define MIN  (60u * SEC)
#define HOUR (60u * MIN)

/* A config file larger than this is a mistake (wrong file, binary). */
#define CONFIG_MAX_FILE (1u << 20)

static void set_err(char *err, size_t cap, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

static void set_err(char *err, size_t cap, const char *fmt, ...)
{
	va_list ap;

	if (!err || !cap)
		return;
	va_start(ap, fmt);
	vsnprintf(err, cap, fmt, ap);
	va_end(ap);
}

struct shown config_show(const char *v)
{
	struct shown r;
	size_t o = 0, i;

	for (i = 0; v[i] && i < SHOW_MAX; i++) {
		unsigned char c = (unsigned char)v[i];

		if (c == '"' || c == '\\')
			o += (size_t)sprintf(r.s + o, "\\%c", c);
		else if (c < 0x20 || c >= 0x7f)
			o += (size_t)sprintf(r.s + o, "\\x%02x", c);
		else
			r.s[o++] = (char)c;
	}
	if (v[i])
		o += (size_t)sprintf(r.s + o, "...");
	r.s[o] = '\0';
	return r;
}

/* ---- values ---- */

/* Digits only: no sign, no blanks, no overflow. */
static int parse_num(const char *s, const char **end, unsigned long long *out)
{
	unsigned long long v = 0;
	const char *p = s;

	if (*p < '0' || *p > '9')
		return -EINVAL;
	for (; *p >= '0' && *p <= '9'; p++) {
		if (v > (ULLONG_MAX - 9) / 10)
			return -ERANGE;
		v = v * 10 + (unsigned)(*p - '0');
	}
	*end = p;
	*out = v;
	return 0;
}

struct unit {
	const char *suffix;
	unsigned long long mult;
};

static const struct unit duration_units[] = {
	{"", SEC}, {"ms", 1}, {"s", SEC}, {"m", MIN}, {"h", HOUR}, {NULL, 0},
};

static const struct unit size_units[] = {
	{"", 1}, {"k", KIB}, {"K", KIB}, {"m", MIB}, {"M", MIB}, {NULL, 0},
};

/* -EINVAL: not a number, -EDOM: unknown unit, -ERANGE: too large. */
static int parse_with_unit(const char *s, const struct unit *units,
			   unsigned long long *out)
{
	const char *end;
	unsigned long long v;
	int ret = parse_num(s, &end, &v);

	if (ret)
		return ret;
	for (; units->suffix; units++) {
		if (strcmp(end, units->suffix))
			continue;
		if (v > ULLONG_MAX / units->mult)
			return -ERANGE;
		*out = v * units->mult;
		return 0;
	}
	return -EDOM;
}

/* 1500 -> "1500ms", 60000 -> "1m": ranges read as they are written. */
void config_fmt_duration(char *buf, size_t cap, unsigned long long ms)
{
	if (!ms)
		snprintf(buf, cap, "0s");
	else if (ms % HOUR == 0)
		snprintf(buf, cap, "%lluh", ms / HOUR);
	else if (ms % MIN == 0)
		snprintf(buf, cap, "%llum", ms / MIN);
	else if (ms % SEC == 0)
		snprintf(buf, cap, "%llus", ms / SEC);
	else
		snprintf(buf, cap, "%llums", ms);
}

static void fmt_size(char *buf, size_t cap, unsigned long long b)
{
	if (b && b % MIB == 0)
		snprintf(buf, cap, "%llum", b / MIB);
	else if (b && b % KIB == 0)
		snprintf(buf, cap, "%lluk", b / KIB);
	else
		snprintf(buf, cap, "%llu", b);
}

/* ---- listen addresses ---- */

static int parse_port(const char *s, in_port_t *port, char *why, size_t cap)
{
	const char *end;
	unsigned long long v;

	if (parse_num(s, &end, &v) || *end) {
		set_err(why, cap, "bad port (expected 1..65535)");
		return -EINVAL;
	}
	if (v < 1 || v > 65535) {
		set_err(why, cap, "port out of range (1..65535)");
		return -EINVAL;
	}
	*port = htons((in_port_t)v);
	return 0;
}

static int parse_listen(const char *s, struct orcd_listen *out, char *why,
			size_t cap)
{
	struct orcd_listen l = {0};
	char host[INET6_ADDRSTRLEN + 2] = "";
	const char *port = s, *colon;
	bool v6 = s[0] == '[';
	in_port_t nport;
	size_t hlen;

	if (strlen(s) >= sizeof(l.text)) {
		set_err(why, cap, "too long (at most %zu characters)",
			sizeof(l.text) - 1);
		return -EINVAL;
	}
	if (v6) {
		const char *close = strchr(s, ']');

		if (!close || close[1] != ':') {
			set_err(why, cap, "expected [IPV6]:PORT");
			return -EINVAL;
		}
		hlen = (size_t)(close - s - 1);
		port = close + 2;
		if (hlen >= sizeof(host)) {
			set_err(why, cap, "bad IPv6 address");
			return -EINVAL;
		}
		memcpy(host, s + 1, hlen);
		host[hlen] = '\0';
	} else if ((colon = strrchr(s, ':'))) {
		hlen = (size_t)(colon - s);
		port = colon + 1;
		if (memchr(s, ':', hlen)) {
			set_err(why, cap,
				"IPv6 addresses need brackets: [ADDR]:PORT");
			return -EINVAL;
		}
		if (hlen >= sizeof(host)) {
			set_err(why, cap, "bad IPv4 address");
			return -EINVAL;
		}
		memcpy(host, s, hlen);
		host[hlen] = '\0';
		if (!hlen) {
			set_err(why, cap, "missing address before ':'");
			return -EINVAL;
		}
	}
	if (parse_port(port, &nport, why, cap))
		return -EINVAL;
	if (v6) {
		struct sockaddr_in6 *a6 = (struct sockaddr_in6 *)&l.addr;

		a6->sin6_family = AF_INET6;
		a6->sin6_port = nport;
		if (inet_pton(AF_INET6, host, &a6->sin6_addr) != 1) {
			set_err(why, cap, "bad IPv6 address");
			return -EINVAL;
		}
		/* Listeners are IPV6_V6ONLY (listen.c): a bind to a mapped
		 * address fails there with EINVAL. */
		if (IN6_IS_ADDR_V4MAPPED(&a6->sin6_addr)) {
			char v4[INET_ADDRSTRLEN];

			inet_ntop(AF_INET, &a6->sin6_addr.s6_addr[12], v4,
				  sizeof(v4));
			set_err(why, cap,
				"an IPv4-mapped address; write it as %s:%u",
				v4, ntohs(nport));
			return -EINVAL;
		}
		l.addrlen = sizeof(*a6);
	} else {
		struct sockaddr_in *a4 = (struct sockaddr_in *)&l.addr;

		a4->sin_family = AF_INET;
		a4->sin_port = nport;
		/* "PORT" and "*:PORT" are the IPv4 wildcard. */
		if (port == s || !strcmp(host, "*")) {
			a4->sin_addr.s_addr = htonl(INADDR_ANY);
		} else if (inet_pton(AF_INET, host, &a4->sin_addr) != 1) {
			set_err(why, cap,
				"bad IPv4 address (names are not resolved)");
			return -EINVAL;
		}
		l.addrlen = sizeof(*a4);
	}
	memcpy(l.text, s, strlen(s) + 1);
	*out = l;
	return 0;
}

int config_parse_listen(const char *s, struct orcd_listen *out)
{
	return parse_listen(s, out, NULL, 0);
}

/*
 * The same family, port and address; with `wildcard`, also where either
 * address is the wildcard, so that binding both collides unless both
 * sockets are SO_REUSEPORT (IPv6 listeners are IPV6_V6ONLY, so [::] and
 * 0.0.0.0 never do).
 */
static bool same_addr(const struct orcd_listen *a, const struct orcd_listen *b,
		      bool wildcard)
{
	const struct sockaddr_in *a4 = (const void *)&a->addr;
	const struct sockaddr_in *b4 = (const void *)&b->addr;
	const struct sockaddr_in6 *a6 = (const void *)&a->addr;
	const struct sockaddr_in6 *b6 = (const void *)&b->addr;

	if (a->addr.ss_family != b->addr.ss_family)
		return false;
	if (a->addr.ss_family == AF_INET)
		return a4->sin_port == b4->sin_port &&
		       (a4->sin_addr.s_addr == b4->sin_addr.s_addr ||
			(wildcard &&
			 (a4->sin_addr.s_addr == htonl(INADDR_ANY) ||
			  b4->sin_addr.s_addr == htonl(INADDR_ANY))));
	return a6->sin6_port == b6->sin6_port &&
	       (IN6_ARE_ADDR_EQUAL(&a6->sin6_addr, &b6->sin6_addr) ||
		(wildcard && (IN6_IS_ADDR_UNSPECIFIED(&a6->sin6_addr) ||
			      IN6_IS_ADDR_UNSPECIFIED(&b6->sin6_addr))));
}

/* ---- directives ---- */

struct directive;
typedef int set_fn(struct orcd_config *c, const struct directive *d,
		   const char *v, bool replace, char *why, size_t cap);

/* The value as a reload warning shows it: "256", "10s", "off". */
typedef void fmt_fn(const struct orcd_config *c, const struct directive *d,
		    char *buf, size_t cap);
/* to = from's value: a reload keeps what runs. 0 or -ENOMEM. */
typedef int keep_fn(struct orcd_config *to, const struct orcd_config *from,
		    const struct directive *d);
/* Whether a and b hold the same value, whole (not as fmt shows it). */
typedef bool same_fn(const struct orcd_config *a, const struct orcd_config *b,
		     const struct directive *d);

/* What a reload needs of a value it may be unable to apply. */
struct running {
	fmt_fn *fmt;
	keep_fn *keep;
	same_fn *same;
	size_t size; /* of the field, for keep_plain */
};

struct directive {
	const char *name;
	set_fn *set;
	size_t off; /* of the field in struct orcd_config, where one applies */
	unsigned long long min, max;
	/* When a change takes effect; every row says (0 is no value, and a
	 * unit test holds every directive to having one). */
	enum config_apply apply;
	/* Required unless apply is CONFIG_ON_RELOAD. */
	const struct running *running;
};

#define FIELD(f)      offsetof(struct orcd_config, f)
#define UINT_AT(c, d) ((unsigned *)(void *)((char *)(c) + (d)->off))
#define STR_AT(c, d)  ((char **)(void *)((char *)(c) + (d)->off))

static int replace_str(char **dst, const char *v, char *why, size_t cap)
{
	char *s = NULL;

	if (v) {
		s = strdup(v);
		if (!s) {
			set_err(why, cap, "out of memory");
			return -ENOMEM;
		}
	}
	free(*dst);
	*dst = s;
	return 0;
}

static int set_uint(struct orcd_config *c, const struct directive *d,
		    const char *v, bool replace, char *why, size_t cap)
{
	unsigned long long n;
	const char *end;
	int ret = parse_num(v, &end, &n);

	(void)replace;
	if (ret == -EINVAL || (!ret && *end)) {
		set_err(why, cap, "expected a whole number");
		return -EINVAL;
	}
	if (ret || n < d->min || n > d->max) {
		set_err(why, cap, "out of range (%llu..%llu)", d->min, d->max);
		return -EINVAL;
	}
	*UINT_AT(c, d) = (unsigned)n;
	return 0;
}

static int set_duration(struct orcd_config *c, const struct directive *d,
			const char *v, bool replace, char *why, size_t cap)
{
	unsigned long long ms;
	int ret = parse_with_unit(v, duration_units, &ms);
	char lo[24], hi[24];

	(void)replace;
	if (ret == -EINVAL) {
		set_err(why, cap, "expected a duration such as 500ms, 30s, 5m");
		return -EINVAL;
	}
	if (ret == -EDOM && strchr(v, '.')) {
		set_err(why, cap, "a whole number only (1500ms, not 1.5s)");
		return -EINVAL;
	}
	if (ret == -EDOM) {
		set_err(why, cap, "unknown unit (use ms, s, m or h)");
		return -EINVAL;
	}
	if (ret || ms < d->min || ms > d->max) {
		config_fmt_duration(lo, sizeof(lo), d->min);
		config_fmt_duration(hi, sizeof(hi), d->max);
		set_err(why, cap, "out of range (%s..%s)", lo, hi);
		return -EINVAL;
	}
	*UINT_AT(c, d) = (unsigned)ms;
	return 0;
}

static int set_size(struct orcd_config *c, const struct directive *d,
		    const char *v, bool replace, char *why, size_t cap)
{
	unsigned long long n;
	int ret = parse_with_unit(v, size_units, &n);
	char lo[24], hi[24];

	(void)replace;
	if (ret == -EINVAL) {
		set_err(why, cap, "expected a size such as 8192, 16k, 1m");
		return -EINVAL;
	}
	if (ret == -EDOM && strchr(v, '.')) {
		set_err(why, cap, "a whole number only (1536k, not 1.5m)");
		return -EINVAL;
	}
	if (ret == -EDOM) {
		set_err(why, cap, "unknown unit (use k or m)");
		return -EINVAL;
	}
	if (ret || n < d->min || n > d->max) {
		fmt_size(lo, sizeof(lo), d->min);
		fmt_size(hi, sizeof(hi), d->max);
		set_err(why, cap, "out of range (%s..%s)", lo, hi);
		return -EINVAL;
	}
	*UINT_AT(c, d) = (unsigned)n;
	return 0;
}

static int set_string(struct orcd_config *c, const struct directive *d,
		      const char *v, bool replace, char *why, size_t cap)
{
	(void)replace;
	if (!*v) {
		set_err(why, cap, "empty value");
		return -EINVAL;
	}
	return replace_str(STR_AT(c, d), v, why, cap);
}

/* One file name looked up in each directory. */
static int set_index(struct orcd_config *c, const struct directive *d,
		     const char *v, bool replace, char *why, size_t cap)
{
	if (strchr(v, '/') || !strcmp(v, ".") || !strcmp(v, "..")) {
		set_err(why, cap, "expected a file name without '/'");
		return -EINVAL;
	}
	/* Dotfiles are never served, so a dot index could never be. */
	if (v[0] == '.') {
		set_err(why, cap, "dotfiles are never served");
		return -EINVAL;
	}
	return set_string(c, d, v, replace, why, cap);
}

/* Goes into Content-Type as it is, so it must look like a media type. */
static int set_media_type(struct orcd_config *c, const struct directive *d,
			  const char *v, bool replace, char *why, size_t cap)
{
	if (!mime_type_valid(v, strlen(v), true)) {
		set_err(why, cap, "expected a media type such as text/plain");
		return -EINVAL;
	}
	return set_string(c, d, v, replace, why, cap);
}

static int set_uri_path(struct orcd_config *c, const struct directive *d,
			const char *v, bool replace, char *why, size_t cap)
{
	if (v[0] != '/' || strpbrk(v, " ?#%")) {
		set_err(why, cap,
			"expected an absolute path such as /metrics "
			"(no spaces, '?', '#' or '%%')");
		return -EINVAL;
	}
	return set_string(c, d, v, replace, why, cap);
}

static int set_access_log(struct orcd_config *c, const struct directive *d,
			  const char *v, bool replace, char *why, size_t cap)
{
	if (!strcmp(v, "off"))
		return replace_str(STR_AT(c, d), NULL, why, cap);
	return set_string(c, d, v, replace, why, cap);
}

static const char *const engine_names[] = {
	[ORCD_ENGINE_AUTO] = "auto",
	[ORCD_ENGINE_SPECIFIC] = "specific",
	[ORCD_ENGINE_DIRECT] = "direct",
	[ORCD_ENGINE_EPOLL] = "epoll",
};

const char *config_engine_name(enum orcd_engine_kind k)
{
	if ((unsigned)k >= sizeof(engine_names) / sizeof(engine_names[0]))
		return "?";
	return engine_names[k];
}

static int set_engine(struct orcd_config *c, const struct directive *d,
		      const char *v, bool replace, char *why, size_t cap)
{
	(void)d;
	(void)replace;
	for (size_t i = 0; i < sizeof(engine_names) / sizeof(engine_names[0]);
	     i++) {
		if (!strcmp(v, engine_names[i])) {
			c->engine = (enum orcd_engine_kind)i;
			return 0;
		}
	}
	set_err(why, cap, "expected auto, specific, direct or epoll");
	return -EINVAL;
}

/* A directive of two words: *out = (v is yes). */
static int set_switch(const char *v, const char *yes, const char *no, bool *out,
		      char *why, size_t cap)
{
	if (strcmp(v, yes) && strcmp(v, no)) {
		set_err(why, cap, "expected %s or %s", yes, no);
		return -EINVAL;
	}
	*out = !strcmp(v, yes);
	return 0;
}

static int set_metrics(struct orcd_config *c, const struct directive *d,
		       const char *v, bool replace, char *why, size_t cap)
{
	(void)d;
	(void)replace;
	return set_switch(v, "on", "off", &c->metrics, why, cap);
}

static int set_cpu_affinity(struct orcd_config *c, const struct directive *d,
			    const char *v, bool replace, char *why, size_t cap)
{
	(void)d;
	(void)replace;
	return set_switch(v, "auto", "off", &c->cpu_affinity, why, cap);
}

static int set_listen(struct orcd_config *c, const struct directive *d,
		      const char *v, bool replace, char *why, size_t cap)
{
	struct orcd_listen l;
	unsigned n = replace ? 0 : c->n_listen;

	(void)d;
	if (parse_listen(v, &l, why, cap))
		return -EINVAL;
	for (unsigned i = 0; i < n; i++) {
		if (same_addr(&c->listen[i], &l, false)) {
			set_err(why, cap, "same address as listen \"%s\"",
				c->listen[i].text);
			return -EINVAL;
		}
	}
	if (n >= ORCD_MAX_LISTEN) {
		set_err(why, cap, "too many listen addresses (at most %d)",
			ORCD_MAX_LISTEN);
		return -EINVAL;
	}
	c->listen[n] = l;
	c->n_listen = n + 1;
	return 0;
}

static int set_metrics_listen(struct orcd_config *c, const struct directive *d,
			      const char *v, bool replace, char *why,
			      size_t cap)
{
	(void)d;
	(void)replace;
	return parse_listen(v, &c->metrics_listen, why, cap);
}

/* Formats of the values that a reload may have to refuse. */
static void fmt_uint(const struct orcd_config *c, const struct directive *d,
		     char *buf, size_t cap)
{
	snprintf(buf, cap, "%u", *UINT_AT(c, d));
}

static void fmt_str(const struct orcd_config *c, const struct directive *d,
		    char *buf, size_t cap)
{
	const char *v = *STR_AT(c, d);

	snprintf(buf, cap, "%s", v ? config_show(v).s : "(unset)");
}

static void fmt_switch(const struct orcd_config *c, const struct directive *d,
		       char *buf, size_t cap)
{
	bool on = *(const bool *)(const void *)((const char *)c + d->off);

	snprintf(buf, cap, "%s", on ? "on" : "off");
}

static void fmt_affinity(const struct orcd_config *c, const struct directive *d,
			 char *buf, size_t cap)
{
	(void)d;
	snprintf(buf, cap, "%s", c->cpu_affinity ? "auto" : "off");
}

static void fmt_engine(const struct orcd_config *c, const struct directive *d,
		       char *buf, size_t cap)
{
	(void)d;
	snprintf(buf, cap, "%s", config_engine_name(c->engine));
}

static void fmt_listen(const struct orcd_config *c, const struct directive *d,
		       char *buf, size_t cap)
{
	const struct orcd_listen *l = (const void *)((const char *)c + d->off);

	snprintf(buf, cap, "%s", l->text);
}

/*
 * Keeping a value copies it whole: the text a warning shows is cut and
 * escaped (config_show()), and "(unset)" is no value a set function
 * takes, so formatting and setting again would not give back what runs.
 * A value without pointers is its bytes.
 */
static int keep_plain(struct orcd_config *to, const struct orcd_config *from,
		      const struct directive *d)
{
	memcpy((char *)to + d->off, (const char *)from + d->off,
	       d->running->size);
	return 0;
}

/* Each config owns its strings: a copy, never a shared pointer. */
static int keep_str(struct orcd_config *to, const struct orcd_config *from,
		    const struct directive *d)
{
	return replace_str(STR_AT(to, d), *STR_AT(from, d), NULL, 0);
}

/*
 * Compared whole, like keep: two strings that differ only past what
 * config_show() keeps format alike, yet a reload cannot apply the change.
 */
static bool same_plain(const struct orcd_config *a, const struct orcd_config *b,
		       const struct directive *d)
{
	return !memcmp((const char *)a + d->off, (const char *)b + d->off,
		       d->running->size);
}

static bool same_str(const struct orcd_config *a, const struct orcd_config *b,
		     const struct directive *d)
{
	const char *x = *STR_AT(a, d), *y = *STR_AT(b, d);

	return x == y || (x && y && !strcmp(x, y));
}

/* The same address and port, however written (127.0.0.1:9180 and
 * 127.0.0.1:09180 bind the same socket). */
static bool same_listen(const struct orcd_config *a,
			const struct orcd_config *b, const struct directive *d)
{
	const struct orcd_listen *x = (const void *)((const char *)a + d->off);
	const struct orcd_listen *y = (const void *)((const char *)b + d->off);

	return same_addr(x, y, false);
}

static const struct running run_uint = {fmt_uint, keep_plain, same_plain,
					sizeof(unsigned)};
static const struct running run_str = {fmt_str, keep_str, same_str, 0};
static const struct running run_switch = {fmt_switch, keep_plain, same_plain,
					  sizeof(bool)};
static const struct running run_affinity = {fmt_affinity, keep_plain,
					    same_plain, sizeof(bool)};
static const struct running run_engine = {fmt_engine, keep_plain, same_plain,
					  sizeof(enum orcd_engine_kind)};
static const struct running run_listen = {fmt_listen, keep_plain, same_listen,
					  sizeof(struct orcd_listen)};

#define RELOAD	    CONFIG_ON_RELOAD, NULL
#define NEW_WORKERS CONFIG_ON_NEW_WORKERS
#define RESTART	    CONFIG_ON_RESTART

static const struct directive directives[] = {
	/* listen: a reload applies it (server.c starts new workers). */
	{"listen", set_listen, 0, 0, 0, RELOAD},
	{"root", set_string, FIELD(root), 0, 0, RELOAD},
	{"index", set_index, FIELD(index), 0, 0, RELOAD},
	{"engine", set_engine, FIELD(engine), 0, 0, RESTART, &run_engine},
	{"threads", set_uint, FIELD(threads), 0, 256, RESTART, &run_uint},
	{"worker_cpu_affinity", set_cpu_affinity, FIELD(cpu_affinity), 0, 0,
	 RESTART, &run_affinity},
	{"slots", set_uint, FIELD(slots), 16, 1048576, NEW_WORKERS, &run_uint},
	{"stat_cache", set_uint, FIELD(stat_cache), 0, 1048576, RELOAD},
	{"accepts", set_uint, FIELD(accepts), 1, 1024, NEW_WORKERS, &run_uint},
	{"batch_wait_us", set_uint, FIELD(batch_wait_us), 0, 1000, NEW_WORKERS,
	 &run_uint},
	{"max_connections", set_uint, FIELD(max_connections), 1, 1048576,
	 RELOAD},
	{"idle_timeout", set_duration, FIELD(idle_timeout_ms), 1, 24 * HOUR,
	 RELOAD},
	{"header_timeout", set_duration, FIELD(header_timeout_ms), 1, 24 * HOUR,
	 RELOAD},
	{"send_timeout", set_duration, FIELD(send_timeout_ms), 1, 24 * HOUR,
	 RELOAD},
	/* Read as a stop begins; retired workers keep their own value. */
	{"worker_shutdown_timeout", set_duration, FIELD(shutdown_timeout_ms), 0,
	 24 * HOUR, RELOAD},
	{"max_request_line", set_size, FIELD(max_request_line), 64, 16 * MIB,
	 RELOAD},
	{"max_header_bytes", set_size, FIELD(max_header_bytes), 256, 16 * MIB,
	 RELOAD},
	{"max_headers", set_uint, FIELD(max_headers), 1, 65536, RELOAD},
	{"buffer_size", set_size, FIELD(buffer_size), 4 * KIB, 16 * MIB,
	 RELOAD},
	/* Opened once, before privileges are dropped; SIGUSR1 reopens it. */
	{"access_log", set_access_log, FIELD(access_log), 0, 0, RESTART,
	 &run_str},
	{"user", set_string, FIELD(user), 0, 0, RESTART, &run_str},
	{"group", set_string, FIELD(group), 0, 0, RESTART, &run_str},
	{"mime_types", set_string, FIELD(mime_types), 0, 0, RELOAD},
	{"default_type", set_media_type, FIELD(default_type), 0, 0, RELOAD},
	{"metrics", set_metrics, FIELD(metrics), 0, 0, RESTART, &run_switch},
	{"metrics_listen", set_metrics_listen, FIELD(metrics_listen), 0, 0,
	 RESTART, &run_listen},
	{"metrics_path", set_uri_path, FIELD(metrics_path), 0, 0, RELOAD},
};

_Static_assert(sizeof(directives) / sizeof(directives[0]) <=
		       CONFIG_DIRECTIVES_MAX,
	       "orcd_config.line_of has a place for every directive");

static const struct directive *find_directive(const char *name)
{
	for (size_t i = 0; i < sizeof(directives) / sizeof(directives[0]); i++)
		if (!strcmp(directives[i].name, name))
			return &directives[i];
	return NULL;
}

static int apply(struct orcd_config *c, const struct directive *d,
		 const char *value, bool replace_listen, char *err,
		 size_t errcap)
{
	char why[160];
	int ret;

	/* A control byte in a value is a typo or an attempt at header
	 * injection (default_type); no directive wants one. */
	for (const char *p = value; *p; p++) {
		if ((unsigned char)*p < 0x20 || *p == 0x7f) {
			set_err(err, errcap,
				"%s \"%s\": control character in value",
				d->name, config_show(value).s);
			return -EINVAL;
		}
	}
	why[0] = '\0';
	ret = d->set(c, d, value, replace_listen, why, sizeof(why));
	if (ret)
		set_err(err, errcap, "%s \"%s\": %s", d->name,
			config_show(value).s, why);
	return ret;
}

int config_set(struct orcd_config *c, const char *directive, const char *value,
	       bool replace_listen, char *err, size_t errcap)
{
	const struct directive *d = find_directive(directive);

	int ret;

	if (!d) {
		set_err(err, errcap, "unknown directive \"%s\"",
			config_show(directive).s);
		return -EINVAL;
	}
	ret = apply(c, d, value, replace_listen, err, errcap);
	if (!ret)
		c->line_of[d - directives] = 0; /* not the file's any more */
	return ret;
}

const char *config_where(const struct orcd_config *c, const char *directive,
			 char *buf, size_t cap)
{
	const struct directive *d = find_directive(directive);
	unsigned line = d ? c->line_of[d - directives] : 0;

	if (!cap)
		return "";
	if (!line || !c->source)
		buf[0] = '\0';
	else
		snprintf(buf, cap, "%s:%u: ", config_show(c->source).s, line);
	return buf;
}

int config_identity(const struct orcd_config *c, uid_t *uid, gid_t *gid,
		    char *err, size_t errcap)
{
	char at[PATH_MAX + 16];

	*uid = getuid();
	*gid = getgid();
	if (c->user) {
		struct passwd *pw = getpwnam(c->user);

		if (!pw) {
			set_err(err, errcap, "%suser %s: no such user",
				config_where(c, "user", at, sizeof(at)),
				config_show(c->user).s);
			return -ENOENT;
		}
		*uid = pw->pw_uid;
		*gid = pw->pw_gid;
	}
	if (c->group) {
		struct group *gr = getgrnam(c->group);

		if (!gr) {
			set_err(err, errcap, "%sgroup %s: no such group",
				config_where(c, "group", at, sizeof(at)),
				config_show(c->group).s);
			return -ENOENT;
		}
		*gid = gr->gr_gid;
	}
	return 0;
}

int config_access_log_dir(const struct orcd_config *c, char *dir,
			  size_t cap)
{
	const char *slash = strrchr(c->access_log, '/');

	if (!slash)
		snprintf(dir, cap, ".");
	else if (slash == c->access_log)
		snprintf(dir, cap, "/");
	else
		snprintf(dir, cap, "%.*s", (int)(slash - c->access_log),
			 c->access_log);
	return access(dir, W_OK | X_OK) ? -errno : 0;
}

int config_take_identity(uid_t uid, gid_t gid)
{
	if (setgroups(1, &gid) || setgid(gid) || setuid(uid))
		return -errno;
	return 0;
}

/* Whether uid:gid may open the root as each worker does after the drop
 * (config_view), tried in a child that takes them. 0, or -errno with
 * *step naming what failed: NULL where it was the open. */
static int root_opens_as(const struct orcd_config *c, uid_t uid, gid_t gid,
			 const char **step)
{
	struct sigaction dfl = { .sa_handler = SIG_DFL }, was;
	int p[2], status, res[2] = { 0, ECHILD }, e;
	ssize_t n;
	pid_t pid;

	*step = "a pipe";
	if (pipe2(p, O_CLOEXEC))
		return -errno;
	/* An inherited SIG_IGN would have the kernel reap the child. */
	sigaction(SIGCHLD, &dfl, &was);
	pid = fork();
	if (pid == 0) {
		/* {1, errno}: taking the identity failed; {2, errno}: the
		 * open; {2, 0}: it opened. */
		res[0] = 1;
		res[1] = -config_take_identity(uid, gid);
		if (!res[1]) {
			res[0] = 2;
			if (openat(c->root_fd, ".",
				   O_PATH | O_DIRECTORY | O_CLOEXEC) < 0)
				res[1] = errno;
		}
		_exit(write(p[1], res, sizeof(res)) == sizeof(res) ? 0 : 1);
	}
	e = errno;
	close(p[1]);
	if (pid < 0) {
		close(p[0]);
		sigaction(SIGCHLD, &was, NULL);
		*step = "fork";
		return -e;
	}
	do
		n = read(p[0], res, sizeof(res));
	while (n < 0 && errno == EINTR);
	close(p[0]);
	while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
		;
	sigaction(SIGCHLD, &was, NULL);
	if (n != sizeof(res) || res[0] < 1 || res[0] > 2) {
		*step = "the child that tried";
		return -ECHILD;
	}
	*step = res[0] == 1 ? "taking its identity" : NULL;
	return -res[1];
}

int config_check_start(const struct orcd_config *c, char *err, size_t errcap)
{
	char at[PATH_MAX + 16], dir[PATH_MAX];
	uid_t uid;
	gid_t gid;
	int fd, ret;

	/* As start-up refuses it, before the access log (server.c). */
	if ((c->user || c->group) && geteuid() != 0) {
		set_err(err, errcap, "%suser/group set but not started as root",
			config_where(c, c->user ? "user" : "group", at,
				     sizeof(at)));
		return -EPERM;
	}
	ret = config_identity(c, &uid, &gid, err, errcap);
	if (ret)
		return ret;
	/* Start-up finds this only in its workers, after the drop. */
	if ((c->user || c->group) && c->root_fd >= 0) {
		const char *who = c->user ? "user" : "group", *step;

		ret = root_opens_as(c, uid, gid, &step);
		if (ret && !step)
			set_err(err, errcap,
				"%sroot %s: the %s orcd runs as cannot open it: %s",
				config_where(c, who, at, sizeof(at)),
				config_show(c->root).s, who, strerror(-ret));
		else if (ret)
			set_err(err, errcap,
				"%sopening the root as the %s orcd runs as: %s: %s",
				config_where(c, who, at, sizeof(at)), who, step,
				strerror(-ret));
		if (ret)
			return ret;
	}
	if (!c->access_log || !strcmp(c->access_log, "-") ||
	    !strcmp(c->access_log, "stdout"))
		return ret;
	/* Opened as start-up opens it, less O_CREAT: nothing changes (and
	 * a FIFO with no reader is ENXIO, not a wait). */
	fd = open(c->access_log, O_WRONLY | O_APPEND | O_CLOEXEC | O_NONBLOCK);
	if (fd >= 0) {
		close(fd);
		return 0;
	}
	ret = -errno;
	if (ret == -ENOENT) {
		/* Start-up would create it: its directory must take it. */
		ret = config_access_log_dir(c, dir, sizeof(dir));
	}
	if (ret)
		set_err(err, errcap, "%saccess_log \"%s\": %s",
			config_where(c, "access_log", at, sizeof(at)),
			config_show(c->access_log).s, access_log_strerror(ret));
	return ret;
}

enum config_apply config_directive_apply(const char *directive)
{
	const struct directive *d = find_directive(directive);

	return d ? d->apply : (enum config_apply)0;
}

const char *config_directive_name(size_t i)
{
	return i < sizeof(directives) / sizeof(directives[0]) ?
		       directives[i].name :
		       NULL;
}

static bool reload_applies(const struct directive *d, bool new_workers)
{
	return d->apply == CONFIG_ON_RELOAD ||
	       (d->apply == CONFIG_ON_NEW_WORKERS && new_workers);
}

unsigned config_unapplied(const struct orcd_config *was,
			  const struct orcd_config *now, bool new_workers,
			  config_change_fn *fn, void *ctx)
{
	char a[4 * SHOW_MAX + 4], b[4 * SHOW_MAX + 4];
	unsigned n = 0;

	for (size_t i = 0; i < sizeof(directives) / sizeof(directives[0]);
	     i++) {
		const struct directive *d = &directives[i];

		if (reload_applies(d, new_workers))
			continue;
		/* "auto" asks for nothing the running engine is not. */
		if (d->running == &run_engine &&
		    now->engine == ORCD_ENGINE_AUTO)
			continue;
		if (d->running->same(was, now, d))
			continue;
		/* Formatted for the message only: config_show() cuts long
		 * ones. */
		d->running->fmt(was, d, a, sizeof(a));
		d->running->fmt(now, d, b, sizeof(b));
		fn(ctx, d->name, a, b);
		n++;
	}
	return n;
}

int config_keep_running(const struct orcd_config *was, struct orcd_config *now,
			bool new_workers)
{
	for (size_t i = 0; i < sizeof(directives) / sizeof(directives[0]);
	     i++) {
		const struct directive *d = &directives[i];
		int ret;

		if (reload_applies(d, new_workers))
			continue;
		ret = d->running->keep(now, was, d);
		if (ret)
			return ret;
	}
	return 0;
}

/* ---- life cycle ---- */

struct orcd_config *config_new(void)
{
	struct orcd_config *c = calloc(1, sizeof(*c));

	if (!c)
		return NULL;
	c->root_fd = -1;
	atomic_init(&c->refs, 1);
	c->n_listen = 1;
	parse_listen("127.0.0.1:8080", &c->listen[0], NULL, 0);
	parse_listen("127.0.0.1:9180", &c->metrics_listen, NULL, 0);
	c->engine = ORCD_ENGINE_AUTO;
	c->threads = 1;
	c->slots = 4096;
	c->stat_cache = 8192;
	c->accepts = 16;
	c->batch_wait_us = 100;
	/* 0: unset, CONN_BUDGET_DEFAULT_MAX within what slots hold. */
	c->max_connections = 0;
	c->idle_timeout_ms = 60 * SEC;
	c->header_timeout_ms = 10 * SEC;
	c->send_timeout_ms = 60 * SEC;
	c->shutdown_timeout_ms = 10 * SEC;
	c->max_request_line = 8192;
	c->max_header_bytes = 16384;
	c->max_headers = 100;
	c->buffer_size = 65536;
	c->metrics = false;
	c->root = strdup("/var/www/html");
	c->index = strdup("index.html");
	c->mime_types = strdup("/etc/mime.types");
	c->default_type = strdup("application/octet-stream");
	c->metrics_path = strdup("/metrics");
	if (!c->root || !c->index || !c->mime_types || !c->default_type ||
	    !c->metrics_path) {
		config_free(c);
		return NULL;
	}
	return c;
}

void config_free(struct orcd_config *c)
{
	if (!c)
		return;
	if (c->root_fd >= 0)
		close(c->root_fd);
	if (c->base) { /* a view: everything else is base's */
		config_put(c->base);
		free(c);
		return;
	}
	mime_free(c->mime);
	free(c->source);
	free(c->root);
	free(c->index);
	free(c->access_log);
	free(c->user);
	free(c->group);
	free(c->mime_types);
	free(c->default_type);
	free(c->metrics_path);
	free(c);
}

struct orcd_config *config_get(struct orcd_config *c)
{
	atomic_fetch_add_explicit(&c->refs, 1, memory_order_relaxed);
	return c;
}

void config_put(struct orcd_config *c)
{
	/* acq_rel: the freeing thread must see every other holder's
	 * last use of the config before it frees it. */
	if (c &&
	    atomic_fetch_sub_explicit(&c->refs, 1, memory_order_acq_rel) == 1)
		config_free(c);
}

struct orcd_config *config_view(struct orcd_config *base, int *err)
{
	struct orcd_config *v;
	int fd;

	if (base->base)
		base = base->base;
	v = malloc(sizeof(*v));
	if (!v) {
		*err = -ENOMEM;
		return NULL;
	}
	fd = openat(base->root_fd, ".", O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0) {
		*err = -errno;
		free(v);
		return NULL;
	}
	memcpy(v, base, sizeof(*v));
	v->root_fd = fd;
	v->base = config_get(base);
	v->pins = 0;
	atomic_init(&v->refs, 1);
	return v;
}

/* "FILE:LINE: " of the first of two directives the file set, else "". */
static const char *where_either(const struct orcd_config *c, const char *a,
				const char *b, char *buf, size_t cap)
{
	const char *w = config_where(c, a, buf, cap);

	return *w ? w : config_where(c, b, buf, cap);
}

static int check_limits(const struct orcd_config *c, char *err, size_t cap)
{
	char at[PATH_MAX + 16];

	if (c->max_request_line > c->max_header_bytes) {
		set_err(err, cap,
			"%smax_request_line (%u) is larger than "
			"max_header_bytes (%u)",
			where_either(c, "max_request_line", "max_header_bytes",
				     at, sizeof(at)),
			c->max_request_line, c->max_header_bytes);
		return -EINVAL;
	}
	if (c->max_header_bytes > c->buffer_size) {
		set_err(err, cap,
			"%smax_header_bytes (%u) is larger than buffer_size (%u): "
			"a request head must fit in the buffer",
			where_either(c, "max_header_bytes", "buffer_size", at,
				     sizeof(at)),
			c->max_header_bytes, c->buffer_size);
		return -EINVAL;
	}
	if (!c->metrics)
		return 0;
	for (unsigned i = 0; i < c->n_listen; i++) {
		/* Start-up binds the metrics address only where nothing
		 * holds it (listen_check_free), so it would fail there. */
		if (same_addr(&c->listen[i], &c->metrics_listen, true)) {
			set_err(err, cap,
				"%smetrics_listen \"%s\" overlaps listen \"%s\"",
				where_either(c, "metrics_listen", "listen", at,
					     sizeof(at)),
				c->metrics_listen.text, c->listen[i].text);
			return -EINVAL;
		}
	}
	return 0;
}

static int read_all(int fd, char **out, size_t *len)
{
	size_t n = 0, cap = 0;
	char *buf = NULL, *nb;
	ssize_t r;

	for (;;) {
		if (n == cap) {
			if (cap > CONFIG_MAX_FILE) {
				free(buf);
				return -EFBIG;
			}
			cap = cap ? cap * 2 : 4096;
			nb = realloc(buf, cap + 1);
			if (!nb) {
				free(buf);
				return -ENOMEM;
			}
			buf = nb;
		}
		r = read(fd, buf + n, cap - n);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0) {
			int ret = -errno;

			free(buf);
			return ret;
		}
		if (r == 0)
			break;
		n += (size_t)r;
	}
	if (n > CONFIG_MAX_FILE) {
		free(buf);
		return -EFBIG;
	}
	buf[n] = '\0';
	*out = buf;
	*len = n;
	return 0;
}

/*
 * A whole regular file of at most CONFIG_MAX_FILE bytes and no NUL byte
 * into memory, NUL-terminated: the configuration or the mime_types
 * table. Opened without waiting and refused unless regular: a FIFO would
 * hold a reload (and the metrics page, the watchdog) until some writer
 * came, a device like /dev/zero would never end. 0, or -errno with why[]
 * saying what is wrong (and *line the NUL byte's line, else 0).
 */
static int read_text(const char *path, char **out, size_t *len, char *why,
		     size_t whycap, unsigned *line)
{
	struct stat st;
	int fd, ret;

	*line = 0;
	fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
	if (fd < 0) {
		ret = -errno;
		snprintf(why, whycap, "%s", strerror(-ret));
		return ret;
	}
	if (fstat(fd, &st) < 0) {
		ret = -errno;
		snprintf(why, whycap, "%s", strerror(-ret));
		close(fd);
		return ret;
	}
	if (!S_ISREG(st.st_mode)) {
		ret = S_ISDIR(st.st_mode) ? -EISDIR : -EINVAL;
		snprintf(why, whycap, "%s",
			 ret == -EISDIR ? strerror(EISDIR) :
					  "not a regular file");
		close(fd);
		return ret;
	}
	ret = read_all(fd, out, len);
	close(fd);
	if (ret == -EFBIG) {
		snprintf(why, whycap, "larger than %u bytes", CONFIG_MAX_FILE);
		return ret;
	}
	if (ret) {
		snprintf(why, whycap, "%s", strerror(-ret));
		return ret;
	}
	if (memchr(*out, '\0', *len)) {
		*line = 1;
		for (const char *p = *out; *p; p++)
			*line += *p == '\n';
		snprintf(why, whycap, "NUL byte in file");
		free(*out);
		return -EINVAL;
	}
	return 0;
}

int config_finalize(struct orcd_config *c, char *err, size_t errcap)
{
	char at[PATH_MAX + 16], why[64], *text;
	struct mime_table *mime;
	unsigned line;
	size_t len;
	int fd, ret;

	ret = check_limits(c, err, errcap);
	if (ret)
		return ret;
	fd = open(c->root, O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0) {
		ret = -errno;
		set_err(err, errcap, "%sroot \"%s\": %s",
			config_where(c, "root", at, sizeof(at)),
			config_show(c->root).s,
			ret == -ENOTDIR ? "not a directory" : strerror(-ret));
		return ret;
	}
	ret = read_text(c->mime_types, &text, &len, why, sizeof(why), &line);
	if (!ret) {
		ret = mime_parse(text, &mime);
		if (ret)
			snprintf(why, sizeof(why), "%s", strerror(-ret));
		free(text);
	}
	if (ret) {
		char nul_at[32] = "";

		if (line)
			snprintf(nul_at, sizeof(nul_at), "line %u: ", line);
		set_err(err, errcap, "%smime_types \"%s\": %s%s",
			config_where(c, "mime_types", at, sizeof(at)),
			config_show(c->mime_types).s, nul_at, why);
		close(fd);
		return ret;
	}
	/* Finalizing twice (a test, a re-check) must not leak. */
	if (c->root_fd >= 0)
		close(c->root_fd);
	mime_free(c->mime);
	c->root_fd = fd;
	c->mime = mime;
	return 0;
}

/* ---- the file ---- */

enum tok {
	TOK_EOF,
	TOK_SEMI,
	TOK_VALUE
};

struct lexer {
	const char *file;
	const char *p, *end;
	unsigned line;
	char *err;
	size_t errcap;
};

struct token {
	char *s;
	unsigned line;
};

static int lex_error(struct lexer *lx, unsigned line, const char *what)
{
	set_err(lx->err, lx->errcap, "%s:%u: %s", lx->file, line, what);
	return -EINVAL;
}

static void skip_blanks(struct lexer *lx)
{
	while (lx->p < lx->end) {
		char c = *lx->p;

		if (c == '#') {
			while (lx->p < lx->end && *lx->p != '\n')
				lx->p++;
		} else if (c == '\n') {
			lx->line++;
			lx->p++;
		} else if (c == ' ' || c == '\t' || c == '\r') {
			lx->p++;
		} else {
			return;
		}
	}
}

/* A '#' inside a value is part of it ("/a#b"), as in nginx. */
static bool ends_value(char c)
{
	return c == ' ' || c == '\t' || c == '\r' || c == '\n' || c == ';';
}

/* "..." with \" and \\ as the only escapes; a string ends on its line. */
static int lex_quoted(struct lexer *lx, struct token *t)
{
	const char *q = lx->p + 1;
	size_t n = 0;
	char *s;

	for (; q < lx->end && *q != '"'; q++, n++) {
		if (*q == '\n')
			break;
		if (*q == '\\') {
			if (q + 1 < lx->end && (q[1] == '"' || q[1] == '\\')) {
				q++;
				continue;
			}
			return lex_error(lx, lx->line,
					 "unknown escape in quoted string "
					 "(only \\\" and \\\\)");
		}
	}
	if (q >= lx->end || *q != '"')
		return lex_error(lx, lx->line, "unterminated quoted string");
	if (q + 1 < lx->end && !ends_value(q[1]) && q[1] != '#')
		return lex_error(lx, lx->line,
				 "expected a blank or ';' after a quoted "
				 "string");
	s = malloc(n + 1);
	if (!s)
		return lex_error(lx, lx->line, "out of memory");
	n = 0;
	for (const char *r = lx->p + 1; r < q; r++)
		s[n++] = *r == '\\' ? *++r : *r;
	s[n] = '\0';
	t->s = s;
	t->line = lx->line;
	lx->p = q + 1;
	return TOK_VALUE;
}

static int lex(struct lexer *lx, struct token *t)
{
	const char *start;

	skip_blanks(lx);
	t->line = lx->line;
	if (lx->p >= lx->end)
		return TOK_EOF;
	if (*lx->p == ';') {
		lx->p++;
		return TOK_SEMI;
	}
	if (*lx->p == '"')
		return lex_quoted(lx, t);
	for (start = lx->p; lx->p < lx->end && !ends_value(*lx->p); lx->p++)
		if (*lx->p == '"')
			return lex_error(lx, lx->line,
					 "unexpected '\"' inside a value "
					 "(quote the whole value)");
	t->s = strndup(start, (size_t)(lx->p - start));
	if (!t->s)
		return lex_error(lx, lx->line, "out of memory");
	return TOK_VALUE;
}

/* Enough to hold "directive value" and notice extra values. */
#define STMT_TOKENS 3

struct statement {
	struct token tok[STMT_TOKENS];
	unsigned n;	    /* tokens seen, kept or not */
	unsigned last_line; /* line of the last token */
};

static void statement_clear(struct statement *st)
{
	for (unsigned i = 0; i < st->n && i < STMT_TOKENS; i++)
		free(st->tok[i].s);
	memset(st, 0, sizeof(*st));
}

static void statement_add(struct statement *st, struct token *t)
{
	st->last_line = t->line;
	if (st->n < STMT_TOKENS)
		st->tok[st->n] = *t;
	else
		free(t->s);
	st->n++;
}

/*
 * Reads one statement into st. Returns 1 when one was read, 0 at the
 * end of the file, or -EINVAL with the error set.
 */
static int read_statement(struct lexer *lx, struct statement *st)
{
	struct token t;
	int r;

	for (;;) {
		r = lex(lx, &t);
		if (r < 0)
			return r;
		if (r == TOK_VALUE) {
			statement_add(st, &t);
			continue;
		}
		if (r == TOK_SEMI && !st->n)
			return lex_error(lx, t.line, "unexpected ';'");
		if (r == TOK_SEMI)
			return 1;
		if (!st->n)
			return 0;
		set_err(lx->err, lx->errcap,
			"%s:%u: \"%s\": missing ';' at the end of the file",
			lx->file, st->last_line, config_show(st->tok[0].s).s);
		return -EINVAL;
	}
}

static int run_statement(struct lexer *lx, struct orcd_config *c,
			 const struct statement *st, bool *seen_listen)
{
	const struct directive *d = find_directive(st->tok[0].s);
	char msg[CONFIG_ERR_MAX], hint[64] = "";
	bool replace;
	int ret;

	if (!d) {
		set_err(lx->err, lx->errcap, "%s:%u: unknown directive \"%s\"",
			lx->file, st->tok[0].line, config_show(st->tok[0].s).s);
		return -EINVAL;
	}
	if (st->n != 2) {
		/* A value, then more on a later line: most likely the
		 * ';' after the value was forgotten. */
		if (st->n > 2 && st->tok[2].line > st->tok[1].line)
			snprintf(hint, sizeof(hint),
				 " (missing ';' at the end of line %u?)",
				 st->tok[1].line);
		set_err(lx->err, lx->errcap,
			"%s:%u: \"%s\" takes one value, got %u%s", lx->file,
			st->tok[0].line, d->name, st->n - 1, hint);
		return -EINVAL;
	}
	/* The file's first listen replaces what came before (the default
	 * or another source); the next ones add to it. */
	replace = d->set == set_listen && !*seen_listen;
	ret = apply(c, d, st->tok[1].s, replace, msg, sizeof(msg));
	if (ret) {
		set_err(lx->err, lx->errcap, "%s:%u: %s", lx->file,
			st->tok[1].line, msg);
		return ret;
	}
	c->line_of[d - directives] = st->tok[0].line;
	if (d->set == set_listen)
		*seen_listen = true;
	return 0;
}

static int parse_text(struct orcd_config *c, const char *file, const char *text,
		      size_t len, char *err, size_t errcap)
{
	struct lexer lx = {
		.file = file,
		.p = text,
		.end = text + len,
		.line = 1,
		.err = err,
		.errcap = errcap,
	};
	struct statement st = {0};
	bool seen_listen = false;
	int ret;

	while ((ret = read_statement(&lx, &st)) > 0) {
		ret = run_statement(&lx, c, &st, &seen_listen);
		statement_clear(&st);
		if (ret)
			return ret;
	}
	statement_clear(&st);
	return ret;
}

int config_load_file(struct orcd_config *c, const char *path, char *err,
		     size_t errcap)
{
	char *text = NULL, why[64];
	size_t len = 0;
	unsigned line;
	int ret;

	/* Messages name the file escaped: each is one line. */
	struct shown file = config_show(path);

	ret = read_text(path, &text, &len, why, sizeof(why), &line);
	if (ret && line) {
		set_err(err, errcap, "%s:%u: %s", file.s, line, why);
		return ret;
	}
	if (ret) {
		set_err(err, errcap, "%s: %s", file.s, why);
		return ret;
	}
	ret = replace_str(&c->source, path, err, errcap);
	if (!ret)
		ret = parse_text(c, file.s, text, len, err, errcap);
	free(text);
	return ret;
}
