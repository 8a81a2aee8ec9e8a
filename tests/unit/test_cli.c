// SPDX-License-Identifier: MIT
/* Command line: every flag in both forms, errors, overrides over the file. */
#include <errno.h>
#include <netinet/in.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "cli.h"
#include "config.h"
#include "server.h"

static struct cli_opts o;
static char err[512];
static char tmpdir[64];
static char conf[128];

static int group_setup(void **state)
{
	(void)state;
	snprintf(tmpdir, sizeof(tmpdir), "%s/orcd-cli-XXXXXX",
		 getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
	if (!mkdtemp(tmpdir))
		return -1;
	snprintf(conf, sizeof(conf), "%s/orcd.conf", tmpdir);
	return 0;
}

static int group_teardown(void **state)
{
	(void)state;
	unlink(conf);
	return rmdir(tmpdir);
}

/* cli_parse("orcd" + args), args NULL-terminated. */
static int parse_v(const char *const *args)
{
	char *argv[200] = {"orcd"};
	int argc = 1;

	while (*args)
		argv[argc++] = (char *)*args++;
	argv[argc] = NULL;
	err[0] = '\0';
	/* Poison o so that cli_parse must initialise every field. */
	memset(&o, 0xa5, sizeof(o));
	return cli_parse(argc, argv, &o, err, sizeof(err));
}

#define parse(...) parse_v((const char *const[]){__VA_ARGS__, NULL})

#define assert_fails(msg, ...)                                 \
	do {                                                   \
		assert_int_equal(parse(__VA_ARGS__), -EINVAL); \
		assert_string_equal(err, msg);                 \
	} while (0)

static void assert_set(unsigned i, const char *d, const char *v)
{
	assert_true(i < o.n_set);
	assert_string_equal(o.set[i].directive, d);
	assert_string_equal(o.set[i].value, v);
}

static unsigned port_of(const struct orcd_listen *l)
{
	return ntohs(((const struct sockaddr_in *)&l->addr)->sin_port);
}

static void test_no_arguments(void **state)
{
	(void)state;
	assert_int_equal(parse_v((const char *const[]){NULL}), 0);
	assert_null(o.config_file);
	assert_false(o.config_explicit);
	assert_false(o.check_config);
	assert_false(o.help);
	assert_false(o.version);
	assert_int_equal(o.n_set, 0);
}

static void test_config_file(void **state)
{
	(void)state;
	assert_int_equal(parse("-c", "/etc/a.conf"), 0);
	assert_string_equal(o.config_file, "/etc/a.conf");
	assert_true(o.config_explicit);
	assert_int_equal(o.n_set, 0);
	assert_int_equal(parse("-c/etc/b.conf"), 0);
	assert_string_equal(o.config_file, "/etc/b.conf");
	assert_int_equal(parse("--config", "/etc/c.conf"), 0);
	assert_string_equal(o.config_file, "/etc/c.conf");
	assert_true(o.config_explicit);
	assert_int_equal(parse("--config=/etc/d.conf"), 0);
	assert_string_equal(o.config_file, "/etc/d.conf");
	/* The last one wins. */
	assert_int_equal(parse("-c", "a", "--config", "b"), 0);
	assert_string_equal(o.config_file, "b");
}

static void test_overrides_both_forms(void **state)
{
	(void)state;
	assert_int_equal(parse("--root", "/srv/a", "--listen", "81", "--engine",
			       "epoll", "--threads", "4"),
			 0);
	assert_int_equal(o.n_set, 4);
	assert_set(0, "root", "/srv/a");
	assert_set(1, "listen", "81");
	assert_set(2, "engine", "epoll");
	assert_set(3, "threads", "4");
	assert_int_equal(parse("--root=/srv/b", "--listen=[::1]:82",
			       "--engine=direct", "--threads=0"),
			 0);
	assert_int_equal(o.n_set, 4);
	assert_set(0, "root", "/srv/b");
	assert_set(1, "listen", "[::1]:82");
	assert_set(2, "engine", "direct");
	assert_set(3, "threads", "0");
	/* A value may contain '=' and start with '-' in the = form. */
	assert_int_equal(parse("--root=/a=b", "--root=-odd"), 0);
	assert_set(0, "root", "/a=b");
	assert_set(1, "root", "-odd");
	/* A lone "-" is a value, not an option. */
	assert_int_equal(parse("--root", "-"), 0);
	assert_set(0, "root", "-");
}

static void test_switches(void **state)
{
	(void)state;
	assert_int_equal(parse("--check-config"), 0);
	assert_true(o.check_config);
	assert_false(o.help);
	assert_false(o.version);
	assert_int_equal(parse("--version"), 0);
	assert_true(o.version);
	assert_false(o.check_config);
	assert_int_equal(parse("-V"), 0);
	assert_true(o.version);
	assert_int_equal(parse("--help"), 0);
	assert_true(o.help);
	assert_false(o.version);
	assert_int_equal(parse("-h"), 0);
	assert_true(o.help);
	assert_int_equal(parse("-c", "x", "--check-config", "--threads", "2"),
			 0);
	assert_true(o.check_config);
	assert_string_equal(o.config_file, "x");
	assert_set(0, "threads", "2");
}

static void test_errors(void **state)
{
	(void)state;
	assert_fails("unknown option --bogus", "--bogus");
	assert_fails("unknown option --bogus", "--bogus=1");
	assert_fails("unknown option --roo", "--roo", "/x");
	assert_fails("unknown option -x", "-x");
	assert_fails("unknown option --ROOT", "--ROOT", "/x");
	assert_fails("unexpected argument \"serve\"", "serve");
	assert_fails("unexpected argument \"--\"", "--");
	assert_fails("unexpected argument \"-\"", "-");
	assert_fails("--root needs a value", "--root");
	assert_fails("-c needs a value", "-c");
	assert_fails("--config needs a value", "--config");
	assert_fails("--root needs a value", "--root", "--listen", "80");
	assert_fails("--threads needs a value", "--threads", "-1");
	assert_fails("--help takes no value", "--help=yes");
	assert_fails("--check-config takes no value", "--check-config=1");
	assert_fails("-h takes no value", "-hV");
	assert_fails("--config: empty file name", "--config=");
	/* Messages stay on one line and short. */
	assert_fails("unexpected argument \"a?b\"", "a\nb");
	assert_fails("unknown option --x?y", "--x\ny=1");
	assert_fails("unknown option -?", "-\t");
	assert_fails("unexpected argument "
		     "\"012345678901234567890123456789012345678901234567...\"",
		     "0123456789012345678901234567890123456789012345678901234");
	/* Errors stop the parse even after good options. */
	assert_fails("unknown option --nope", "--threads", "2", "--nope");
}

static void test_bad_values_name_the_flag(void **state)
{
	(void)state;
	assert_fails("--threads \"300\": out of range (0..256)", "--threads",
		     "300");
	assert_fails("--threads \"abc\": expected a whole number",
		     "--threads=abc");
	assert_fails("--engine \"fast\": expected auto, specific, direct or "
		     "epoll",
		     "--engine", "fast");
	assert_fails("--listen \"1.2.3.4\": bad port (expected 1..65535)",
		     "--listen", "1.2.3.4");
	assert_fails("--listen \"::1:80\": IPv6 addresses need brackets: "
		     "[ADDR]:PORT",
		     "--listen=::1:80");
	assert_fails("--root \"\": empty value", "--root=");
	assert_fails("--listen \"*:80\": same address as listen \"80\"",
		     "--listen", "80", "--listen", "*:80");
}

static void test_limits(void **state)
{
	static char ports[ORCD_MAX_LISTEN + 1][8];
	const char *args[2 * CLI_MAX_SET + 4];
	int n = 0;

	(void)state;
	/* ORCD_MAX_LISTEN listens are fine, one more is not. */
	for (int i = 0; i <= ORCD_MAX_LISTEN; i++) {
		snprintf(ports[i], sizeof(ports[i]), "%d", 2000 + i);
		args[n++] = "--listen";
		args[n++] = ports[i];
		if (i == ORCD_MAX_LISTEN - 1) {
			args[n] = NULL;
			assert_int_equal(parse_v(args), 0);
			assert_int_equal(o.n_set, ORCD_MAX_LISTEN);
		}
	}
	args[n] = NULL;
	assert_int_equal(parse_v(args), -EINVAL);
	assert_string_equal(err, "--listen \"2016\": too many listen addresses "
				 "(at most 16)");

	/* At most CLI_MAX_SET overrides. */
	n = 0;
	for (int i = 0; i < CLI_MAX_SET; i++) {
		args[n++] = "--root";
		args[n++] = "/x";
	}
	args[n] = NULL;
	assert_int_equal(parse_v(args), 0);
	assert_int_equal(o.n_set, CLI_MAX_SET);
	args[n++] = "--threads";
	args[n++] = "1";
	args[n] = NULL;
	assert_int_equal(parse_v(args), -EINVAL);
	assert_string_equal(err, "--threads: too many options (at most 64)");
}

static void write_conf(const char *text)
{
	FILE *f = fopen(conf, "w");

	assert_non_null(f);
	fputs(text, f);
	assert_int_equal(fclose(f), 0);
}

/* The order main/server use: file, then overrides. */
static struct orcd_config *file_then_flags(void)
{
	struct orcd_config *c = config_new();

	assert_non_null(c);
	if (o.config_file)
		assert_int_equal(config_load_file(c, o.config_file, err,
						  sizeof(err)),
				 0);
	assert_int_equal(cli_apply(&o, c, err, sizeof(err)), 0);
	return c;
}

static void test_overrides_beat_the_file(void **state)
{
	struct orcd_config *c;

	(void)state;
	write_conf("root /from/file;\n"
		   "listen 81; listen 82;\n"
		   "threads 2;\n"
		   "engine direct;\n"
		   "index file.html;\n");
	assert_int_equal(parse("-c", conf, "--root", "/from/flag", "--listen",
			       "90", "--threads=3"),
			 0);
	c = file_then_flags();
	assert_string_equal(c->root, "/from/flag");
	/* --listen replaced the file's two listens. */
	assert_int_equal(c->n_listen, 1);
	assert_int_equal(port_of(&c->listen[0]), 90);
	assert_int_equal(c->threads, 3);
	/* What no flag touched comes from the file. */
	assert_int_equal(c->engine, ORCD_ENGINE_DIRECT);
	assert_string_equal(c->index, "file.html");
	config_free(c);

	/* Several --listen: all of them, in order, and only them. */
	assert_int_equal(
		parse("-c", conf, "--listen", "91", "--listen", "[::1]:92"), 0);
	c = file_then_flags();
	assert_int_equal(c->n_listen, 2);
	assert_int_equal(port_of(&c->listen[0]), 91);
	assert_string_equal(c->listen[1].text, "[::1]:92");
	assert_string_equal(c->root, "/from/file");
	/* Applying again (a reload) gives the same list. */
	assert_int_equal(cli_apply(&o, c, err, sizeof(err)), 0);
	assert_int_equal(c->n_listen, 2);
	config_free(c);

	/* Without --listen the file's list stays. */
	assert_int_equal(parse("-c", conf, "--engine", "epoll"), 0);
	c = file_then_flags();
	assert_int_equal(c->n_listen, 2);
	assert_int_equal(port_of(&c->listen[1]), 82);
	assert_int_equal(c->engine, ORCD_ENGINE_EPOLL);
	config_free(c);

	/* A repeated flag: the last one wins. */
	assert_int_equal(parse("--root", "/a", "--root", "/b"), 0);
	c = file_then_flags();
	assert_string_equal(c->root, "/b");
	config_free(c);
}

/* Without -c the default file is chosen once, and a reload (another
 * server_load_config) reads that file or fails: it never falls back to
 * the built-in defaults because the file went away. */
static void test_default_file_chosen_once(void **state)
{
	char link[160], notdir[160];
	struct orcd_config *c = NULL;

	(void)state;
	unlink(conf);
	assert_int_equal(parse_v((const char *const[]){NULL}), 0);
	assert_int_equal(cli_pick_config(&o, conf, err, sizeof(err)), 0);
	assert_null(o.config_file);

	write_conf("root /;\nindex from-default.html;\n");
	assert_int_equal(cli_pick_config(&o, conf, err, sizeof(err)), 0);
	assert_string_equal(o.config_file, conf);
	assert_int_equal(server_load_config(&o, &c, err, sizeof(err)), 0);
	assert_string_equal(c->index, "from-default.html");
	config_free(c);
	c = NULL;
	assert_int_equal(unlink(conf), 0);
	assert_int_not_equal(server_load_config(&o, &c, err, sizeof(err)), 0);
	assert_null(c);
	assert_non_null(strstr(err, conf));

	/* -c wins over the default. */
	write_conf("root /x;\n");
	assert_int_equal(parse("-c", "/etc/a.conf"), 0);
	assert_int_equal(cli_pick_config(&o, conf, err, sizeof(err)), 0);
	assert_string_equal(o.config_file, "/etc/a.conf");

	/* A name that cannot be looked at is an error, not "no file". */
	snprintf(notdir, sizeof(notdir), "%s/orcd.conf", conf);
	assert_int_equal(parse_v((const char *const[]){NULL}), 0);
	assert_int_equal(cli_pick_config(&o, notdir, err, sizeof(err)),
			 -ENOTDIR);
	assert_non_null(strstr(err, notdir));
	assert_null(o.config_file);

	/* A dangling symlink is taken, to fail when it is read. */
	snprintf(link, sizeof(link), "%s/link.conf", tmpdir);
	assert_int_equal(symlink("nowhere.conf", link), 0);
	assert_int_equal(cli_pick_config(&o, link, err, sizeof(err)), 0);
	assert_string_equal(o.config_file, link);
	assert_int_not_equal(server_load_config(&o, &c, err, sizeof(err)), 0);
	assert_int_equal(unlink(link), 0);
	unlink(conf);
}

static void test_apply_error_names_the_flag(void **state)
{
	struct cli_opts bad = {.n_set = 2};
	struct orcd_config *c = config_new();

	(void)state;
	bad.set[0].directive = "root";
	bad.set[0].value = "/ok";
	bad.set[1].directive = "threads";
	bad.set[1].value = "many";
	assert_int_equal(cli_apply(&bad, c, err, sizeof(err)), -EINVAL);
	assert_string_equal(err, "--threads \"many\": expected a whole number");
	config_free(c);
}

static void test_usage(void **state)
{
	char *text = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&text, &len);

	(void)state;
	assert_non_null(f);
	cli_usage(f);
	assert_int_equal(fclose(f), 0);
	assert_true(!strncmp(text, "usage: orcd ", 12));
	for (size_t i = 0; i < 8; i++) {
		static const char *const flags[] = {
			"--config",  "--root",	       "--listen",  "--engine",
			"--threads", "--check-config", "--version", "--help",
		};

		assert_non_null(strstr(text, flags[i]));
	}
	free(text);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_no_arguments),
		cmocka_unit_test(test_config_file),
		cmocka_unit_test(test_overrides_both_forms),
		cmocka_unit_test(test_switches),
		cmocka_unit_test(test_errors),
		cmocka_unit_test(test_bad_values_name_the_flag),
		cmocka_unit_test(test_limits),
		cmocka_unit_test(test_overrides_beat_the_file),
		cmocka_unit_test(test_default_file_chosen_once),
		cmocka_unit_test(test_apply_error_names_the_flag),
		cmocka_unit_test(test_usage),
	};

	return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
