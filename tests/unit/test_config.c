// SPDX-License-Identifier: MIT
/*
 * Configuration: defaults, every directive, the file syntax, every error
 * with its FILE:LINE, config_finalize() and reference counting.
 */
#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <netinet/in.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "unit_fds.h"

#include "config.h"
#include "mime.h"

static char tmpdir[64];
static char conf[128]; /* tmpdir/t.conf, rewritten by each load() */
static char err[512];
static char want[1024];

static void write_file(const char *path, const char *text, size_t len)
{
	FILE *f = fopen(path, "w");

	assert_non_null(f);
	assert_int_equal(fwrite(text, 1, len, f), len);
	assert_int_equal(fclose(f), 0);
}

static int rm_one(const char *path, const struct stat *st, int flag,
		  struct FTW *ftw)
{
	(void)st;
	(void)flag;
	(void)ftw;
	return remove(path);
}

static int group_setup(void **state)
{
	(void)state;
	snprintf(tmpdir, sizeof(tmpdir), "%s/orcd-config-XXXXXX",
		 getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
	if (!mkdtemp(tmpdir))
		return -1;
	snprintf(conf, sizeof(conf), "%s/t.conf", tmpdir);
	return 0;
}

static int group_teardown(void **state)
{
	(void)state;
	return nftw(tmpdir, rm_one, 8, FTW_DEPTH | FTW_PHYS);
}

/* A fresh config with `text` loaded from a file; the result in *ret. */
static struct orcd_config *load(const char *text, int *ret)
{
	struct orcd_config *c = config_new();

	assert_non_null(c);
	write_file(conf, text, strlen(text));
	err[0] = '\0';
	*ret = config_load_file(c, conf, err, sizeof(err));
	return c;
}

static struct orcd_config *load_ok(const char *text)
{
	int ret;
	struct orcd_config *c = load(text, &ret);

	if (ret)
		print_error("unexpected error: %s\n", err);
	assert_int_equal(ret, 0);
	return c;
}

/* Loading `text` fails with exactly "CONF:line: msg". */
static void load_fails(const char *text, unsigned line, const char *msg)
{
	int ret;
	struct orcd_config *c = load(text, &ret);

	assert_int_equal(ret, -EINVAL);
	snprintf(want, sizeof(want), "%s:%u: %s", conf, line, msg);
	assert_string_equal(err, want);
	config_free(c);
}

/* config_set() of one value fails with exactly msg. */
static void set_fails(const char *d, const char *v, const char *msg)
{
	struct orcd_config *c = config_new();

	assert_non_null(c);
	err[0] = '\0';
	assert_int_equal(config_set(c, d, v, false, err, sizeof(err)), -EINVAL);
	assert_string_equal(err, msg);
	config_free(c);
}

static unsigned set_uint_value(const char *d, const char *v, size_t off)
{
	struct orcd_config *c = config_new();
	unsigned r;

	assert_non_null(c);
	if (config_set(c, d, v, false, err, sizeof(err)))
		print_error("%s %s: %s\n", d, v, err);
	assert_int_equal(config_set(c, d, v, false, err, sizeof(err)), 0);
	r = *(unsigned *)(void *)((char *)c + off);
	config_free(c);
	return r;
}

static unsigned port_of(const struct orcd_listen *l)
{
	if (l->addr.ss_family == AF_INET6)
		return ntohs(
			((const struct sockaddr_in6 *)&l->addr)->sin6_port);
	return ntohs(((const struct sockaddr_in *)&l->addr)->sin_port);
}

static uint32_t v4_of(const struct orcd_listen *l)
{
	assert_int_equal(l->addr.ss_family, AF_INET);
	assert_int_equal(l->addrlen, sizeof(struct sockaddr_in));
	return ntohl(((const struct sockaddr_in *)&l->addr)->sin_addr.s_addr);
}

/* ---- defaults and directives ---- */

static void test_defaults(void **state)
{
	struct orcd_config *c = config_new();

	(void)state;
	assert_non_null(c);
	assert_null(c->source);
	assert_int_equal(c->n_listen, 1);
	assert_string_equal(c->listen[0].text, "127.0.0.1:8080");
	assert_int_equal(v4_of(&c->listen[0]), INADDR_LOOPBACK);
	assert_int_equal(port_of(&c->listen[0]), 8080);
	assert_string_equal(c->root, "/var/www/html");
	assert_string_equal(c->index, "index.html");
	assert_int_equal(c->engine, ORCD_ENGINE_AUTO);
	assert_int_equal(c->threads, 1);
	assert_int_equal(c->slots, 4096);
	assert_int_equal(c->accepts, 16);
	assert_int_equal(c->batch_wait_us, 100);
	/* Unset: the engine's budget decides (conn_budget.h). */
	assert_int_equal(c->max_connections, 0);
	assert_int_equal(c->idle_timeout_ms, 60000);
	assert_int_equal(c->header_timeout_ms, 10000);
	assert_int_equal(c->send_timeout_ms, 60000);
	assert_int_equal(c->shutdown_timeout_ms, 10000);
	assert_int_equal(c->max_request_line, 8192);
	assert_int_equal(c->max_header_bytes, 16384);
	assert_int_equal(c->max_headers, 100);
	assert_int_equal(c->buffer_size, 65536);
	assert_null(c->access_log);
	assert_null(c->user);
	assert_null(c->group);
	assert_string_equal(c->mime_types, "/etc/mime.types");
	assert_string_equal(c->default_type, "application/octet-stream");
	assert_false(c->metrics);
	assert_string_equal(c->metrics_listen.text, "127.0.0.1:9180");
	assert_int_equal(v4_of(&c->metrics_listen), INADDR_LOOPBACK);
	assert_int_equal(port_of(&c->metrics_listen), 9180);
	assert_string_equal(c->metrics_path, "/metrics");
	assert_null(c->mime);
	assert_int_equal(c->root_fd, -1);
	assert_int_equal(c->refs, 1);
	config_free(c);
}

static void test_every_directive(void **state)
{
	struct orcd_config *c = load_ok("listen 10.0.0.1:81;\n"
					"listen [::1]:82;\n"
					"root /srv/www;\n"
					"index start.htm;\n"
					"engine epoll;\n"
					"threads 8;\n"
					"slots 1024;\n"
					"accepts 64;\n"
					"max_connections 2000;\n"
					"idle_timeout 75s;\n"
					"header_timeout 500ms;\n"
					"send_timeout 2m;\n"
					"max_request_line 4k;\n"
					"max_header_bytes 32k;\n"
					"max_headers 50;\n"
					"buffer_size 1m;\n"
					"access_log /var/log/orcd/access.log;\n"
					"user www-data;\n"
					"group www-data;\n"
					"mime_types /usr/share/mime.types;\n"
					"default_type text/plain;\n"
					"metrics on;\n"
					"metrics_listen 127.0.0.2:9100;\n"
					"metrics_path /status;\n");

	(void)state;
	assert_string_equal(c->source, conf);
	assert_int_equal(c->n_listen, 2);
	assert_string_equal(c->listen[0].text, "10.0.0.1:81");
	assert_string_equal(c->listen[1].text, "[::1]:82");
	assert_string_equal(c->root, "/srv/www");
	assert_string_equal(c->index, "start.htm");
	assert_int_equal(c->engine, ORCD_ENGINE_EPOLL);
	assert_int_equal(c->threads, 8);
	assert_int_equal(c->slots, 1024);
	assert_int_equal(c->accepts, 64);
	assert_int_equal(c->max_connections, 2000);
	assert_int_equal(c->idle_timeout_ms, 75000);
	assert_int_equal(c->header_timeout_ms, 500);
	assert_int_equal(c->send_timeout_ms, 120000);
	assert_int_equal(c->max_request_line, 4096);
	assert_int_equal(c->max_header_bytes, 32768);
	assert_int_equal(c->max_headers, 50);
	assert_int_equal(c->buffer_size, 1048576);
	assert_string_equal(c->access_log, "/var/log/orcd/access.log");
	assert_string_equal(c->user, "www-data");
	assert_string_equal(c->group, "www-data");
	assert_string_equal(c->mime_types, "/usr/share/mime.types");
	assert_string_equal(c->default_type, "text/plain");
	assert_true(c->metrics);
	assert_string_equal(c->metrics_listen.text, "127.0.0.2:9100");
	assert_int_equal(v4_of(&c->metrics_listen), 0x7f000002);
	assert_int_equal(port_of(&c->metrics_listen), 9100);
	assert_string_equal(c->metrics_path, "/status");
	config_free(c);
}

static void test_engine_names(void **state)
{
	static const struct {
		const char *name;
		enum orcd_engine_kind kind;
	} e[] = {
		{"auto", ORCD_ENGINE_AUTO},
		{"specific", ORCD_ENGINE_SPECIFIC},
		{"direct", ORCD_ENGINE_DIRECT},
		{"epoll", ORCD_ENGINE_EPOLL},
	};
	struct orcd_config *c = config_new();

	(void)state;
	assert_non_null(c);
	for (size_t i = 0; i < sizeof(e) / sizeof(e[0]); i++) {
		/* Start from another engine so each set is observable. */
		c->engine = e[(i + 1) % 4].kind;
		assert_int_equal(config_set(c, "engine", e[i].name, false, err,
					    sizeof(err)),
				 0);
		assert_int_equal(c->engine, e[i].kind);
		assert_string_equal(config_engine_name(e[i].kind), e[i].name);
	}
	assert_string_equal(config_engine_name((enum orcd_engine_kind)42), "?");
	config_free(c);
	set_fails("engine", "io_uring",
		  "engine \"io_uring\": expected auto, specific, direct or "
		  "epoll");
	set_fails("engine", "EPOLL",
		  "engine \"EPOLL\": expected auto, specific, direct or "
		  "epoll");
}

static void test_metrics_switch(void **state)
{
	struct orcd_config *c = config_new();

	(void)state;
	assert_int_equal(
		config_set(c, "metrics", "on", false, err, sizeof(err)), 0);
	assert_true(c->metrics);
	assert_int_equal(
		config_set(c, "metrics", "off", false, err, sizeof(err)), 0);
	assert_false(c->metrics);
	config_free(c);
	set_fails("metrics", "yes", "metrics \"yes\": expected on or off");
	set_fails("metrics", "1", "metrics \"1\": expected on or off");
}

static void test_cpu_affinity_switch(void **state)
{
	struct orcd_config *c = config_new();

	(void)state;
	assert_false(c->cpu_affinity);
	assert_int_equal(config_set(c, "worker_cpu_affinity", "auto", false,
				    err, sizeof(err)),
			 0);
	assert_true(c->cpu_affinity);
	assert_int_equal(config_set(c, "worker_cpu_affinity", "off", false, err,
				    sizeof(err)),
			 0);
	assert_false(c->cpu_affinity);
	config_free(c);
	set_fails("worker_cpu_affinity", "on",
		  "worker_cpu_affinity \"on\": expected auto or off");
	set_fails("worker_cpu_affinity", "0101",
		  "worker_cpu_affinity \"0101\": expected auto or off");
}

static void test_access_log_forms(void **state)
{
	struct orcd_config *c = config_new();

	(void)state;
	assert_int_equal(
		config_set(c, "access_log", "-", false, err, sizeof(err)), 0);
	assert_string_equal(c->access_log, "-");
	assert_int_equal(config_set(c, "access_log", "stdout", false, err,
				    sizeof(err)),
			 0);
	assert_string_equal(c->access_log, "stdout");
	assert_int_equal(config_set(c, "access_log", "/tmp/a.log", false, err,
				    sizeof(err)),
			 0);
	assert_string_equal(c->access_log, "/tmp/a.log");
	assert_int_equal(
		config_set(c, "access_log", "off", false, err, sizeof(err)), 0);
	assert_null(c->access_log);
	config_free(c);
	set_fails("access_log", "", "access_log \"\": empty value");
}

static void test_string_values(void **state)
{
	(void)state;
	set_fails("root", "", "root \"\": empty value");
	set_fails("user", "", "user \"\": empty value");
	set_fails("group", "", "group \"\": empty value");
	set_fails("mime_types", "", "mime_types \"\": empty value");
	set_fails("index", "", "index \"\": empty value");
	set_fails("index", "a/index.html",
		  "index \"a/index.html\": expected a file name without '/'");
	set_fails("index", "..",
		  "index \"..\": expected a file name without '/'");
	set_fails("index", ".index.html",
		  "index \".index.html\": dotfiles are never served");
	set_fails("default_type", "text",
		  "default_type \"text\": expected a media type such as "
		  "text/plain");
	set_fails("default_type", "/plain",
		  "default_type \"/plain\": expected a media type such as "
		  "text/plain");
	set_fails("default_type", "text/",
		  "default_type \"text/\": expected a media type such as "
		  "text/plain");
	/* It goes into Content-Type as it is: RFC 9110's grammar, not
	 * merely a slash. */
	static const char *const not_types[] = {
		"text/ html", "text/html, x", "te\"xt/html", "text/html; a",
		"text/html; charset=", "text/html; =x", "text/html; a=\"b",
		"text/html; a=b c", "text/a/b", "text/\xc3\xa9",
	};
	for (size_t i = 0; i < sizeof(not_types) / sizeof(*not_types); i++) {
		struct orcd_config *nc = config_new();

		assert_int_not_equal(config_set(nc, "default_type",
						not_types[i], false, err,
						sizeof(err)),
				     0);
		assert_non_null(strstr(err, "expected a media type"));
		config_free(nc);
	}
	set_fails("default_type", "text/plain\r\nX-Evil: 1",
		  "default_type \"text/plain\\x0d\\x0aX-Evil: 1\": control "
		  "character in value");
	set_fails("metrics_path", "metrics",
		  "metrics_path \"metrics\": expected an absolute path such as "
		  "/metrics (no spaces, '?', '#' or '%')");
	set_fails("metrics_path", "/m?x",
		  "metrics_path \"/m?x\": expected an absolute path such as "
		  "/metrics (no spaces, '?', '#' or '%')");
	set_fails("root", "/a\tb",
		  "root \"/a\\x09b\": control character in value");
	set_fails("nonsense", "1", "unknown directive \"nonsense\"");

	/* A media type with parameters is fine. */
	struct orcd_config *c = config_new();

	assert_int_equal(config_set(c, "default_type",
				    "text/plain; charset=utf-8", false, err,
				    sizeof(err)),
			 0);
	assert_string_equal(c->default_type, "text/plain; charset=utf-8");
	/* Parameters: token or quoted values, OWS around ';', empty ones. */
	static const char *const types[] = {
		"application/vnd.a+json",
		"text/plain;charset=utf-8",
		"text/plain;",
		"text/plain ; a=\"b; c\\\"d\" ;; e=f",
	};
	for (size_t i = 0; i < sizeof(types) / sizeof(*types); i++)
		assert_int_equal(config_set(c, "default_type", types[i], true,
					    err, sizeof(err)),
				 0);
	config_free(c);
}

/* ---- numbers, units, ranges ---- */

#define OFF(f) offsetof(struct orcd_config, f)

static void test_uint_ranges(void **state)
{
	(void)state;
	assert_int_equal(set_uint_value("threads", "0", OFF(threads)), 0);
	assert_int_equal(set_uint_value("threads", "256", OFF(threads)), 256);
	set_fails("threads", "257", "threads \"257\": out of range (0..256)");
	assert_int_equal(set_uint_value("slots", "16", OFF(slots)), 16);
	assert_int_equal(set_uint_value("slots", "1048576", OFF(slots)),
			 1048576);
	set_fails("slots", "15", "slots \"15\": out of range (16..1048576)");
	set_fails("slots", "1048577",
		  "slots \"1048577\": out of range (16..1048576)");
	assert_int_equal(set_uint_value("accepts", "1", OFF(accepts)), 1);
	assert_int_equal(set_uint_value("accepts", "1024", OFF(accepts)), 1024);
	set_fails("accepts", "0", "accepts \"0\": out of range (1..1024)");
	set_fails("accepts", "1025",
		  "accepts \"1025\": out of range (1..1024)");
	assert_int_equal(
		set_uint_value("batch_wait_us", "0", OFF(batch_wait_us)), 0);
	assert_int_equal(set_uint_value("batch_wait_us", "1000",
					OFF(batch_wait_us)),
			 1000);
	set_fails("batch_wait_us", "1001",
		  "batch_wait_us \"1001\": out of range (0..1000)");
	set_fails("batch_wait_us", "50us",
		  "batch_wait_us \"50us\": expected a whole number");
	assert_int_equal(set_uint_value("max_connections", "1",
					OFF(max_connections)),
			 1);
	set_fails("max_connections", "0",
		  "max_connections \"0\": out of range (1..1048576)");
	assert_int_equal(set_uint_value("max_headers", "65536",
					OFF(max_headers)),
			 65536);
	set_fails("max_headers", "0",
		  "max_headers \"0\": out of range (1..65536)");
	set_fails("max_headers", "65537",
		  "max_headers \"65537\": out of range (1..65536)");
}

static void test_bad_numbers(void **state)
{
	(void)state;
	set_fails("threads", "", "threads \"\": expected a whole number");
	set_fails("threads", "abc", "threads \"abc\": expected a whole number");
	set_fails("threads", "-1", "threads \"-1\": expected a whole number");
	set_fails("threads", "+1", "threads \"+1\": expected a whole number");
	set_fails("threads", "1.5", "threads \"1.5\": expected a whole number");
	set_fails("threads", "4k", "threads \"4k\": expected a whole number");
	set_fails("threads", "0x10",
		  "threads \"0x10\": expected a whole number");
	set_fails("threads", " 1", "threads \" 1\": expected a whole number");
	set_fails("threads", "99999999999999999999999",
		  "threads \"99999999999999999999999\": out of range (0..256)");
	/* 2^64 + 5 must not wrap to 5. */
	set_fails("threads", "18446744073709551621",
		  "threads \"18446744073709551621\": out of range (0..256)");
	/* 2^32 + 1 must not wrap to 1. */
	set_fails("accepts", "4294967297",
		  "accepts \"4294967297\": out of range (1..1024)");
}

static void test_durations(void **state)
{
	(void)state;
	assert_int_equal(set_uint_value("idle_timeout", "60s",
					OFF(idle_timeout_ms)),
			 60000);
	assert_int_equal(set_uint_value("idle_timeout", "500ms",
					OFF(idle_timeout_ms)),
			 500);
	assert_int_equal(set_uint_value("idle_timeout", "5",
					OFF(idle_timeout_ms)),
			 5000);
	assert_int_equal(set_uint_value("header_timeout", "3m",
					OFF(header_timeout_ms)),
			 180000);
	assert_int_equal(set_uint_value("send_timeout", "1h",
					OFF(send_timeout_ms)),
			 3600000);
	assert_int_equal(
		set_uint_value("send_timeout", "1ms", OFF(send_timeout_ms)), 1);
	assert_int_equal(set_uint_value("send_timeout", "24h",
					OFF(send_timeout_ms)),
			 86400000);
	set_fails("idle_timeout", "0",
		  "idle_timeout \"0\": out of range (1ms..24h)");
	set_fails("idle_timeout", "0ms",
		  "idle_timeout \"0ms\": out of range (1ms..24h)");
	set_fails("header_timeout", "25h",
		  "header_timeout \"25h\": out of range (1ms..24h)");
	set_fails("send_timeout", "86400001ms",
		  "send_timeout \"86400001ms\": out of range (1ms..24h)");
	/* A stop's drain may be cut at once. */
	static const char *const drain_in[] = { "0", "2500ms", "24h" };
	static const unsigned drain_ms[] = { 0, 2500, 86400000 };

	for (size_t i = 0; i < 3; i++)
		assert_int_equal(set_uint_value("worker_shutdown_timeout",
						drain_in[i],
						OFF(shutdown_timeout_ms)),
				 drain_ms[i]);
	set_fails("worker_shutdown_timeout", "25h",
		  "worker_shutdown_timeout \"25h\": out of range (0s..24h)");
	set_fails("send_timeout", "99999999999999999999s",
		  "send_timeout \"99999999999999999999s\": out of range "
		  "(1ms..24h)");
	set_fails("idle_timeout", "5x",
		  "idle_timeout \"5x\": unknown unit (use ms, s, m or h)");
	set_fails("idle_timeout", "5 s",
		  "idle_timeout \"5 s\": unknown unit (use ms, s, m or h)");
	set_fails("idle_timeout", "5S",
		  "idle_timeout \"5S\": unknown unit (use ms, s, m or h)");
	set_fails("idle_timeout", "s",
		  "idle_timeout \"s\": expected a duration such as 500ms, 30s, "
		  "5m");
	set_fails("idle_timeout", "1.5s",
		  "idle_timeout \"1.5s\": a whole number only (1500ms, not "
		  "1.5s)");
}

static void test_sizes(void **state)
{
	(void)state;
	assert_int_equal(set_uint_value("buffer_size", "4k", OFF(buffer_size)),
			 4096);
	assert_int_equal(set_uint_value("buffer_size", "4K", OFF(buffer_size)),
			 4096);
	assert_int_equal(set_uint_value("buffer_size", "16m", OFF(buffer_size)),
			 16 << 20);
	assert_int_equal(set_uint_value("buffer_size", "2M", OFF(buffer_size)),
			 2 << 20);
	assert_int_equal(
		set_uint_value("buffer_size", "5000", OFF(buffer_size)), 5000);
	assert_int_equal(set_uint_value("max_request_line", "64",
					OFF(max_request_line)),
			 64);
	assert_int_equal(set_uint_value("max_header_bytes", "256",
					OFF(max_header_bytes)),
			 256);
	set_fails("buffer_size", "4095",
		  "buffer_size \"4095\": out of range (4k..16m)");
	set_fails("buffer_size", "3k",
		  "buffer_size \"3k\": out of range (4k..16m)");
	set_fails("buffer_size", "17m",
		  "buffer_size \"17m\": out of range (4k..16m)");
	set_fails("buffer_size", "4kb",
		  "buffer_size \"4kb\": unknown unit (use k or m)");
	set_fails("buffer_size", "1g",
		  "buffer_size \"1g\": unknown unit (use k or m)");
	set_fails("buffer_size", "1.5m",
		  "buffer_size \"1.5m\": a whole number only (1536k, not "
		  "1.5m)");
	set_fails("buffer_size", "k",
		  "buffer_size \"k\": expected a size such as 8192, 16k, 1m");
	set_fails("max_request_line", "63",
		  "max_request_line \"63\": out of range (64..16m)");
	set_fails("max_header_bytes", "255",
		  "max_header_bytes \"255\": out of range (256..16m)");
	/* (2^44 + 1) m is 2^64 + 1m: must not wrap to 1m. */
	set_fails("buffer_size", "17592186044417m",
		  "buffer_size \"17592186044417m\": out of range (4k..16m)");
	/* 2^32 k would wrap an unsigned: out of range, not small. */
	set_fails("buffer_size", "4194304k",
		  "buffer_size \"4194304k\": out of range (4k..16m)");
}

/* ---- listen ---- */

static void test_listen_forms(void **state)
{
	struct orcd_listen l;
	const struct sockaddr_in6 *a6 = (const void *)&l.addr;
	struct in6_addr any6 = IN6ADDR_ANY_INIT;

	(void)state;
	assert_int_equal(config_parse_listen("8080", &l), 0);
	assert_int_equal(v4_of(&l), INADDR_ANY);
	assert_int_equal(port_of(&l), 8080);
	assert_string_equal(l.text, "8080");

	assert_int_equal(config_parse_listen("*:80", &l), 0);
	assert_int_equal(v4_of(&l), INADDR_ANY);
	assert_int_equal(port_of(&l), 80);
	assert_string_equal(l.text, "*:80");

	assert_int_equal(config_parse_listen("192.168.1.20:65535", &l), 0);
	assert_int_equal(v4_of(&l), 0xc0a80114);
	assert_int_equal(port_of(&l), 65535);

	assert_int_equal(config_parse_listen("[::1]:8080", &l), 0);
	assert_int_equal(l.addr.ss_family, AF_INET6);
	assert_int_equal(l.addrlen, sizeof(struct sockaddr_in6));
	assert_true(IN6_IS_ADDR_LOOPBACK(&a6->sin6_addr));
	assert_int_equal(port_of(&l), 8080);
	assert_string_equal(l.text, "[::1]:8080");

	assert_int_equal(config_parse_listen("[::]:1", &l), 0);
	assert_memory_equal(&a6->sin6_addr, &any6, sizeof(any6));
	assert_int_equal(port_of(&l), 1);

	assert_int_equal(config_parse_listen("[2001:db8::5]:443", &l), 0);
	assert_int_equal(a6->sin6_addr.s6_addr[0], 0x20);
	assert_int_equal(a6->sin6_addr.s6_addr[15], 5);
	assert_int_equal(port_of(&l), 443);
}

static void test_listen_errors(void **state)
{
	static const char *const bad[] = {
		"",
		":80",
		"1.2.3.4",
		"1.2.3.4:",
		"1.2.3.4:0",
		"1.2.3.4:65536",
		"1.2.3.4:8x",
		"1.2.3.4:-1",
		"0",
		"256.1.1.1:80",
		"1.2.3:80",
		"localhost:80",
		"::1:80",
		"[::1]",
		"[::1]80",
		"[::1:80",
		"[zz]:80",
		"[1.2.3.4]:80",
		"*:",
		"**:80",
		"[]:80",
		"[::1]:99999",
		"1111111111111111111111111111111111111111111111111111111111111:1",
	};
	struct orcd_listen l;

	(void)state;
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		if (config_parse_listen(bad[i], &l) != -EINVAL)
			print_error("accepted listen \"%s\"\n", bad[i]);
		assert_int_equal(config_parse_listen(bad[i], &l), -EINVAL);
	}
	set_fails("listen", "::1:80",
		  "listen \"::1:80\": IPv6 addresses need brackets: "
		  "[ADDR]:PORT");
	set_fails("listen", "1.2.3.4:0",
		  "listen \"1.2.3.4:0\": port out of range (1..65535)");
	set_fails("listen", "1.2.3.4:http",
		  "listen \"1.2.3.4:http\": bad port (expected 1..65535)");
	set_fails("listen", "localhost:80",
		  "listen \"localhost:80\": bad IPv4 address (names are not "
		  "resolved)");
	set_fails("listen", "[::g]:80",
		  "listen \"[::g]:80\": bad IPv6 address");
	set_fails("listen", "[::1]", "listen \"[::1]\": expected [IPV6]:PORT");
	set_fails("listen", ":80",
		  "listen \":80\": missing address before ':'");
	/* 64 characters: one more than orcd_listen.text holds. */
	set_fails(
		"listen",
		"0000000000000000000000000000000000000000000000000000000000000080",
		"listen \"0000000000000000000000000000000000000000000000000000000000000080\": too long (at most 63 characters)");
	set_fails("metrics_listen", "x",
		  "metrics_listen \"x\": bad port (expected 1..65535)");
	/* Listeners are IPV6_V6ONLY: a mapped address could not be bound. */
	set_fails("listen", "[::ffff:127.0.0.1]:8099",
		  "listen \"[::ffff:127.0.0.1]:8099\": an IPv4-mapped address; "
		  "write it as 127.0.0.1:8099");
}

