// SPDX-License-Identifier: MIT
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"
#include "config.h"
#include "conn_budget.h"
#include "engine.h"
#include "server.h"

/* Started with fd 0, 1 or 2 closed, the server's next descriptor would
 * take that number: a root fd, then a client's socket, into which
 * "access_log -" and the error log would write. /dev/null holds each
 * closed one instead. False when even that fails. */
static bool stdio_held(void)
{
	for (int fd = 0; fd <= 2; fd++) {
		if (fcntl(fd, F_GETFD) >= 0 || errno != EBADF)
			continue;
		if (open("/dev/null", fd ? O_WRONLY : O_RDONLY) != fd)
			return false;
	}
	return true;
}

/* ORCD_TEST_START_PAUSE_MS: a pause before the configuration is read,
 * for tests of signals sent while orcd starts. */
static void test_start_pause(void)
{
	const char *v = getenv("ORCD_TEST_START_PAUSE_MS");
	long ms = v ? strtol(v, NULL, 10) : 0;

	if (ms > 0 && ms <= 60000)
		nanosleep(&(struct timespec){ ms / 1000, ms % 1000 * 1000000 },
			  NULL);
}

int main(int argc, char **argv)
{
	struct cli_opts o;
	struct orcd_config *cfg;
	char err[CONFIG_ERR_MAX + 64];

	if (!stdio_held())
		return 1;
	if (cli_parse(argc, argv, &o, err, sizeof(err))) {
		fprintf(stderr, "orcd: %s (try --help)\n", err);
		return 2;
	}
	if (o.help) {
		cli_usage(stdout);
		return 0;
	}
	if (o.version) {
		printf("orcd %s\n", ORCD_VERSION);
		return 0;
	}
	if (!o.check_config) {
		/* A SIGHUP or SIGTERM while the server loads and starts waits
		 * for its signal loop; a check stays stoppable by ^C. */
		server_block_signals();
		test_start_pause();
	}
	if (cli_pick_config(&o, ORCD_DEFAULT_CONF, err, sizeof(err)) ||
	    server_load_config(&o, &cfg, err, sizeof(err))) {
		fprintf(stderr, "orcd: %s\n", err);
		return 1;
	}
	if (o.check_config) {
		const struct orcd_engine *engine;
		struct conn_budget b;
		char line[256];

		if (config_check_start(cfg, err, sizeof(err))) {
			fprintf(stderr, "orcd: %s\n", err);
			config_free(cfg);
			return 1;
		}
		/* The engine a start-up here would take: a named one the
		 * kernel lacks is refused at start-up, so here too. */
		if (engine_select(cfg, &engine, err, sizeof(err))) {
			fprintf(stderr, "orcd: %s\n", err);
			config_free(cfg);
			return 1;
		}

		/* Where the engine may use slots, say what the server would
		 * say at start-up: a warning, not an error (it serves, with
		 * fewer connections). */
		conn_budget(cfg->slots, cfg->max_connections, &b);
		if (cfg->engine != ORCD_ENGINE_EPOLL && b.capped) {
			conn_budget_describe(&b, cfg->slots,
					     cfg->max_connections, line,
					     sizeof(line));
			fprintf(stderr, "orcd: warning: %s\n", line);
		}
		printf("orcd: configuration %s is valid\n",
		       cfg->source ? config_show(cfg->source).s : "(defaults)");
		config_free(cfg);
		return 0;
	}
	return server_run(&o, cfg);
}
