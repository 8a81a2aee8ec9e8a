// SPDX-License-Identifier: MIT
#include "engine.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>

static const struct orcd_engine *const auto_order[] = {
	&orcd_engine_specific,
	&orcd_engine_direct,
	&orcd_engine_epoll,
};

int engine_select(const struct orcd_config *cfg, const struct orcd_engine **out,
		  char *why, size_t cap)
{
	char reason[3][160] = { "", "", "" };
	size_t i;

	for (i = 0; i < sizeof(auto_order) / sizeof(auto_order[0]); i++) {
		const struct orcd_engine *e = auto_order[i];
		int err;

		if (cfg->engine != ORCD_ENGINE_AUTO && cfg->engine != e->kind)
			continue;
		err = e->probe(cfg, reason[i], sizeof(reason[i]));
		if (!err) {
			*out = e;
			if (cfg->engine != ORCD_ENGINE_AUTO)
				snprintf(why, cap, "engine %s: requested",
					 e->name);
			else if (i == 0)
				snprintf(why, cap,
					 "engine %s: kernel supports chosen fds",
					 e->name);
			else
				snprintf(why, cap, "engine %s: %s%s%s",
					 e->name, reason[0],
					 i > 1 ? "; " : "",
					 i > 1 ? reason[1] : "");
			return 0;
		}
		if (cfg->engine != ORCD_ENGINE_AUTO) {
			char at[PATH_MAX + 16];

			snprintf(why, cap, "%sengine %s unavailable: %s",
				 config_where(cfg, "engine", at, sizeof(at)),
				 e->name, reason[i]);
			return -ENOTSUP;
		}
	}
	snprintf(why, cap, "no engine can run here: %s; %s; %s", reason[0],
		 reason[1], reason[2]);
	return -ENOTSUP;
}