static void test_listen_list(void **state)
{
	struct orcd_config *c;
	char line[64], text[2048] = "";
	int ret;

	(void)state;
	/* The file's first listen replaces the default, later ones add. */
	c = load_ok("listen 81; listen 82;\nlisten [::]:83;");
	assert_int_equal(c->n_listen, 3);
	assert_int_equal(port_of(&c->listen[0]), 81);
	assert_int_equal(port_of(&c->listen[1]), 82);
	assert_int_equal(port_of(&c->listen[2]), 83);
	/* A second file replaces the first one's list. */
	write_file(conf, "listen 84;", 10);
	assert_int_equal(config_load_file(c, conf, err, sizeof(err)), 0);
	assert_int_equal(c->n_listen, 1);
	assert_int_equal(port_of(&c->listen[0]), 84);
	/* config_set: replace or append. */
	assert_int_equal(config_set(c, "listen", "85", false, err, sizeof(err)),
			 0);
	assert_int_equal(c->n_listen, 2);
	assert_int_equal(port_of(&c->listen[1]), 85);
	assert_int_equal(config_set(c, "listen", "86", true, err, sizeof(err)),
			 0);
	assert_int_equal(c->n_listen, 1);
	assert_int_equal(port_of(&c->listen[0]), 86);
	/* The same address twice, however written. */
	assert_int_equal(config_set(c, "listen", "*:86", false, err,
				    sizeof(err)),
			 -EINVAL);
	assert_string_equal(err, "listen \"*:86\": same address as listen "
				 "\"86\"");
	assert_int_equal(c->n_listen, 1);
	/* Same port on another address is fine. */
	assert_int_equal(config_set(c, "listen", "127.0.0.1:86", false, err,
				    sizeof(err)),
			 0);
	assert_int_equal(
		config_set(c, "listen", "[::]:86", false, err, sizeof(err)), 0);
	assert_int_equal(c->n_listen, 3);
	config_free(c);

	/* At most ORCD_MAX_LISTEN. */
	for (int i = 0; i < ORCD_MAX_LISTEN; i++) {
		snprintf(line, sizeof(line), "listen %d;\n", 1000 + i);
		strcat(text, line);
	}
	c = load_ok(text);
	assert_int_equal(c->n_listen, ORCD_MAX_LISTEN);
	config_free(c);
	strcat(text, "listen 2000;\n");
	c = load(text, &ret);
	assert_int_equal(ret, -EINVAL);
	snprintf(want, sizeof(want),
		 "%s:%d: listen \"2000\": too many listen addresses (at most "
		 "%d)",
		 conf, ORCD_MAX_LISTEN + 1, ORCD_MAX_LISTEN);
	assert_string_equal(err, want);
	config_free(c);
	load_fails("listen 80;\nlisten 0.0.0.0:80;", 2,
		   "listen \"0.0.0.0:80\": same address as listen \"80\"");
}

