/*
 * submit-stats.c - qgraph-submit stats: the daemon's stats as text, as
 * JSON, or in the Prometheus text exposition format.
 */
#include "config.h"

#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "qgraph.h"
#include "submit.h"

/* S as a JSON string (quotes and backslashes escaped, control characters as \u00XX). */
static void json_string(FILE *f, const char *s, size_t n)
{
	fputc('"', f);
	for (size_t i = 0; i < n && s[i]; i++) {
		unsigned char c = (unsigned char)s[i];
		if (c == '"' || c == '\\')
			fprintf(f, "\\%c", c);
		else if (c < 0x20)
			fprintf(f, "\\u%04x", c);
		else
			fputc(c, f);
	}
	fputc('"', f);
}

/* S as a Prometheus label value (backslash, quote and newline escaped). */
static void prom_label(FILE *f, const char *s, size_t n)
{
	for (size_t i = 0; i < n && s[i]; i++) {
		if (s[i] == '"' || s[i] == '\\')
			fputc('\\', f);
		fputc(s[i] == '\n' ? ' ' : s[i], f);
	}
}

/* The daemon-wide counters and gauges of the stats text: its key, the metric, its type and help. */
static const struct stat_metric {
	const char *key, *metric, *type, *help;
} stat_metrics[] = {
	{ "sessions", "qgraph_sessions", "gauge", "Sessions serving requests." },
	{ "handshaking", "qgraph_handshaking", "gauge", "Connections that have not finished their handshake." },
	{ "sessions_hidden", "qgraph_sessions_hidden", "gauge", "Sessions of other users this client may not see." },
	{ "pinned_bytes", "qgraph_pinned_bytes", "gauge", "Bytes of weights in pinned memory." },
	{ "pool_bytes", "qgraph_pool_bytes", "gauge", "Bytes of the daemon's memory pool." },
	{ "pool_used", "qgraph_pool_used_bytes", "gauge", "Bytes of the pool in use." },
	{ "plans", "qgraph_plans", "gauge", "Graph plans kept by the backend." },
	{ "graphs_run", "qgraph_graphs_run_total", "counter", "Graphs run since the daemon started." },
	{ "threads", "qgraph_threads", "gauge", "Compute threads." },
	{ "weights_stored", "qgraph_weights_stored", "gauge", "Weight matrices stored." },
	{ "weights_uploaded", "qgraph_weights_uploaded_total", "counter", "Weight uploads completed since start." },
	{ "mul_mat_interleaved", "qgraph_mul_mat_interleaved_total", "counter",
	  "MUL_MAT nodes run on weights in an interleaved layout since start." },
	{ "weights_referenced_bytes", "qgraph_weights_referenced_bytes", "gauge",
	  "Bytes of every handle of every session to stored weights." },
};

/* The per-session fields of a "session ID pid P uid U name "N" ..." line: the word, the metric, its help. */
static const struct stat_metric session_metrics[] = {
	{ "arena", "qgraph_session_arena_bytes", "gauge", "Bytes of a session's arena." },
	{ "weights", "qgraph_session_weight_bytes", "gauge", "Bytes of weights a session holds." },
	{ "graphs", "qgraph_session_graphs", "gauge", "Graphs a session has registered." },
	{ "completed", "qgraph_session_completed_total", "counter", "Requests a session has had completed." },
	{ "memory", "qgraph_session_memory_bytes", "gauge", "Pool bytes a session's graphs hold." },
};

/* One parsed "session ..." line of the stats text. */
struct stat_session {
	unsigned long long id, pid, uid, v[sizeof session_metrics / sizeof session_metrics[0]];
	const char *name;
	size_t name_len;
};

