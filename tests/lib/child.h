/*
 * child.h - run a piece of a test in a forked child as another user: the
 * way the privilege tests play clients the daemon must tell apart.
 */
#ifndef QG_TESTS_CHILD_H
#define QG_TESTS_CHILD_H

#include <errno.h>
#include <grp.h>
#include <stdio.h>
#include <string.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tap.h"

/* Who the child becomes: supplementary GROUPS[0..NGROUPS) (none when 0), then GID, then UID. */
struct child_id {
	uid_t uid;
	gid_t gid;
	const gid_t *groups;
	int ngroups;
};

/*
 * Fork; the child becomes ID and runs FN(ARG, MSG, LEN), whose return is
 * its exit status (4 when it could not become ID).  Returns that status,
 * or -1 when the child did not exit; MSG (LEN bytes) gets what the child
 * wrote into its own.
 */
__attribute__((unused))
static int child_run_as(const struct child_id *id, int (*fn)(void *arg, char *msg, size_t len), void *arg,
			char *msg, size_t len)
{
	int p[2], st = 0;

	msg[0] = 0;
	if (pipe(p))
		return -1;
	pid_t pid = tap_fork();
	if (pid == 0) {
		char m[1024] = "";
		int rc;
		close(p[0]);
		if (setgroups((size_t)id->ngroups, id->groups) || setgid(id->gid) || setuid(id->uid)) {
			snprintf(m, sizeof m, "cannot become uid %u: %s", (unsigned)id->uid, strerror(errno));
			rc = 4;
		} else {
			rc = fn(arg, m, len < sizeof m ? len : sizeof m);
		}
		(void)!write(p[1], m, strlen(m));
		_exit(rc);
	}
	close(p[1]);
	ssize_t n = read(p[0], msg, len - 1);
	msg[n > 0 ? n : 0] = 0;
	close(p[0]);
	waitpid(pid, &st, 0);
	return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

#endif /* QG_TESTS_CHILD_H */