/* ---- the file syntax ---- */

static void test_syntax(void **state)
{
	struct orcd_config *c;

	(void)state;
	c = load_ok("# a comment\n"
		    "\n"
		    "   root   /srv/a ;   # trailing comment\n"
		    "index\n"
		    "\tx.html\n"
		    "\t;\n"
		    "threads 2;slots 32;accepts 3;#no space\n"
		    "user \"a b\";\n"
		    "group \"q\\\"uote\\\\\";\n"
		    "\"engine\" \"direct\";\n"
		    "mime_types \"/a;b#c\";\n"
		    "access_log /log#not-a-comment;\n"
		    "metrics_path \"/m\";# after a quote\n"
		    "max_headers 7;");
	assert_string_equal(c->root, "/srv/a");
	assert_string_equal(c->index, "x.html");
	assert_int_equal(c->threads, 2);
	assert_int_equal(c->slots, 32);
	assert_int_equal(c->accepts, 3);
	assert_string_equal(c->user, "a b");
	assert_string_equal(c->group, "q\"uote\\");
	assert_int_equal(c->engine, ORCD_ENGINE_DIRECT);
	assert_string_equal(c->mime_types, "/a;b#c");
	assert_string_equal(c->access_log, "/log#not-a-comment");
	assert_string_equal(c->metrics_path, "/m");
	assert_int_equal(c->max_headers, 7);
	config_free(c);

	/* CRLF line endings, no newline at the end. */
	c = load_ok("threads 3;\r\nroot\r\n  /srv/b;\r\nindex i.html;");
	assert_int_equal(c->threads, 3);
	assert_string_equal(c->root, "/srv/b");
	assert_string_equal(c->index, "i.html");
	config_free(c);

	/* Empty file, comments only: the defaults, source recorded. */
	c = load_ok("");
	assert_int_equal(c->threads, 1);
	assert_string_equal(c->source, conf);
	config_free(c);
	c = load_ok("# nothing\n   # here\n");
	assert_int_equal(c->n_listen, 1);
	assert_string_equal(c->listen[0].text, "127.0.0.1:8080");
	config_free(c);

	/* A later statement overrides an earlier one. */
	c = load_ok("threads 4; threads 5;");
	assert_int_equal(c->threads, 5);
	config_free(c);
}

