/*
 * logflush.c - preloaded (LD_PRELOAD) into the llama.cpp tools the tests
 * run: at exit it drains llama.cpp's log.  The tools log through a
 * thread of their own (common_log) that nobody waits for at exit, so on a
 * busy machine a tool's last lines, its summary among them, can be lost;
 * common_log_pause() writes what is queued and joins that thread.  The
 * calls are looked up by their C++ names at exit; in a program without
 * them this does nothing.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdlib.h>

static void drain(void)
{
	void *(*log_main)(void);
	void (*log_pause)(void *);

	/* POSIX's way to a function pointer from dlsym */
	*(void **)&log_main = dlsym(RTLD_DEFAULT, "_Z15common_log_mainv");
	*(void **)&log_pause = dlsym(RTLD_DEFAULT, "_Z16common_log_pauseP10common_log");
	if (log_main && log_pause)
		log_pause(log_main());
}

__attribute__((constructor)) static void logflush_init(void)
{
	atexit(drain);
}
