// SPDX-License-Identifier: MIT
/*
 * Command line. Options that set a directive are recorded as overrides
 * and applied after the file with config_set(), so a flag and a file
 * line with the same value behave the same; they are also tried on a
 * scratch config while parsing so that a bad value fails at once, with
 * the flag's name, before any file is read.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "cli.h"
#include "config.h"

enum opt_kind {
	OPT_CONFIG,
	OPT_SET,
	OPT_CHECK,
	OPT_HELP,
	OPT_VERSION
};

struct option_def {
	const char *name; /* long name, without "--" */
	char short_name;  /* 0 when none */
	enum opt_kind kind;
	bool has_value;
	const char *directive; /* OPT_SET: the directive it overrides */
};

static const struct option_def options[] = {
	{"config", 'c', OPT_CONFIG, true, NULL},
	{"root", 0, OPT_SET, true, "root"},
	{"listen", 0, OPT_SET, true, "listen"},
	{"engine", 0, OPT_SET, true, "engine"},
	{"threads", 0, OPT_SET, true, "threads"},
	{"check-config", 0, OPT_CHECK, false, NULL},
	{"help", 'h', OPT_HELP, false, NULL},
	{"version", 'V', OPT_VERSION, false, NULL},
};

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

static const struct option_def *find_long(const char *name, size_t len)
{
	for (size_t i = 0; i < sizeof(options) / sizeof(options[0]); i++)
		if (strlen(options[i].name) == len &&
		    !strncmp(options[i].name, name, len))
			return &options[i];
	return NULL;
}

static const struct option_def *find_short(char c)
{
	for (size_t i = 0; i < sizeof(options) / sizeof(options[0]); i++)
		if (options[i].short_name && options[i].short_name == c)
			return &options[i];
	return NULL;
}

/*
 * config_set() says 'threads "x": why'; on the command line the user
 * wrote --threads, so say that instead of the directive's name.
 */
static void flag_error(const char *directive, const char *msg, char *err,
		       size_t cap)
{
	size_t n = strlen(directive);

	if (!strncmp(msg, directive, n) && msg[n] == ' ')
		set_err(err, cap, "--%s%s", directive, msg + n);
	else
		set_err(err, cap, "--%s: %s", directive, msg);
}

/* Applies one override; the first --listen replaces the list. */
static int apply_one(struct orcd_config *c, const char *directive,
		     const char *value, bool *seen_listen, char *err,
		     size_t cap)
{
	bool is_listen = !strcmp(directive, "listen");
	char msg[CONFIG_ERR_MAX];
	int ret;

	ret = config_set(c, directive, value, is_listen && !*seen_listen, msg,
			 sizeof(msg));
	if (ret) {
		flag_error(directive, msg, err, cap);
		return ret;
	}
	if (is_listen)
		*seen_listen = true;
	return 0;
}

static int take(struct cli_opts *o, const struct option_def *d,
		const char *value, struct orcd_config *scratch,
		bool *seen_listen, char *err, size_t cap)
{
	switch (d->kind) {
	case OPT_CONFIG:
		if (!*value) {
			set_err(err, cap, "--config: empty file name");
			return -EINVAL;
		}
		o->config_file = value;
		o->config_explicit = true;
		return 0;
	case OPT_CHECK:
		o->check_config = true;
		return 0;
	case OPT_HELP:
		o->help = true;
		return 0;
	case OPT_VERSION:
		o->version = true;
		return 0;
	case OPT_SET:
		break;
	}
	if (o->n_set >= CLI_MAX_SET) {
		set_err(err, cap, "--%s: too many options (at most %d)",
			d->name, CLI_MAX_SET);
		return -EINVAL;
	}
	if (apply_one(scratch, d->directive, value, seen_listen, err, cap))
		return -EINVAL;
	o->set[o->n_set].directive = d->directive;
	o->set[o->n_set].value = value;
	o->n_set++;
	return 0;
}

/* A value never looks like an option: "--root --listen x" is a mistake,
 * and "--root=-odd" still works. */
static bool looks_like_option(const char *s)
{
	return s[0] == '-' && s[1] != '\0';
}

/*
 * An argument as it may appear in the one-line message: cut to 48 bytes,
 * control bytes shown as '?', so a stray newline cannot split the line.
 */
static void clip(char *dst, size_t cap, const char *s, size_t len)
{
	size_t n = len < 48 ? len : 48;

	if (n >= cap)
		n = cap - 1;
	for (size_t i = 0; i < n; i++) {
		unsigned char c = (unsigned char)s[i];

		dst[i] = c < 0x20 || c == 0x7f ? '?' : (char)c;
	}
	dst[n] = '\0';
	if (n < len && cap > n + 3)
		memcpy(dst + n, "...", 4);
}