static void test_syntax_errors(void **state)
{
	(void)state;
	load_fails("threads 1;\nfoo bar;\n", 2, "unknown directive \"foo\"");
	load_fails("Root /x;", 1, "unknown directive \"Root\"");
	load_fails("root /x\nindex a.html;\n", 1,
		   "\"root\" takes one value, got 3 (missing ';' at the end "
		   "of line 1?)");
	load_fails("root\n/x\nindex a.html;\n", 1,
		   "\"root\" takes one value, got 3 (missing ';' at the end "
		   "of line 2?)");
	load_fails("threads 1;\n\nroot /x", 3,
		   "\"root\": missing ';' at the end of the file");
	load_fails("root\n/x\n# end\n", 2,
		   "\"root\": missing ';' at the end of the file");
	load_fails("root;", 1, "\"root\" takes one value, got 0");
	load_fails("threads 1 2;", 1, "\"threads\" takes one value, got 2");
	load_fails("\n;", 2, "unexpected ';'");
	load_fails("threads 1;;", 1, "unexpected ';'");
	load_fails("\nroot \"/x;\nindex a;\n", 2, "unterminated quoted string");
	load_fails("root \"/x", 1, "unterminated quoted string");
	/* Even when a quote closes it on a later line. */
	load_fails("root \"/x\nfoo\";", 1, "unterminated quoted string");
	load_fails("root \"/x\\n\";", 1,
		   "unknown escape in quoted string (only \\\" and \\\\)");
	load_fails("root \"/x\\", 1,
		   "unknown escape in quoted string (only \\\" and \\\\)");
	load_fails("root a\"b\";", 1,
		   "unexpected '\"' inside a value (quote the whole value)");
	load_fails("root \"a\"b;", 1,
		   "expected a blank or ';' after a quoted string");
	load_fails("root \"\";", 1, "root \"\": empty value");
	load_fails("root \"a\tb\";", 1,
		   "root \"a\\x09b\": control character in value");
	load_fails("root a\x01;", 1,
		   "root \"a\\x01\": control character in value");
}

static void test_value_errors_name_file_and_line(void **state)
{
	(void)state;
	load_fails("\n\nthreads abc;", 3,
		   "threads \"abc\": expected a whole number");
	load_fails("threads 300;", 1, "threads \"300\": out of range (0..256)");
	/* The line is the value's, where the statement spans lines. */
	load_fails("threads\n\n  999;", 3,
		   "threads \"999\": out of range (0..256)");
	load_fails("idle_timeout 5x;", 1,
		   "idle_timeout \"5x\": unknown unit (use ms, s, m or h)");
	load_fails("buffer_size 1k;", 1,
		   "buffer_size \"1k\": out of range (4k..16m)");
	load_fails("listen 1.2.3.4;", 1,
		   "listen \"1.2.3.4\": bad port (expected 1..65535)");
	load_fails("engine fast;", 1,
		   "engine \"fast\": expected auto, specific, direct or epoll");
	load_fails("metrics maybe;", 1,
		   "metrics \"maybe\": expected on or off");
	/* Long values are cut at 200 bytes in the message, which stays one
	 * line; a path of ordinary length is shown whole. */
	char val[260], msg[400];

	memset(val, '7', 250);
	val[250] = '\0';
	snprintf(msg, sizeof(msg),
		 "threads \"%.200s...\": out of range (0..256)", val);
	char line[300];

	snprintf(line, sizeof(line), "threads %s;", val);
	load_fails(line, 1, msg);
}

