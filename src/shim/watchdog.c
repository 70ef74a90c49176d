/* SPDX-License-Identifier: MIT */
/*
 * VE_WATCHDOG_MS: when some thread has waited for logical work that long with
 * no completion in between, log a dump of the vctx (streams, events, every
 * pending op and what it waits for) once per stall. For hangs that only show
 * on a GPU: the dump says which op nobody runs and why.
 */
#include "shim/shim.h"
#include "util/util.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static void *watchdog_main(void *arg)
{
	uint64_t limit_ns = ve__shim.cfg.watchdog_ms * 1000000ull;
	uint64_t last_done = 0, since = ve__now_ns();
	bool dumped = false;
	for (;;) {
		struct timespec ts = {.tv_sec = (time_t)(limit_ns / 4 / 1000000000ull),
				      .tv_nsec = (long)(limit_ns / 4 % 1000000000ull)};
		nanosleep(&ts, NULL);
		if (!ve__shim_is_active())
			return NULL;
		struct ve_vctx_stats st;
		ve_vctx_stats(ve__shim.v, &st);
		uint64_t now = ve__now_ns();
		if (st.completed != last_done || !ve_vctx_has_waiters(ve__shim.v)) {
			last_done = st.completed;
			since = now;
			dumped = false;
			continue;
		}
		if (dumped || now - since < limit_ns)
			continue;
		dumped = true;
		char *buf = NULL;
		size_t len = 0;
		FILE *f = open_memstream(&buf, &len);
		if (!f)
			continue;
		fprintf(f, "watchdog: a thread has waited %.0f ms with no completion; %u ops live, "
			   "%u ready, %u waiting on other vctxs\n",
			(double)(now - since) / 1e6, st.live_ops, st.ready_ops, st.extern_holds);
		ve_vctx_dump(ve__shim.v, f);
		fclose(f);
		ve__log(VE_LOG_WARN, "%s", buf);
		free(buf);
	}
}

void ve__watchdog_start(void)
{
	if (!ve__shim.cfg.watchdog_ms)
		return;
	pthread_t t;
	pthread_attr_t a;
	pthread_attr_init(&a);
	pthread_attr_setdetachstate(&a, PTHREAD_CREATE_DETACHED);
	if (pthread_create(&t, &a, watchdog_main, NULL) != 0)
		VE_WARN("VE_WATCHDOG_MS: no watchdog thread");
	pthread_attr_destroy(&a);
}
