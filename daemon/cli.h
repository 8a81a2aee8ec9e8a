/* SPDX-License-Identifier: MIT */
/* Command line: orcd [-c FILE] [--root DIR] [--listen ADDR:PORT]...
 * [--engine auto|specific|direct|epoll] [--threads N] [--check-config]
 * [--version] [--help] */
#ifndef ORCD_CLI_H
#define ORCD_CLI_H

#include <stdbool.h>
#include <stdio.h>

#include "config.h"

#define CLI_MAX_SET 64

struct cli_opts {
	const char *config_file; /* NULL: none (see cli_pick_config) */
	bool config_explicit;
	bool check_config;
	bool help;
	bool version;
	unsigned n_set; /* overrides, applied with config_set() after the file */
	struct {
		const char *directive;
		const char *value;
	} set[CLI_MAX_SET];
};

/*
 * Parse argv. Accepts "--opt value" and "--opt=value". Returns 0, or
 * -EINVAL with a one-line message in err (unknown flag, missing value,
 * bad number...). Values are checked with config_set() on a scratch
 * config so a bad value is reported here, naming the flag.
 */
int cli_parse(int argc, char **argv, struct cli_opts *o, char *err,
	      size_t errcap);

/* Apply the overrides (a --listen list replaces the file's). */
int cli_apply(const struct cli_opts *o, struct orcd_config *c, char *err,
	      size_t errcap);

/*
 * Without -c, take default_file (main: ORCD_DEFAULT_CONF) if it exists.
 * Decided once, at start-up: a reload reads the file start-up read, and
 * fails if it has gone, rather than moving the server to the built-in
 * defaults. Only a name that is not there means "no file"; one that
 * cannot be looked at (EACCES, ENOTDIR on the way) is an error, and a
 * dangling symlink is taken, to fail when it is read. Returns 0 or
 * -errno with a message in err.
 */
int cli_pick_config(struct cli_opts *o, const char *default_file, char *err,
		    size_t errcap);

void cli_usage(FILE *f);

#endif