static void test_file_errors(void **state)
{
	struct orcd_config *c = config_new();
	char path[160];

	(void)state;
	snprintf(path, sizeof(path), "%s/missing.conf", tmpdir);
	assert_int_equal(config_load_file(c, path, err, sizeof(err)), -ENOENT);
	snprintf(want, sizeof(want), "%s: No such file or directory", path);
	assert_string_equal(err, want);
	assert_int_equal(config_load_file(c, tmpdir, err, sizeof(err)),
			 -EISDIR);
	snprintf(want, sizeof(want), "%s: Is a directory", tmpdir);
	assert_string_equal(err, want);

	/* Neither a FIFO (the open would wait for a writer: a reload
	 * would hold the main thread) nor a device (/dev/zero never
	 * ends); the alarm fails the test instead of hanging it. */
	snprintf(path, sizeof(path), "%s/fifo.conf", tmpdir);
	assert_int_equal(mkfifo(path, 0600), 0);
	alarm(10);
	assert_int_equal(config_load_file(c, path, err, sizeof(err)), -EINVAL);
	alarm(0);
	snprintf(want, sizeof(want), "%s: not a regular file", path);
	assert_string_equal(err, want);
	unlink(path);
	assert_int_equal(config_load_file(c, "/dev/zero", err, sizeof(err)),
			 -EINVAL);
	assert_string_equal(err, "/dev/zero: not a regular file");

	/* The file's name is escaped: a message stays one line. */
	snprintf(path, sizeof(path), "%s/a\norcd: b.conf", tmpdir);
	assert_int_equal(config_load_file(c, path, err, sizeof(err)), -ENOENT);
	snprintf(want, sizeof(want),
		 "%s/a\\x0aorcd: b.conf: No such file or directory", tmpdir);
	assert_string_equal(err, want);
	assert_int_equal(mkdir(path, 0700), 0);
	snprintf(path + strlen(path), sizeof(path) - strlen(path), "/c.conf");
	write_file(path, "root /;\nworkers 1;\n", 19);
	assert_int_not_equal(config_load_file(c, path, err, sizeof(err)), 0);
	assert_null(strchr(err, '\n'));
	assert_non_null(strstr(err, "a\\x0aorcd: b.conf/c.conf:2: "));
	unlink(path);
	*strrchr(path, '/') = '\0';
	rmdir(path);
	config_free(c);

	/* A NUL byte, with its line. */
	write_file(conf, "threads 1;\nroot /x\0y;\n", 22);
	c = config_new();
	assert_int_equal(config_load_file(c, conf, err, sizeof(err)), -EINVAL);
	snprintf(want, sizeof(want), "%s:2: NUL byte in file", conf);
	assert_string_equal(err, want);
	config_free(c);
}

static void test_file_too_large(void **state)
{
	size_t n = (1u << 20) + 1;
	char *big = malloc(n);
	struct orcd_config *c = config_new();

	(void)state;
	assert_non_null(big);
	memset(big, '#', n);
	write_file(conf, big, n);
	assert_int_equal(config_load_file(c, conf, err, sizeof(err)), -EFBIG);
	snprintf(want, sizeof(want), "%s: larger than 1048576 bytes", conf);
	assert_string_equal(err, want);
	/* Exactly the limit is fine (all one comment). */
	write_file(conf, big, n - 1);
	assert_int_equal(config_load_file(c, conf, err, sizeof(err)), 0);
	free(big);
	config_free(c);
}

static void test_config_set_messages(void **state)
{
	struct orcd_config *c = config_new();

	(void)state;
	/* No location: the caller adds its own (flag or FILE:LINE). */
	assert_int_equal(config_set(c, "threads", "x", false, err, sizeof(err)),
			 -EINVAL);
	assert_string_equal(err, "threads \"x\": expected a whole number");
	/* A short buffer is cut, never overrun; NULL is allowed. */
	memset(err, 'Z', sizeof(err));
	assert_int_equal(config_set(c, "threads", "x", false, err, 8), -EINVAL);
	assert_string_equal(err, "threads");
	assert_int_equal(err[8], 'Z');
	assert_int_equal(config_set(c, "threads", "x", false, NULL, 0),
			 -EINVAL);
	/* A failed set leaves the old value. */
	assert_int_equal(c->threads, 1);
	config_free(c);
}

/* ---- finalize ---- */

static struct orcd_config *finalizable(void)
{
	struct orcd_config *c = config_new();
	char p[160];

	assert_non_null(c);
	snprintf(p, sizeof(p), "%s/www", tmpdir);
	mkdir(p, 0755);
	assert_int_equal(config_set(c, "root", p, false, err, sizeof(err)), 0);
	snprintf(p, sizeof(p), "%s/mime.types", tmpdir);
	write_file(p, "text/x-test\ttst\n", 16);
	assert_int_equal(
		config_set(c, "mime_types", p, false, err, sizeof(err)), 0);
	return c;
}

static void test_finalize_ok(void **state)
{
	int fds = count_fds();
	struct orcd_config *c = finalizable();
	struct stat st;

	(void)state;
	assert_int_equal(config_finalize(c, err, sizeof(err)), 0);
	assert_true(c->root_fd >= 0);
	assert_int_equal(fstat(c->root_fd, &st), 0);
	assert_true(S_ISDIR(st.st_mode));
	assert_int_equal(fcntl(c->root_fd, F_GETFD), FD_CLOEXEC);
	assert_int_equal(fcntl(c->root_fd, F_GETFL) & O_PATH, O_PATH);
	assert_non_null(c->mime);
	assert_string_equal(mime_lookup(c->mime, "a.tst", "x/y"),
			    "text/x-test");
	assert_int_equal(count_fds(), fds + 1);
	/* Twice: the old fd and table are released, not leaked. */
	assert_int_equal(config_finalize(c, err, sizeof(err)), 0);
	assert_int_equal(count_fds(), fds + 1);
	config_free(c);
	assert_int_equal(count_fds(), fds);
}

static void test_finalize_errors(void **state)
{
	int fds = count_fds();
	struct orcd_config *c;
	char p[160];

	(void)state;
	c = finalizable();
	snprintf(p, sizeof(p), "%s/nowhere", tmpdir);
	assert_int_equal(config_set(c, "root", p, false, err, sizeof(err)), 0);
	assert_int_equal(config_finalize(c, err, sizeof(err)), -ENOENT);
	snprintf(want, sizeof(want), "root \"%s\": No such file or directory",
		 p);
	assert_string_equal(err, want);
	assert_int_equal(c->root_fd, -1);
	config_free(c);

	c = finalizable();
	snprintf(p, sizeof(p), "%s/mime.types", tmpdir);
	assert_int_equal(config_set(c, "root", p, false, err, sizeof(err)), 0);
	assert_int_equal(config_finalize(c, err, sizeof(err)), -ENOTDIR);
	snprintf(want, sizeof(want), "root \"%s\": not a directory", p);
	assert_string_equal(err, want);
	config_free(c);

	c = finalizable();
	snprintf(p, sizeof(p), "%s/no.types", tmpdir);
	assert_int_equal(
		config_set(c, "mime_types", p, false, err, sizeof(err)), 0);
	assert_int_equal(config_finalize(c, err, sizeof(err)), -ENOENT);
	snprintf(want, sizeof(want),
		 "mime_types \"%s\": No such file or directory", p);
	assert_string_equal(err, want);
	assert_int_equal(c->root_fd, -1);
	assert_null(c->mime);
	config_free(c);
	/* The root opened before the mime table failed was closed. */
	assert_int_equal(count_fds(), fds);

	c = finalizable();
	c->max_request_line = 20000;
	assert_int_equal(config_finalize(c, err, sizeof(err)), -EINVAL);
	assert_string_equal(err, "max_request_line (20000) is larger than "
				 "max_header_bytes (16384)");
	c->max_request_line = 16384;
	assert_int_equal(config_finalize(c, err, sizeof(err)), 0);
	c->max_header_bytes = 65537;
	assert_int_equal(config_finalize(c, err, sizeof(err)), -EINVAL);
	assert_string_equal(err, "max_header_bytes (65537) is larger than "
				 "buffer_size (65536): a request head must fit "
				 "in the buffer");
	config_free(c);

	/* metrics_listen may not be a listen address, when metrics is on. */
	c = finalizable();
	assert_int_equal(config_set(c, "metrics_listen", "127.0.0.1:8080",
				    false, err, sizeof(err)),
			 0);
	assert_int_equal(config_finalize(c, err, sizeof(err)), 0);
	assert_int_equal(
		config_set(c, "metrics", "on", false, err, sizeof(err)), 0);
	assert_int_equal(config_finalize(c, err, sizeof(err)), -EINVAL);
	assert_string_equal(err, "metrics_listen \"127.0.0.1:8080\" overlaps "
				 "listen \"127.0.0.1:8080\"");
	/* Nor one a wildcard listen holds (its bind would fail at
	 * start-up), in either direction; another port or family may. */
	assert_int_equal(config_set(c, "listen", "8080", true, err,
				    sizeof(err)),
			 0);
	assert_int_equal(config_finalize(c, err, sizeof(err)), -EINVAL);
	assert_string_equal(err, "metrics_listen \"127.0.0.1:8080\" overlaps "
				 "listen \"8080\"");
	assert_int_equal(config_set(c, "listen", "[::]:8080", true, err,
				    sizeof(err)),
			 0);
	assert_int_equal(config_finalize(c, err, sizeof(err)), 0);
	assert_int_equal(config_set(c, "metrics_listen", "[::1]:8080", false,
				    err, sizeof(err)),
			 0);
	assert_int_equal(config_finalize(c, err, sizeof(err)), -EINVAL);
	assert_string_equal(err, "metrics_listen \"[::1]:8080\" overlaps "
				 "listen \"[::]:8080\"");
	assert_int_equal(config_set(c, "listen", "127.0.0.1:8081", true, err,
				    sizeof(err)),
			 0);
	assert_int_equal(config_set(c, "metrics_listen", "0.0.0.0:8081",
				    false, err, sizeof(err)),
			 0);
	assert_int_equal(config_finalize(c, err, sizeof(err)), -EINVAL);
	assert_string_equal(err, "metrics_listen \"0.0.0.0:8081\" overlaps "
				 "listen \"127.0.0.1:8081\"");
	assert_int_equal(config_set(c, "metrics_listen", "0.0.0.0:8082",
				    false, err, sizeof(err)),
			 0);
	assert_int_equal(config_finalize(c, err, sizeof(err)), 0);
	config_free(c);
	assert_int_equal(count_fds(), fds);
}