/* Parse a session line (after "session "); 0 or -1. */
static int parse_session(const char *p, struct stat_session *ss)
{
	int used = 0;

	memset(ss, 0, sizeof *ss);
	if (sscanf(p, "%llu pid %llu uid %llu name \"%n", &ss->id, &ss->pid, &ss->uid, &used) != 3 || !used)
		return -1;
	ss->name = p + used;
	const char *q = strstr(ss->name, "\" arena ");
	if (!q)
		return -1;
	ss->name_len = (size_t)(q - ss->name);
	p = q + 2;
	for (size_t k = 0; k < sizeof session_metrics / sizeof session_metrics[0]; k++) {
		char word[32];
		if (sscanf(p, "%31s %llu%n", word, &ss->v[k], &used) != 2 || strcmp(word, session_metrics[k].key))
			return -1;
		p += used;
		p += strspn(p, " ");
	}
	return 0;
}

enum { STATS_TEXT, STATS_JSON, STATS_PROMETHEUS };

/* The stats text BUF as FORMAT on stdout.  0, or -1 for a line that does not parse. */
static int print_stats(char *buf, int format)
{
	char *save = NULL;
	int first = 1, bad = 0;
	size_t n_kernels = 0, n_sessions = 0;
	const char *pool = "", *loop = "";
	size_t pool_len = 0, loop_len = 0;

	if (format == STATS_TEXT)
		return fputs(buf, stdout) < 0 ? -1 : 0;
	/* the scalar lines first (JSON members, metrics), then kernels and sessions in arrays and labelled series */
	if (format == STATS_JSON)
		printf("{\"version\": \"%s\"", PACKAGE_VERSION);
	else
		printf("# HELP qgraph_info The daemon's memory pool, event loop and this tool's version.\n"
		       "# TYPE qgraph_info gauge\n");
	char *copy = strdup(buf);
	if (!copy)
		return -1;
	for (char *line = strtok_r(copy, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
		char *sp = strchr(line, ' ');
		if (!sp) {
			bad = 1;
			continue;
		}
		*sp = 0;
		const char *val = sp + 1;
		if (strcmp(line, "pool") == 0) {
			pool = buf + (val - copy);
			pool_len = strlen(val);
		} else if (strcmp(line, "loop") == 0) {
			loop = buf + (val - copy);
			loop_len = strlen(val);
		} else if (strcmp(line, "kernel") == 0) {
			n_kernels++;
		} else if (strcmp(line, "session") == 0) {
			n_sessions++;
		} else {
			size_t k;
			for (k = 0; k < sizeof stat_metrics / sizeof stat_metrics[0]; k++)
				if (strcmp(line, stat_metrics[k].key) == 0)
					break;
			char *end;
			unsigned long long v = strtoull(val, &end, 10);
			if (*end || k == sizeof stat_metrics / sizeof stat_metrics[0]) {
				bad |= *end != 0;
				continue;	/* a key this tool does not know yet: left out */
			}
			if (format == STATS_JSON)
				printf(", \"%s\": %llu", line, v);
			else
				printf("# HELP %s %s\n# TYPE %s %s\n%s %llu\n", stat_metrics[k].metric, stat_metrics[k].help,
				       stat_metrics[k].metric, stat_metrics[k].type, stat_metrics[k].metric, v);
		}
	}
	if (format == STATS_JSON) {
		printf(", \"pool\": ");
		json_string(stdout, pool, pool_len);
		printf(", \"loop\": ");
		json_string(stdout, loop, loop_len);
	} else {
		printf("qgraph_info{version=\"%s\",pool=\"", PACKAGE_VERSION);
		prom_label(stdout, pool, pool_len);
		printf("\",loop=\"");
		prom_label(stdout, loop, loop_len);
		printf("\"} 1\n");
	}
	/* kernels */
	if (format == STATS_JSON)
		printf(", \"kernels\": [");
	else if (n_kernels)
		printf("# HELP qgraph_kernel_info The kernel chosen for each weight layout.\n# TYPE qgraph_kernel_info gauge\n");
	for (char *p = buf; (p = strstr(p, "kernel ")); p += 7) {
		if (p != buf && p[-1] != '\n')
			continue;	/* inside another line (a session's name) */
		char *eol = strchr(p, '\n');
		size_t len = eol ? (size_t)(eol - p) : strlen(p);
		const char *layout = p + 7, *kernel = memchr(layout, ' ', len - 7);
		if (kernel) {
			size_t llen = (size_t)(kernel - layout), klen = len - 7 - llen - 1;
			kernel++;
			if (format == STATS_JSON) {
				printf("%s{\"layout\": ", first ? "" : ", ");
				json_string(stdout, layout, llen);
				printf(", \"kernel\": ");
				json_string(stdout, kernel, klen);
				printf("}");
			} else {
				printf("qgraph_kernel_info{layout=\"");
				prom_label(stdout, layout, llen);
				printf("\",kernel=\"");
				prom_label(stdout, kernel, klen);
				printf("\"} 1\n");
			}
			first = 0;
		}
	}
	/* sessions: each metric's series together, as the exposition format wants */
	size_t rounds = format == STATS_JSON ? 1 : sizeof session_metrics / sizeof session_metrics[0];
	if (format == STATS_JSON)
		printf("], \"session\": [");
	for (size_t m = 0; m < rounds && n_sessions; m++) {
		if (format == STATS_PROMETHEUS)
			printf("# HELP %s %s\n# TYPE %s %s\n", session_metrics[m].metric, session_metrics[m].help,
			       session_metrics[m].metric, session_metrics[m].type);
		first = 1;
		for (char *p = buf; (p = strstr(p, "session ")); p += 8) {
			struct stat_session ss;
			if (p != buf && p[-1] != '\n')
				continue;
			if (parse_session(p + 8, &ss)) {
				bad = 1;
				continue;
			}
			if (format == STATS_JSON) {
				printf("%s{\"session_id\": %llu, \"pid\": %llu, \"uid\": %llu, \"name\": ", first ? "" : ", ",
				       ss.id, ss.pid, ss.uid);
				json_string(stdout, ss.name, ss.name_len);
				for (size_t k = 0; k < sizeof session_metrics / sizeof session_metrics[0]; k++)
					printf(", \"%s\": %llu", session_metrics[k].key, ss.v[k]);
				printf("}");
			} else {
				printf("%s{session=\"%llu\",pid=\"%llu\",uid=\"%llu\",name=\"", session_metrics[m].metric, ss.id,
				       ss.pid, ss.uid);
				prom_label(stdout, ss.name, ss.name_len);
				printf("\"} %llu\n", ss.v[m]);
			}
			first = 0;
		}
	}
	if (format == STATS_JSON)
		printf("]}\n");
	free(copy);
	return bad ? -1 : 0;
}

int cmd_stats(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "json", no_argument, NULL, 'j' },
		{ "prometheus", no_argument, NULL, 'p' },
		{ "help", no_argument, NULL, 'h' },
		{ 0 },
	};
	char buf[65536];
	int format = STATS_TEXT, c;

	while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
		switch (c) {
		case 'j': format = STATS_JSON; break;
		case 'p': format = STATS_PROMETHEUS; break;
		case 'h':
			printf("Usage: qgraph-submit stats [--json | --prometheus]\n"
			       "Print the daemon's sessions, memory, plans and kernels: as \"key value\" lines,\n"
			       "one JSON object (--json), or the Prometheus text format, metrics qgraph_*\n"
			       "(--prometheus, e.g. for node_exporter's textfile collector).\n");
			return 0;
		default: return EXIT_USAGE;
		}
	}
	if (optind < argc) {
		fprintf(stderr, "qgraph-submit stats: unexpected argument '%s'\n", argv[optind]);
		return EXIT_USAGE;
	}
	struct qgraph_session *s = connect_or_die("qgraph-submit stats", 1 << 20);
	ssize_t n = qgraph_stats(s, buf, sizeof buf);
	if (n < 0) {
		fprintf(stderr, "qgraph-submit stats: %s\n", qgraph_session_error(s));
		return EXIT_WRONG;
	}
	qgraph_session_close(s);
	if (print_stats(buf, format)) {
		fprintf(stderr, "qgraph-submit stats: the daemon's stats have a line this tool cannot read\n");
		return EXIT_WRONG;
	}
	return 0;
}
