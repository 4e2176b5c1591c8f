/*
 * log-test.c - the daemon's log (daemon/log.c) as a unit: whatever a
 * message quotes, every message is one line of printable text.  A control
 * byte or DEL is written escaped (\n, \t, \r, \xNN, a backslash as \\), on
 * stderr with timestamps and on the journal's stream with "<N>" prefixes,
 * and a message cut at the buffer's end is cut between escapes.
 */
#include "config.h"

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "log.h"
#include "tap.h"

static char path[64];
static char text[16384];
static size_t text_len;

/* Send stderr to a fresh file at PATH; returns the saved stderr, or -1. */
static int capture_begin(void)
{
	int fd, saved;

	snprintf(path, sizeof path, "/tmp/qgd-log-test-XXXXXX");
	if ((fd = mkstemp(path)) < 0)
		return -1;
	fflush(stderr);
	saved = dup(STDERR_FILENO);
	dup2(fd, STDERR_FILENO);
	close(fd);
	return saved;
}

/* Put stderr back (SAVED) and read what was written into TEXT. */
static void capture_end(int saved)
{
	FILE *f = fopen(path, "r");

	dup2(saved, STDERR_FILENO);
	close(saved);
	text_len = f ? fread(text, 1, sizeof text - 1, f) : 0;
	text[text_len] = 0;
	if (f)
		fclose(f);
	unlink(path);
}

/* How many lines TEXT holds; -1 if one does not end with '\n' or holds another control byte or DEL. */
static int lines_clean(void)
{
	int lines = 0;

	for (size_t i = 0; i < text_len; i++) {
		unsigned char c = (unsigned char)text[i];
		if (c == '\n')
			lines++;
		else if (c < 0x20 || c == 0x7f)
			return -1;
	}
	return text_len && text[text_len - 1] != '\n' ? -1 : lines;
}

/* The number of lines of TEXT that start with PREFIX. */
static int lines_starting(const char *prefix)
{
	int n = 0;
	size_t len = strlen(prefix);

	for (const char *l = text; *l; l = strchr(l, '\n') ? strchr(l, '\n') + 1 : l + strlen(l))
		n += strncmp(l, prefix, len) == 0;
	return n;
}

static const char forged[] = "model \"x\n2099-01-01T00:00:00.000Z qgraphd error: forged\" unknown";

static void test_foreground(void)
{
	int saved = capture_begin();

	if (saved < 0) {
		tap_skip("cannot capture stderr");
		return;
	}
	unsetenv("JOURNAL_STREAM");
	qgd_log_open(1, QGD_LOG_DEBUG);
	qgd_error("%s", forged);
	qgd_info("tab\there, cr\rthere, esc\033]0;PWNED\a, del\177, back\\slash");
	qgd_debug("%s", "\001\002\037");
	capture_end(saved);

	tap_ok(lines_clean() == 3, "three messages, three lines, no control byte but their ends (%d)", lines_clean());
	tap_ok(lines_starting("2099-") == 0, "no line is forged by a newline in a message");
	tap_ok(strstr(text, "model \"x\\n2099-01-01T00:00:00.000Z qgraphd error: forged\" unknown\n") != NULL,
	       "the newline is written \\n, the rest as it was");
	tap_ok(strstr(text, "tab\\there, cr\\rthere, esc\\x1b]0;PWNED\\x07, del\\x7f, back\\\\slash\n") != NULL,
	       "tab, carriage return, escape, bell, DEL and backslash are escaped");
	tap_ok(strstr(text, "\\x01\\x02\\x1f\n") != NULL, "other control bytes as \\xNN");
	if (tap_failed)
		tap_diag("log: %s", text);
}

static void test_journal(void)
{
	char env[64];
	struct stat st;
	int saved = capture_begin();

	if (saved < 0 || fstat(STDERR_FILENO, &st) < 0) {
		tap_skip("cannot capture stderr");
		return;
	}
	/* stderr is the journal's stream when $JOURNAL_STREAM names it */
	snprintf(env, sizeof env, "%llu:%llu", (unsigned long long)st.st_dev, (unsigned long long)st.st_ino);
	setenv("JOURNAL_STREAM", env, 1);
	qgd_log_open(0, QGD_LOG_DEBUG);
	qgd_info("weights name \"w\n<0>qgraphd emerg: forged\": not found");
	capture_end(saved);
	unsetenv("JOURNAL_STREAM");

	tap_ok(lines_clean() == 1, "on the journal's stream: one message, one line (%d)", lines_clean());
	tap_ok(lines_starting("<6>info: ") == 1 && lines_starting("<0>") == 0,
	       "its priority is its own: no \"<0>\" line is forged");
}

static void test_cut(void)
{
	char big[1500];
	int saved = capture_begin();

	if (saved < 0) {
		tap_skip("cannot capture stderr");
		return;
	}
	unsetenv("JOURNAL_STREAM");
	qgd_log_open(1, QGD_LOG_DEBUG);
	memset(big, '\033', sizeof big - 1);
	big[sizeof big - 1] = 0;
	qgd_warn("%s", big);
	capture_end(saved);

	size_t i = text_len - 1;	/* the line's end, after the last escape written */
	int whole = text_len > 5 && strncmp(text + i - 4, "\\x1b", 4) == 0;
	tap_ok(lines_clean() == 1, "a message longer than the buffer is one line, escaped (%d)", lines_clean());
	tap_ok(whole && text_len < 1100, "it is cut after a whole escape, within the line's buffer (%zu bytes)",
	       text_len);
}

int main(void)
{
	test_foreground();
	test_journal();
	test_cut();
	return tap_done();
}