/* The mime_types file is read as the configuration is: a regular file
 * of at most 1 MiB without NUL bytes. A wrong path must fail the load
 * (a reload keeps the running table), never block or eat memory. */
static void mime_fails(const char *path, int ret, const char *why)
{
	struct orcd_config *c = finalizable();

	assert_int_equal(
		config_set(c, "mime_types", path, false, err, sizeof(err)), 0);
	alarm(10);
	assert_int_equal(config_finalize(c, err, sizeof(err)), ret);
	alarm(0);
	snprintf(want, sizeof(want), "mime_types \"%s\": %s", path, why);
	assert_string_equal(err, want);
	assert_int_equal(c->root_fd, -1);
	assert_null(c->mime);
	config_free(c);
}

static void test_finalize_mime_file(void **state)
{
	int fds = count_fds();
	size_t n = (1u << 20) + 1;
	char p[160], *big = malloc(n);

	(void)state;
	assert_non_null(big);
	mime_fails("/dev/zero", -EINVAL, "not a regular file");
	snprintf(p, sizeof(p), "%s/fifo.types", tmpdir);
	assert_int_equal(mkfifo(p, 0600), 0);
	mime_fails(p, -EINVAL, "not a regular file");
	unlink(p);
	mime_fails(tmpdir, -EISDIR, "Is a directory");
	snprintf(p, sizeof(p), "%s/nul.types", tmpdir);
	write_file(p, "text/plain txt\nimage/png p\0ng\n", 30);
	mime_fails(p, -EINVAL, "line 2: NUL byte in file");
	memset(big, '#', n);
	write_file(p, big, n);
	mime_fails(p, -EFBIG, "larger than 1048576 bytes");
	unlink(p);
	free(big);
	assert_int_equal(count_fds(), fds);
}

/* Checks across directives name the file and a line that set one. */
static void test_finalize_says_where(void **state)
{
	struct orcd_config *c;
	char text[512], www[160], types[160];
	int n;

	(void)state;
	snprintf(www, sizeof(www), "%s/www", tmpdir);
	mkdir(www, 0755);
	snprintf(types, sizeof(types), "%s/where.types", tmpdir);
	write_file(types, "text/x-test tst\n", 16);
	n = snprintf(text, sizeof(text),
		     "root %s;\nmime_types %s;\n# a comment\n"
		     "max_request_line 32k;\n",
		     www, types);
	assert_true(n > 0 && (size_t)n < sizeof(text));
	c = load_ok(text);
	assert_int_equal(config_finalize(c, err, sizeof(err)), -EINVAL);
	snprintf(want, sizeof(want),
		 "%s:4: max_request_line (32768) is larger than "
		 "max_header_bytes (16384)",
		 conf);
	assert_string_equal(err, want);
	config_free(c);

	/* Only the other directive set: its line. */
	snprintf(text, sizeof(text),
		 "root %s;\nmime_types %s;\nmax_header_bytes 4k;\n", www,
		 types);
	c = load_ok(text);
	assert_int_equal(config_finalize(c, err, sizeof(err)), -EINVAL);
	snprintf(want, sizeof(want),
		 "%s:3: max_request_line (8192) is larger than "
		 "max_header_bytes (4096)",
		 conf);
	assert_string_equal(err, want);
	config_free(c);

	snprintf(text, sizeof(text),
		 "root %s;\nmime_types %s;\nbuffer_size 4k;\n", www, types);
	c = load_ok(text);
	assert_int_equal(config_finalize(c, err, sizeof(err)), -EINVAL);
	snprintf(want, sizeof(want),
		 "%s:3: max_header_bytes (16384) is larger than buffer_size "
		 "(4096): a request head must fit in the buffer",
		 conf);
	assert_string_equal(err, want);
	config_free(c);

	/* The limits themselves are allowed: a head as large as the buffer,
	 * a request line as large as the head. */
	snprintf(text, sizeof(text),
		 "root %s;\nmime_types %s;\nbuffer_size 16k;\n"
		 "max_header_bytes 16k;\nmax_request_line 16k;\n",
		 www, types);
	c = load_ok(text);
	assert_int_equal(config_finalize(c, err, sizeof(err)), 0);
	config_free(c);

	snprintf(text, sizeof(text),
		 "root %s;\nmime_types %s;\nmetrics on;\n"
		 "metrics_listen 127.0.0.1:8080;\n",
		 www, types);
	c = load_ok(text);
	assert_int_equal(config_finalize(c, err, sizeof(err)), -EINVAL);
	snprintf(want, sizeof(want),
		 "%s:4: metrics_listen \"127.0.0.1:8080\" overlaps listen "
		 "\"127.0.0.1:8080\"",
		 conf);
	assert_string_equal(err, want);
	config_free(c);
}

/* ---- references ---- */

static void test_refcount(void **state)
{
	struct orcd_config *c = finalizable();
	int fd;

	(void)state;
	assert_int_equal(config_finalize(c, err, sizeof(err)), 0);
	fd = c->root_fd;
	assert_int_equal(c->refs, 1);
	assert_ptr_equal(config_get(c), c);
	assert_ptr_equal(config_get(c), c);
	assert_int_equal(c->refs, 3);
	config_put(c);
	config_put(c);
	assert_int_equal(c->refs, 1);
	/* Still alive: its root fd is open. */
	assert_int_not_equal(fcntl(fd, F_GETFD), -1);
	config_put(c);
	/* The last put freed it and closed the root. */
	assert_int_equal(fcntl(fd, F_GETFD), -1);
	assert_int_equal(errno, EBADF);
	config_put(NULL);
	config_free(NULL);

	/* config_free ignores references. */
	c = finalizable();
	assert_int_equal(config_finalize(c, err, sizeof(err)), 0);
	fd = c->root_fd;
	config_get(c);
	config_free(c);
	assert_int_equal(fcntl(fd, F_GETFD), -1);
}

static const char *const all_directives[] = {
	"listen",
	"root",
	"index",
	"engine",
	"threads",
	"worker_cpu_affinity",
	"slots",
	"stat_cache",
	"accepts",
	"batch_wait_us",
	"max_connections",
	"idle_timeout",
	"header_timeout",
	"send_timeout",
	"worker_shutdown_timeout",
	"max_request_line",
	"max_header_bytes",
	"max_headers",
	"buffer_size",
	"access_log",
	"user",
	"group",
	"mime_types",
	"default_type",
	"metrics",
	"metrics_listen",
	"metrics_path",
};

#define N_DIRECTIVES (sizeof(all_directives) / sizeof(*all_directives))

static bool listed(const char *name)
{
	for (size_t i = 0; i < N_DIRECTIVES; i++)
		if (!strcmp(all_directives[i], name))
			return true;
	return false;
}

/* Every directive is known to config_set, and nothing else is; the
 * table has exactly the directives listed here. */
static void test_directive_list(void **state)
{
	struct orcd_config *c = config_new();
	size_t n = 0;
	const char *name;

	(void)state;
	for (size_t i = 0; i < N_DIRECTIVES; i++) {
		err[0] = '\0';
		config_set(c, all_directives[i], "", false, err, sizeof(err));
		assert_null(strstr(err, "unknown directive"));
	}
	config_free(c);
	for (; (name = config_directive_name(n)); n++) {
		if (!listed(name))
			print_error("%s is not in all_directives\n", name);
		assert_true(listed(name));
	}
	assert_int_equal(n, N_DIRECTIVES);
}

/* Every directive says when a change to it takes effect, so a reload can
 * warn about the ones it cannot apply (none is forgotten by omission). */
static void test_every_directive_says_when_it_applies(void **state)
{
	(void)state;
	for (size_t i = 0; i < sizeof(all_directives) / sizeof(*all_directives);
	     i++) {
		enum config_apply a = config_directive_apply(all_directives[i]);

		if (a < CONFIG_ON_RELOAD || a > CONFIG_ON_RESTART)
			print_error("%s: no apply class\n", all_directives[i]);
		assert_in_range(a, CONFIG_ON_RELOAD, CONFIG_ON_RESTART);
	}
	assert_int_equal(config_directive_apply("no_such"), 0);
}