static int parse_arg(int argc, char **argv, int *i, struct cli_opts *o,
		     struct orcd_config *scratch, bool *seen_listen, char *err,
		     size_t cap)
{
	const char *arg = argv[*i], *value = NULL;
	const struct option_def *d;
	char shown[64];

	if (arg[0] == '-' && arg[1] == '-' && arg[2]) {
		const char *eq = strchr(arg + 2, '=');
		size_t len = eq ? (size_t)(eq - arg - 2) : strlen(arg + 2);

		d = find_long(arg + 2, len);
		shown[0] = shown[1] = '-';
		clip(shown + 2, sizeof(shown) - 2, arg + 2, len);
		if (eq)
			value = eq + 1;
	} else if (arg[0] == '-' && arg[1] && arg[1] != '-') {
		d = find_short(arg[1]);
		shown[0] = '-';
		clip(shown + 1, sizeof(shown) - 1, arg + 1, 1);
		if (arg[2])
			value = arg + 2; /* -cFILE */
	} else {
		clip(shown, sizeof(shown), arg, strlen(arg));
		set_err(err, cap, "unexpected argument \"%s\"", shown);
		return -EINVAL;
	}
	if (!d) {
		set_err(err, cap, "unknown option %s", shown);
		return -EINVAL;
	}
	if (!d->has_value && value) {
		set_err(err, cap, "%s takes no value", shown);
		return -EINVAL;
	}
	if (d->has_value && !value) {
		if (*i + 1 >= argc || looks_like_option(argv[*i + 1])) {
			set_err(err, cap, "%s needs a value", shown);
			return -EINVAL;
		}
		value = argv[++*i];
	}
	return take(o, d, value, scratch, seen_listen, err, cap);
}

int cli_parse(int argc, char **argv, struct cli_opts *o, char *err,
	      size_t errcap)
{
	struct orcd_config *scratch;
	bool seen_listen = false;
	int ret = 0;

	memset(o, 0, sizeof(*o));
	scratch = config_new();
	if (!scratch) {
		set_err(err, errcap, "out of memory");
		return -ENOMEM;
	}
	for (int i = 1; i < argc && !ret; i++)
		ret = parse_arg(argc, argv, &i, o, scratch, &seen_listen, err,
				errcap);
	config_free(scratch);
	return ret;
}

int cli_apply(const struct cli_opts *o, struct orcd_config *c, char *err,
	      size_t errcap)
{
	bool seen_listen = false;

	for (unsigned i = 0; i < o->n_set; i++) {
		int ret = apply_one(c, o->set[i].directive, o->set[i].value,
				    &seen_listen, err, errcap);

		if (ret)
			return ret;
	}
	return 0;
}

int cli_pick_config(struct cli_opts *o, const char *default_file, char *err,
		    size_t errcap)
{
	struct stat st;
	int e;

	if (o->config_file)
		return 0;
	if (lstat(default_file, &st) == 0) {
		o->config_file = default_file;
		return 0;
	}
	e = errno;
	if (e == ENOENT)
		return 0;
	set_err(err, errcap, "%s: %s", default_file, strerror(e));
	return -e;
}

void cli_usage(FILE *f)
{
	fprintf(f,
		"usage: orcd [-c FILE] [--root DIR] [--listen ADDR:PORT]...\n"
		"            [--engine auto|specific|direct|epoll] "
		"[--threads N]\n"
		"            [--check-config] [--version] [--help]\n"
		"\n"
		"  -c, --config FILE   configuration file\n"
#ifdef ORCD_DEFAULT_CONF
		"                      (default " ORCD_DEFAULT_CONF
		" if it exists)\n"
#endif
		"      --root DIR      document root\n"
		"      --listen ADDR:PORT\n"
		"                      address to serve on: 8080, *:8080,\n"
		"                      127.0.0.1:8080, [::1]:8080; repeat for "
		"more;\n"
		"                      replaces every listen of the file\n"
		"      --engine NAME   auto, specific, direct or epoll\n"
		"      --threads N     worker threads, 0 = one per CPU\n"
		"      --check-config  check the configuration and exit\n"
		"  -V, --version       print the version and exit\n"
		"  -h, --help          print this help and exit\n"
		"\n"
		"Options override the file; both --opt VALUE and --opt=VALUE "
		"work.\n"
		"SIGHUP reloads the file and applies the options again.\n");
}