struct seen {
	char text[8][128];
	unsigned n;
};

static void note_change(void *ctx, const char *directive, const char *was,
			const char *now)
{
	struct seen *s = ctx;

	if (s->n < 8)
		snprintf(s->text[s->n], sizeof(s->text[0]), "%s %s %s",
			 directive, was, now);
	s->n++;
}

static void test_unapplied_changes(void **state)
{
	struct orcd_config *a = config_new(), *b = config_new();
	struct seen s = {0};

	(void)state;
	assert_int_equal(config_unapplied(a, b, false, note_change, &s), 0);
	assert_int_equal(config_set(b, "slots", "512", false, err,
				    sizeof(err)), 0);
	assert_int_equal(config_set(b, "threads", "4", false, err,
				    sizeof(err)), 0);
	assert_int_equal(config_set(b, "user", "nobody", false, err,
				    sizeof(err)), 0);
	/* Applied by a reload: not reported. */
	assert_int_equal(config_set(b, "send_timeout", "5s", false, err,
				    sizeof(err)), 0);
	assert_int_equal(config_set(b, "max_header_bytes", "1k", false, err,
				    sizeof(err)), 0);
	assert_int_equal(config_unapplied(a, b, false, note_change, &s), 3);
	assert_string_equal(s.text[0], "threads 1 4");
	assert_string_equal(s.text[1], "slots 4096 512");
	assert_string_equal(s.text[2], "user (unset) nobody");
	/* New workers take slots. */
	s.n = 0;
	assert_int_equal(config_unapplied(a, b, true, note_change, &s), 2);
	config_free(a);
	config_free(b);
}

/* Equal in every value a directive sets (strings by content), else
 * the first that differs is printed and the test fails. */
static bool str_same(const char *a, const char *b)
{
	return a == b || (a && b && !strcmp(a, b));
}

static bool listen_same(const struct orcd_listen *a,
			const struct orcd_listen *b)
{
	return a->addrlen == b->addrlen && !strcmp(a->text, b->text) &&
	       !memcmp(&a->addr, &b->addr, a->addrlen);
}

#define SAME(cond, what)                                              \
	do {                                                          \
		if (!(cond)) {                                        \
			print_error("%s: %s differs\n", label, what); \
			fail();                                       \
		}                                                     \
	} while (0)

static void assert_same_values(const struct orcd_config *a,
			       const struct orcd_config *b, const char *label)
{
	SAME(a->n_listen == b->n_listen, "n_listen");
	for (unsigned i = 0; i < a->n_listen; i++)
		SAME(listen_same(&a->listen[i], &b->listen[i]), "listen");
	SAME(str_same(a->root, b->root), "root");
	SAME(str_same(a->index, b->index), "index");
	SAME(a->engine == b->engine, "engine");
	SAME(a->threads == b->threads, "threads");
	SAME(a->cpu_affinity == b->cpu_affinity, "worker_cpu_affinity");
	SAME(a->slots == b->slots, "slots");
	SAME(a->stat_cache == b->stat_cache, "stat_cache");
	SAME(a->accepts == b->accepts, "accepts");
	SAME(a->batch_wait_us == b->batch_wait_us, "batch_wait_us");
	SAME(a->max_connections == b->max_connections, "max_connections");
	SAME(a->idle_timeout_ms == b->idle_timeout_ms, "idle_timeout");
	SAME(a->header_timeout_ms == b->header_timeout_ms, "header_timeout");
	SAME(a->send_timeout_ms == b->send_timeout_ms, "send_timeout");
	SAME(a->max_request_line == b->max_request_line, "max_request_line");
	SAME(a->max_header_bytes == b->max_header_bytes, "max_header_bytes");
	SAME(a->max_headers == b->max_headers, "max_headers");
	SAME(a->buffer_size == b->buffer_size, "buffer_size");
	SAME(str_same(a->access_log, b->access_log), "access_log");
	SAME(str_same(a->user, b->user), "user");
	SAME(str_same(a->group, b->group), "group");
	SAME(str_same(a->mime_types, b->mime_types), "mime_types");
	SAME(str_same(a->default_type, b->default_type), "default_type");
	SAME(a->metrics == b->metrics, "metrics");
	SAME(listen_same(&a->metrics_listen, &b->metrics_listen),
	     "metrics_listen");
	SAME(str_same(a->metrics_path, b->metrics_path), "metrics_path");
}

/* Two strings that a warning shows alike (cut at 200 bytes, quotes and
 * backslashes escaped) but that differ: a kept value must be the value,
 * not its text. */
static char long_a[300], long_b[300];

static void make_long_values(void)
{
	static const char head[] = "/var/log/q\"b\\s/";

	memset(long_a, 'x', sizeof(long_a) - 1);
	memcpy(long_a, head, sizeof(head) - 1);
	memcpy(long_b, long_a, sizeof(long_a));
	long_b[sizeof(long_b) - 2] = 'y';
}

/* A running value and a file's value, NULL for the default (unset). */
struct pair {
	const char *directive, *was, *now;
};

static const struct pair keep_pairs[] = {
	{"engine", "direct", "epoll"},
	{"engine", "auto", "specific"},
	{"threads", "3", "8"},
	{"threads", "0", "1"},
	{"worker_cpu_affinity", "auto", "off"},
	{"worker_cpu_affinity", "off", "auto"},
	{"slots", "256", "512"},
	{"accepts", "4", "8"},
	{"batch_wait_us", "0", "200"},
	{"access_log", long_a, long_b},
	{"access_log", "off", "/var/log/orcd.log"},
	{"access_log", "-", "off"},
	{"user", NULL, "nobody"},
	{"user", "a\"b\\c", NULL},
	{"user", long_a, long_b},
	{"group", NULL, "nogroup"},
	{"group", "a\"b\\c", NULL},
	{"group", long_a, long_b},
	{"metrics", "on", "off"},
	{"metrics", "off", "on"},
	{"metrics_listen", "[::1]:9100", "127.0.0.2:9101"},
	{"metrics_listen", "*:9100", "[::1]:9100"},
};

/* A fresh config with one directive set (NULL: left at its default)
 * and send_timeout, which a reload applies, set to st. */
static struct orcd_config *with(const char *d, const char *v, const char *st)
{
	struct orcd_config *c = config_new();

	assert_non_null(c);
	if (v && config_set(c, d, v, false, err, sizeof(err)))
		print_error("%s %s: %s\n", d, v, err);
	assert_int_equal(v ? config_set(c, d, v, false, err, sizeof(err)) : 0,
			 0);
	if (st)
		assert_int_equal(config_set(c, "send_timeout", st, false, err,
					    sizeof(err)),
				 0);
	return c;
}

/* One pair, kept with or without new workers: `now` ends as `expect`,
 * and owns what it holds (`was` is freed before the comparison). */
static void keep_one(const struct pair *p, bool new_workers)
{
	enum config_apply a = config_directive_apply(p->directive);
	bool applies = a == CONFIG_ON_NEW_WORKERS && new_workers;
	struct orcd_config *was = with(p->directive, p->was, NULL);
	struct orcd_config *now = with(p->directive, p->now, "5s");
	struct orcd_config *expect =
		with(p->directive, applies ? p->now : p->was, "5s");
	struct seen s = {0};
	char label[128];

	snprintf(label, sizeof(label), "%s %.20s -> %.20s%s", p->directive,
		 p->was ? p->was : "(unset)", p->now ? p->now : "(unset)",
		 new_workers ? " with new workers" : "");
	/* Not 1 for every pair: long_a and long_b are shown alike. */
	assert_in_range(config_unapplied(was, now, new_workers, note_change,
					 &s),
			0, applies ? 0 : 1);
	assert_int_equal(config_keep_running(was, now, new_workers), 0);
	s.n = 0;
	assert_int_equal(
		config_unapplied(was, now, new_workers, note_change, &s), 0);
	config_free(was);
	assert_same_values(now, expect, label);
	config_free(now);
	config_free(expect);
}

/*
 * After a reload, the configuration it installs says what runs: every
 * directive that a reload cannot apply (all of the table's, looked up
 * there) keeps the running value, whole, and nothing else changes.
 */
static void test_keep_running(void **state)
{
	const char *name;

	(void)state;
	make_long_values();
	for (size_t i = 0; (name = config_directive_name(i)); i++) {
		unsigned pairs = 0;

		if (config_directive_apply(name) == CONFIG_ON_RELOAD)
			continue;
		for (size_t k = 0; k < sizeof(keep_pairs) / sizeof(*keep_pairs);
		     k++) {
			if (strcmp(keep_pairs[k].directive, name))
				continue;
			keep_one(&keep_pairs[k], false);
			keep_one(&keep_pairs[k], true);
			pairs++;
		}
		if (!pairs)
			print_error("%s: no values in keep_pairs\n", name);
		assert_int_not_equal(pairs, 0);
	}
}

/* Strings alike in what a warning shows (the first 200 bytes) that
 * differ after it: still a change, and reported once. */
static void test_unapplied_long_strings(void **state)
{
	static const char *const names[] = {"access_log", "user", "group"};
	char v1[256], v2[256];

	(void)state;
	memset(v1, 'a', sizeof(v1) - 1);
	v1[0] = '/';
	v1[sizeof(v1) - 1] = '\0';
	memcpy(v2, v1, sizeof(v2));
	v2[211] = 'b';
	for (size_t i = 0; i < sizeof(names) / sizeof(*names); i++) {
		struct orcd_config *a = with(names[i], v1, NULL);
		struct orcd_config *b = with(names[i], v2, NULL);
		struct orcd_config *c = with(names[i], v1, NULL);
		struct seen s = {0};
		size_t n = strlen(names[i]);

		assert_int_equal(config_unapplied(a, b, false, note_change, &s),
				 1);
		assert_true(!strncmp(s.text[0], names[i], n) &&
			    s.text[0][n] == ' ');
		s.n = 0;
		assert_int_equal(config_unapplied(a, b, true, note_change, &s),
				 1);
		/* The same long value: nothing to say. */
		s.n = 0;
		assert_int_equal(config_unapplied(a, c, false, note_change, &s),
				 0);
		config_free(a);
		config_free(b);
		config_free(c);
	}
}

/* threads 4, reloaded to 8 (kept at 4), then to 4: nothing to say. */
static void test_second_reload_compares_with_what_runs(void **state)
{
	struct orcd_config *run = with("threads", "4", NULL);
	struct orcd_config *file = with("threads", "8", NULL);
	struct seen s = {0};

	(void)state;
	assert_int_equal(config_unapplied(run, file, false, note_change, &s),
			 1);
	assert_string_equal(s.text[0], "threads 4 8");
	assert_int_equal(config_keep_running(run, file, false), 0);
	config_free(run);
	run = file; /* what the reload installed */
	file = with("threads", "4", NULL);
	s.n = 0;
	assert_int_equal(config_unapplied(run, file, false, note_change, &s),
			 0);
	assert_int_equal(config_keep_running(run, file, false), 0);
	config_free(run);
	run = file;
	file = with("threads", "8", NULL);
	assert_int_equal(config_unapplied(run, file, false, note_change, &s),
			 1);
	assert_string_equal(s.text[0], "threads 4 8");
	config_free(run);
	config_free(file);
}

/* The same address written another way is the same socket: no "needs a
 * restart"; another address is. */
static void test_metrics_listen_compared_as_an_address(void **state)
{
	struct orcd_config *run = with("metrics_listen", "127.0.0.1:9180",
				       NULL);
	struct orcd_config *same = with("metrics_listen", "127.0.0.1:09180",
					NULL);
	struct orcd_config *other = with("metrics_listen", "127.0.0.2:9180",
					 NULL);
	struct seen s = {0};

	(void)state;
	assert_int_equal(config_unapplied(run, same, false, note_change, &s),
			 0);
	assert_int_equal(config_unapplied(run, other, false, note_change, &s),
			 1);
	assert_string_equal(s.text[0],
			    "metrics_listen 127.0.0.1:9180 127.0.0.2:9180");
	config_free(run);
	config_free(same);
	config_free(other);
}

static char *read_source_file(const char *rel)
{
	const char *src = getenv("ORCD_SOURCE_DIR");
	char path[512];
	char *text = NULL;
	size_t cap = 0;
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s", src ? src : ".", rel);
	f = fopen(path, "r");
	if (!f)
		fail_msg("cannot read %s (is ORCD_SOURCE_DIR the source tree?)",
			 path);
	assert_int_not_equal(getdelim(&text, &cap, '\0', f), -1);
	fclose(f);
	return text;
}

/* Fields a file can set compare equal (root aside). */
static void assert_same_settings(const struct orcd_config *a,
				 const struct orcd_config *b)
{
	assert_int_equal(a->n_listen, b->n_listen);
	for (unsigned i = 0; i < a->n_listen; i++) {
		assert_string_equal(a->listen[i].text, b->listen[i].text);
		assert_memory_equal(&a->listen[i].addr, &b->listen[i].addr,
				    a->listen[i].addrlen);
	}
	assert_string_equal(a->index, b->index);
	assert_int_equal(a->engine, b->engine);
	assert_int_equal(a->threads, b->threads);
	assert_int_equal(a->slots, b->slots);
	assert_int_equal(a->accepts, b->accepts);
	assert_int_equal(a->max_connections, b->max_connections);
	assert_int_equal(a->idle_timeout_ms, b->idle_timeout_ms);
	assert_int_equal(a->header_timeout_ms, b->header_timeout_ms);
	assert_int_equal(a->send_timeout_ms, b->send_timeout_ms);
	assert_int_equal(a->max_request_line, b->max_request_line);
	assert_int_equal(a->max_header_bytes, b->max_header_bytes);
	assert_int_equal(a->max_headers, b->max_headers);
	assert_int_equal(a->buffer_size, b->buffer_size);
	assert_ptr_equal(a->access_log == NULL, b->access_log == NULL);
	assert_ptr_equal(a->user == NULL, b->user == NULL);
	assert_ptr_equal(a->group == NULL, b->group == NULL);
	assert_string_equal(a->mime_types, b->mime_types);
	assert_string_equal(a->default_type, b->default_type);
	assert_int_equal(a->metrics, b->metrics);
	assert_string_equal(a->metrics_listen.text, b->metrics_listen.text);
	assert_string_equal(a->metrics_path, b->metrics_path);
}

/*
 * The shipped configuration parses, names every directive, and each
 * "#directive value;" line it shows as the default really is one.
 */
static void test_shipped_config(void **state)
{
	struct orcd_config *c, *defaults = config_new();
	char *text = read_source_file("conf/orcd.conf");
	char line[64];
	int ret;

	(void)state;
	c = load_ok(text);
	assert_string_equal(c->root, "/var/www/orcd");
	assert_same_settings(c, defaults);
	config_free(c);

	for (size_t i = 0; i < sizeof(all_directives) / sizeof(*all_directives);
	     i++) {
		snprintf(line, sizeof(line), "\n#%s ", all_directives[i]);
		if (!strstr(text, line)) {
			snprintf(line, sizeof(line), "\n# %s ",
				 all_directives[i]);
			if (!strstr(text, line))
				snprintf(line, sizeof(line), "\n%s ",
					 all_directives[i]);
		}
		if (!strstr(text, line))
			print_error("conf/orcd.conf lacks %s\n",
				    all_directives[i]);
		assert_non_null(strstr(text, line));
	}

	/* Uncomment the defaults: nothing may change. */
	for (char *p = text; (p = strstr(p, "\n#")); p++)
		if (p[2] >= 'a' && p[2] <= 'z')
			p[1] = ' ';
	c = load(text, &ret);
	if (ret)
		print_error("%s\n", err);
	assert_int_equal(ret, 0);
	assert_same_settings(c, defaults);
	config_free(c);
	config_free(defaults);
	free(text);
}

/* conf/DIRECTIVES.md has a section for every directive. */
static void test_reference_documents_every_directive(void **state)
{
	char *text = read_source_file("conf/DIRECTIVES.md");
	char heading[64];

	(void)state;
	for (size_t i = 0; i < sizeof(all_directives) / sizeof(*all_directives);
	     i++) {
		snprintf(heading, sizeof(heading), "\n### `%s`",
			 all_directives[i]);
		if (!strstr(text, heading))
			print_error("conf/DIRECTIVES.md lacks %s\n", heading + 1);
		assert_non_null(strstr(text, heading));
	}
	free(text);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_defaults),
		cmocka_unit_test(test_every_directive),
		cmocka_unit_test(test_engine_names),
		cmocka_unit_test(test_metrics_switch),
		cmocka_unit_test(test_cpu_affinity_switch),
		cmocka_unit_test(test_access_log_forms),
		cmocka_unit_test(test_string_values),
		cmocka_unit_test(test_uint_ranges),
		cmocka_unit_test(test_bad_numbers),
		cmocka_unit_test(test_durations),
		cmocka_unit_test(test_sizes),
		cmocka_unit_test(test_listen_forms),
		cmocka_unit_test(test_listen_errors),
		cmocka_unit_test(test_listen_list),
		cmocka_unit_test(test_syntax),
		cmocka_unit_test(test_syntax_errors),
		cmocka_unit_test(test_value_errors_name_file_and_line),
		cmocka_unit_test(test_file_errors),
		cmocka_unit_test(test_file_too_large),
		cmocka_unit_test(test_config_set_messages),
		cmocka_unit_test(test_finalize_ok),
		cmocka_unit_test(test_finalize_errors),
		cmocka_unit_test(test_finalize_mime_file),
		cmocka_unit_test(test_finalize_says_where),
		cmocka_unit_test(test_refcount),
		cmocka_unit_test(test_directive_list),
		cmocka_unit_test(test_every_directive_says_when_it_applies),
		cmocka_unit_test(test_unapplied_changes),
		cmocka_unit_test(test_unapplied_long_strings),
		cmocka_unit_test(test_keep_running),
		cmocka_unit_test(test_second_reload_compares_with_what_runs),
		cmocka_unit_test(test_metrics_listen_compared_as_an_address),
		cmocka_unit_test(test_shipped_config),
		cmocka_unit_test(test_reference_documents_every_directive),
	};

	return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
