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

void json_string(FILE *f, const char *s, size_t n)
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
	{ "account_model_bytes", "qgraph_account_model_bytes", "gauge",
	  "Pool bytes of the models this client's user loaded (user-models)." },
	{ "account_weight_bytes", "qgraph_account_weight_bytes", "gauge",
	  "Pool bytes the weight handles of this client's user's sessions reach." },
	{ "account_graph_metadata_bytes", "qgraph_account_graph_metadata_bytes", "gauge",
	  "Daemon heap this client's user's registered graphs hold (user-graph-metadata)." },
	{ "requests", "qgraph_requests_total", "counter", "Requests answered since the daemon started." },
	{ "errors", "qgraph_errors_total", "counter",
	  "Requests answered with an error (every status but ok, less the digest misses)." },
	{ "digest_misses", "qgraph_digest_misses_total", "counter",
	  "Weights asked for by digest before an upload and not found (not errors)." },
	{ "timeouts", "qgraph_timeouts_total", "counter", "Requests that ran out of time (graph-timeout, their events' wait)." },
	{ "cancels", "qgraph_cancels_total", "counter", "Graphs cancelled (by request, or by their session's end)." },
	{ "sessions_dropped", "qgraph_sessions_dropped_total", "counter",
	  "Sessions the daemon ended while serving them (not their client's own close)." },
	{ "batches", "qgraph_batches_total", "counter",
	  "Runs of graphs of several sessions as one batch on shared weights since start." },
	{ "batched_graphs", "qgraph_batched_graphs_total", "counter", "Graphs run in those batches." },
	{ "batch_max", "qgraph_batch_max", "gauge", "Graphs that may run as one batch at most (batch-max)." },
};
#define N_STAT_METRICS (sizeof stat_metrics / sizeof stat_metrics[0])

/* The per-session fields of a "session ID pid P uid U name "N" ..." line: the word, the metric, its help. */
static const struct stat_metric session_metrics[] = {
	{ "arena", "qgraph_session_arena_bytes", "gauge", "Bytes of a session's arena." },
	{ "weights", "qgraph_session_weight_bytes", "gauge", "Bytes of weights a session holds." },
	{ "graphs", "qgraph_session_graphs", "gauge", "Graphs a session has registered." },
	{ "completed", "qgraph_session_completed_total", "counter", "Requests a session has had completed." },
	{ "memory", "qgraph_session_memory_bytes", "gauge", "Pool bytes a session's graphs hold." },
};
#define N_SESSION_METRICS (sizeof session_metrics / sizeof session_metrics[0])

/* One parsed "session ..." line of the stats text. */
struct stat_session {
	unsigned long long id, pid, uid, v[N_SESSION_METRICS];
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
	for (size_t k = 0; k < N_SESSION_METRICS; k++) {
		char word[32];
		if (sscanf(p, "%31s %llu%n", word, &ss->v[k], &used) != 2 || strcmp(word, session_metrics[k].key))
			return -1;
		p += used;
		p += strspn(p, " ");
	}
	return 0;
}

/* One parsed "model "NAME" tensors T bytes B uid U" line. */
struct stat_model {
	const char *name;
	size_t name_len;
	unsigned long long tensors, bytes, uid;
};

/* Parse a model line (after "model "); 0 or -1. */
static int parse_model(const char *p, struct stat_model *m)
{
	if (*p++ != '"')
		return -1;
	const char *q = strstr(p, "\" tensors ");
	if (!q)
		return -1;
	m->name = p;
	m->name_len = (size_t)(q - p);
	return sscanf(q + 2, "tensors %llu bytes %llu uid %llu", &m->tensors, &m->bytes, &m->uid) == 3 ? 0 : -1;
}

/* A "word count" pair of a "status" or "quota" line, and a histogram bucket. */
struct stat_pair {
	char word[32];
	unsigned long long v;
};

#define STATS_MAX_PAIRS 32

/* Everything the stats text says, parsed (the strings point into the text). */
struct stats {
	unsigned long long v[N_STAT_METRICS];
	int have[N_STAT_METRICS];
	const char *version, *pool, *loop;
	size_t version_len, pool_len, loop_len;
	unsigned long long uptime_ms, latency_count, latency_sum_ns, batch_wait_ns, batch_window_us;
	struct stat_pair status[STATS_MAX_PAIRS], quota[STATS_MAX_PAIRS];
	size_t n_status, n_quota;
	unsigned long long le_ns[STATS_MAX_PAIRS], le_count[STATS_MAX_PAIRS];
	size_t n_le;
};

/* Parse the text BUF into *ST; 0, or -1 for a line that does not parse (the others are kept). */
static int parse_stats(const char *buf, struct stats *st)
{
	int bad = 0;

	memset(st, 0, sizeof *st);
	st->version = st->pool = st->loop = "";
	for (const char *line = buf; *line;) {
		const char *eol = strchr(line, '\n');
		size_t len = eol ? (size_t)(eol - line) : strlen(line);
		const char *next = eol ? eol + 1 : line + len;
		const char *sp = memchr(line, ' ', len);
		if (!sp) {
			bad = 1;
			line = next;
			continue;
		}
		size_t klen = (size_t)(sp - line), vlen = len - klen - 1;
		const char *val = sp + 1;
		char key[48], rest[128];
		snprintf(key, sizeof key, "%.*s", (int)(klen < sizeof key ? klen : sizeof key - 1), line);
		snprintf(rest, sizeof rest, "%.*s", (int)(vlen < sizeof rest ? vlen : sizeof rest - 1), val);
		if (strcmp(key, "version") == 0) {
			st->version = val;
			st->version_len = vlen;
		} else if (strcmp(key, "pool") == 0) {
			st->pool = val;
			st->pool_len = vlen;
		} else if (strcmp(key, "loop") == 0) {
			st->loop = val;
			st->loop_len = vlen;
		} else if (strcmp(key, "kernel") == 0 || strcmp(key, "session") == 0 || strcmp(key, "model") == 0 ||
			   strcmp(key, "batch_size") == 0) {
			/* read where they are printed */
		} else if (strcmp(key, "status") == 0 || strcmp(key, "quota") == 0) {
			int is_status = key[0] == 's';
			struct stat_pair *p = is_status ? &st->status[st->n_status] : &st->quota[st->n_quota];
			size_t *n = is_status ? &st->n_status : &st->n_quota;
			if (*n < STATS_MAX_PAIRS && sscanf(rest, "%31s %llu", p->word, &p->v) == 2)
				(*n)++;
			else
				bad = 1;
		} else if (strcmp(key, "latency_le_ns") == 0) {
			if (st->n_le < STATS_MAX_PAIRS &&
			    sscanf(rest, "%llu %llu", &st->le_ns[st->n_le], &st->le_count[st->n_le]) == 2)
				st->n_le++;
			else
				bad = 1;
		} else {
			char *end;
			unsigned long long v = strtoull(rest, &end, 10);
			if (*end || !*rest) {
				bad = 1;
			} else if (strcmp(key, "uptime_ms") == 0) {
				st->uptime_ms = v;
			} else if (strcmp(key, "latency_count") == 0) {
				st->latency_count = v;
			} else if (strcmp(key, "latency_sum_ns") == 0) {
				st->latency_sum_ns = v;
			} else if (strcmp(key, "batch_wait_ns") == 0) {
				st->batch_wait_ns = v;	/* in seconds for Prometheus */
			} else if (strcmp(key, "batch_window_us") == 0) {
				st->batch_window_us = v;	/* so too */
			} else {
				for (size_t k = 0; k < N_STAT_METRICS; k++)
					if (strcmp(key, stat_metrics[k].key) == 0) {
						st->v[k] = v;
						st->have[k] = 1;
					}
				/* a key this tool does not know yet: left out */
			}
		}
		line = next;
	}
	return bad ? -1 : 0;
}

/*
 * Call FN(BUF, P, LEN, ARG) for each line of BUF that starts with WORD
 * (WORD ends in a space); P is the line after WORD.  Returns how many.
 */
static size_t each_line(const char *buf, const char *word, void (*fn)(const char *, size_t, void *), void *arg)
{
	size_t n = 0, wl = strlen(word);

	for (const char *p = buf; *p;) {
		const char *eol = strchr(p, '\n');
		size_t len = eol ? (size_t)(eol - p) : strlen(p);
		if (len > wl && strncmp(p, word, wl) == 0) {
			n++;
			if (fn)
				fn(p + wl, len - wl, arg);
		}
		p += len + (eol != NULL);
	}
	return n;
}

enum { STATS_SHORT, STATS_TEXT, STATS_JSON, STATS_PROMETHEUS };

/* What the line printers share: the format, whether an element was printed, which session metric, bad lines. */
struct printing {
	int format, first, bad;
	size_t metric;
};

/* A "batch_size N RUNS" line: the runs on the pool of N graphs as one (1: alone). */
static void print_batch_size(const char *p, size_t len, void *arg)
{
	struct printing *pr = arg;
	char line[64];
	unsigned size;
	unsigned long long runs;

	if (len >= sizeof line) {
		pr->bad = 1;
		return;
	}
	memcpy(line, p, len);
	line[len] = '\0';
	if (sscanf(line, "%u %llu", &size, &runs) != 2) {
		pr->bad = 1;
		return;
	}
	if (pr->format == STATS_JSON)
		printf("%s\"%u\": %llu", pr->first ? "" : ", ", size, runs);
	else
		printf("qgraph_batch_runs_total{size=\"%u\"} %llu\n", size, runs);
	pr->first = 0;
}

static void print_kernel(const char *p, size_t len, void *arg)
{
	struct printing *pr = arg;
	const char *kernel = memchr(p, ' ', len);

	if (!kernel)
		return;
	size_t llen = (size_t)(kernel - p), klen = len - llen - 1;
	kernel++;
	if (pr->format == STATS_JSON) {
		printf("%s{\"layout\": ", pr->first ? "" : ", ");
		json_string(stdout, p, llen);
		printf(", \"kernel\": ");
		json_string(stdout, kernel, klen);
		printf("}");
	} else {
		printf("qgraph_kernel_info{layout=\"");
		prom_label(stdout, p, llen);
		printf("\",kernel=\"");
		prom_label(stdout, kernel, klen);
		printf("\"} 1\n");
	}
	pr->first = 0;
}

static void print_session(const char *p, size_t len, void *arg)
{
	struct printing *pr = arg;
	struct stat_session ss;

	(void)len;
	if (parse_session(p, &ss)) {
		pr->bad = 1;
		return;
	}
	if (pr->format == STATS_JSON) {
		printf("%s{\"session_id\": %llu, \"pid\": %llu, \"uid\": %llu, \"name\": ", pr->first ? "" : ", ", ss.id,
		       ss.pid, ss.uid);
		json_string(stdout, ss.name, ss.name_len);
		for (size_t k = 0; k < N_SESSION_METRICS; k++)
			printf(", \"%s\": %llu", session_metrics[k].key, ss.v[k]);
		printf("}");
	} else {
		printf("%s{session=\"%llu\",pid=\"%llu\",uid=\"%llu\",name=\"", session_metrics[pr->metric].metric, ss.id,
		       ss.pid, ss.uid);
		prom_label(stdout, ss.name, ss.name_len);
		printf("\"} %llu\n", ss.v[pr->metric]);
	}
	pr->first = 0;
}

static void print_model(const char *p, size_t len, void *arg)
{
	struct printing *pr = arg;
	struct stat_model m;

	(void)len;
	if (parse_model(p, &m)) {
		pr->bad = 1;
		return;
	}
	if (pr->format == STATS_JSON) {
		printf("%s{\"name\": ", pr->first ? "" : ", ");
		json_string(stdout, m.name, m.name_len);
		printf(", \"tensors\": %llu, \"bytes\": %llu, \"uid\": %llu}", m.tensors, m.bytes, m.uid);
	} else {
		printf("%s{model=\"", pr->metric ? "qgraph_model_tensors" : "qgraph_model_bytes");
		prom_label(stdout, m.name, m.name_len);
		printf("\",uid=\"%llu\"} %llu\n", m.uid, pr->metric ? m.tensors : m.bytes);
	}
	pr->first = 0;
}

/* A "word count" list as a JSON object NAME, or as the Prometheus counter METRIC with label LABEL. */
static void print_pairs(const struct stat_pair *p, size_t n, int format, const char *name, const char *metric,
			const char *label, const char *help)
{
	if (format == STATS_JSON) {
		printf(", \"%s\": {", name);
		for (size_t k = 0; k < n; k++) {
			printf("%s", k ? ", " : "");
			json_string(stdout, p[k].word, sizeof p[k].word);
			printf(": %llu", p[k].v);
		}
		printf("}");
		return;
	}
	printf("# HELP %s %s\n# TYPE %s counter\n", metric, help, metric);
	for (size_t k = 0; k < n; k++) {
		printf("%s{%s=\"", metric, label);
		prom_label(stdout, p[k].word, sizeof p[k].word);
		printf("\"} %llu\n", p[k].v);
	}
}

/*
 * The summary of the stats text BUF on stdout: the lines of the keys a
 * person looks at first, as the daemon gave them (so a script reading
 * "key value" reads them alike), then latency_median_le_ns, the bound of
 * the histogram's bucket that holds the median, when any request
 * completed.  0, or -1 for a line that does not parse.
 */
static int print_short(const char *buf)
{
	static const char *const keys[] = {
		"version", "uptime_ms", "sessions", "pool", "pool_bytes", "pool_used", "weights_stored",
		"weights_referenced_bytes", "graphs_run", "mul_mat_interleaved", "requests", "errors",
	};
	struct stats st;
	int bad = parse_stats(buf, &st);

	for (const char *line = buf; *line;) {
		const char *eol = strchr(line, '\n');
		size_t len = eol ? (size_t)(eol - line) : strlen(line);
		const char *sp = memchr(line, ' ', len);
		for (size_t k = 0; sp && k < sizeof keys / sizeof keys[0]; k++)
			if (strlen(keys[k]) == (size_t)(sp - line) && strncmp(line, keys[k], (size_t)(sp - line)) == 0)
				printf("%.*s\n", (int)len, line);
		line += len + (eol != NULL);
	}
	for (size_t i = 0; st.latency_count && i < st.n_le; i++)
		if (st.le_count[i] * 2 >= st.latency_count) {
			printf("latency_median_le_ns %llu\n", st.le_ns[i]);
			break;
		}
	return fflush(stdout) || bad ? -1 : 0;
}

/* The stats text BUF as FORMAT on stdout.  0, or -1 for a line that does not parse. */
static int print_stats(const char *buf, int format)
{
	struct stats st;
	struct printing pr = { .format = format, .first = 1 };

	if (format == STATS_TEXT)
		return fputs(buf, stdout) < 0 ? -1 : 0;
	if (format == STATS_SHORT)
		return print_short(buf);
	int bad = parse_stats(buf, &st);
	/* the scalars first (JSON members, metrics), then lists in arrays and labelled series */
	if (format == STATS_JSON) {
		printf("{\"version\": ");
		json_string(stdout, st.version, st.version_len);
		printf(", \"tool_version\": \"%s\", \"uptime_ms\": %llu, \"batch_wait_ns\": %llu, \"batch_window_us\": %llu",
		       PACKAGE_VERSION, st.uptime_ms, st.batch_wait_ns, st.batch_window_us);
	} else {
		printf("# HELP qgraph_info The daemon's version, memory pool and event loop.\n"
		       "# TYPE qgraph_info gauge\nqgraph_info{version=\"");
		prom_label(stdout, st.version, st.version_len);
		printf("\",pool=\"");
		prom_label(stdout, st.pool, st.pool_len);
		printf("\",loop=\"");
		prom_label(stdout, st.loop, st.loop_len);
		printf("\"} 1\n# HELP qgraph_uptime_seconds Seconds since the daemon began to serve.\n"
		       "# TYPE qgraph_uptime_seconds gauge\nqgraph_uptime_seconds %llu.%03llu\n", st.uptime_ms / 1000,
		       st.uptime_ms % 1000);
		printf("# HELP qgraph_batch_wait_seconds_total Time graphs waited for company (batch-window-us).\n"
		       "# TYPE qgraph_batch_wait_seconds_total counter\nqgraph_batch_wait_seconds_total %llu.%09llu\n",
		       st.batch_wait_ns / 1000000000u, st.batch_wait_ns % 1000000000u);
		printf("# HELP qgraph_batch_window_seconds How long a graph may wait for company (batch-window-us; "
		       "0: never).\n# TYPE qgraph_batch_window_seconds gauge\nqgraph_batch_window_seconds %llu.%06llu\n",
		       st.batch_window_us / 1000000u, st.batch_window_us % 1000000u);
	}
	for (size_t k = 0; k < N_STAT_METRICS; k++) {
		if (!st.have[k])
			continue;
		if (format == STATS_JSON)
			printf(", \"%s\": %llu", stat_metrics[k].key, st.v[k]);
		else
			printf("# HELP %s %s\n# TYPE %s %s\n%s %llu\n", stat_metrics[k].metric, stat_metrics[k].help,
			       stat_metrics[k].metric, stat_metrics[k].type, stat_metrics[k].metric, st.v[k]);
	}
	print_pairs(st.status, st.n_status, format, "status", "qgraph_completions_total", "status",
		    "Requests answered, by status (ok, and the errors by kind).");
	print_pairs(st.quota, st.n_quota, format, "quota_refusals", "qgraph_quota_refusals_total", "quota",
		    "Refusals by the quota or limit they name, at connect and per request.");
	/* the latency histogram: cumulative buckets, as both formats keep them */
	if (format == STATS_JSON) {
		printf(", \"latency\": {\"le_ns\": [");
		for (size_t k = 0; k < st.n_le; k++)
			printf("%s%llu", k ? ", " : "", st.le_ns[k]);
		printf("], \"cumulative\": [");
		for (size_t k = 0; k < st.n_le; k++)
			printf("%s%llu", k ? ", " : "", st.le_count[k]);
		printf("], \"count\": %llu, \"sum_ns\": %llu}", st.latency_count, st.latency_sum_ns);
		/* the runs by batch size, as the daemon counts them (size 1: a graph run alone) */
		printf(", \"batch_size\": {");
		each_line(buf, "batch_size ", print_batch_size, &pr);
		pr.first = 1;
		printf("}");
		printf(", \"pool\": ");
		json_string(stdout, st.pool, st.pool_len);
		printf(", \"loop\": ");
		json_string(stdout, st.loop, st.loop_len);
		printf(", \"kernels\": [");
	} else {
		printf("# HELP qgraph_graph_duration_seconds Total time of graphs run, from the request taken to its "
		       "completion.\n# TYPE qgraph_graph_duration_seconds histogram\n");
		for (size_t k = 0; k < st.n_le; k++)
			printf("qgraph_graph_duration_seconds_bucket{le=\"%llu.%09llu\"} %llu\n", st.le_ns[k] / 1000000000u,
			       st.le_ns[k] % 1000000000u, st.le_count[k]);
		printf("qgraph_graph_duration_seconds_bucket{le=\"+Inf\"} %llu\n"
		       "qgraph_graph_duration_seconds_sum %llu.%09llu\nqgraph_graph_duration_seconds_count %llu\n",
		       st.latency_count, st.latency_sum_ns / 1000000000u, st.latency_sum_ns % 1000000000u,
		       st.latency_count);
		if (each_line(buf, "batch_size ", NULL, NULL))
			printf("# HELP qgraph_batch_runs_total Runs on the pool by the graphs run as one (size 1: alone).\n"
			       "# TYPE qgraph_batch_runs_total counter\n");
		each_line(buf, "batch_size ", print_batch_size, &pr);
		pr.first = 1;
		if (each_line(buf, "kernel ", NULL, NULL))
			printf("# HELP qgraph_kernel_info The kernel chosen for each weight layout.\n"
			       "# TYPE qgraph_kernel_info gauge\n");
	}
	each_line(buf, "kernel ", print_kernel, &pr);
	/* sessions: each metric's series together, as the exposition format wants */
	size_t n_sessions = each_line(buf, "session ", NULL, NULL);
	if (format == STATS_JSON) {
		printf("], \"session\": [");
		pr.first = 1;
		each_line(buf, "session ", print_session, &pr);
	} else {
		for (pr.metric = 0; pr.metric < N_SESSION_METRICS && n_sessions; pr.metric++) {
			printf("# HELP %s %s\n# TYPE %s %s\n", session_metrics[pr.metric].metric,
			       session_metrics[pr.metric].help, session_metrics[pr.metric].metric,
			       session_metrics[pr.metric].type);
			each_line(buf, "session ", print_session, &pr);
		}
	}
	/* models: their pinned bytes and tensors */
	size_t n_models = each_line(buf, "model ", NULL, NULL);
	if (format == STATS_JSON) {
		printf("], \"models\": [");
		pr.first = 1;
		each_line(buf, "model ", print_model, &pr);
		printf("]}\n");
	} else {
		static const char *const help[2] = { "qgraph_model_bytes Pinned bytes of a loaded model's tensors.",
						     "qgraph_model_tensors Tensors of a loaded model." };
		for (pr.metric = 0; pr.metric < 2 && n_models; pr.metric++) {
			printf("# HELP %s\n# TYPE %.*s gauge\n", help[pr.metric], (int)strcspn(help[pr.metric], " "),
			       help[pr.metric]);
			each_line(buf, "model ", print_model, &pr);
		}
	}
	return bad || pr.bad ? -1 : 0;
}

int cmd_stats(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "all", no_argument, NULL, 'a' },
		{ "json", no_argument, NULL, 'j' },
		{ "prometheus", no_argument, NULL, 'p' },
		{ "help", no_argument, NULL, 'h' },
		{ 0 },
	};
	static char buf[1 << 20];	/* room for every session of a busy daemon */
	int format = STATS_SHORT, c;

	while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
		switch (c) {
		case 'a': format = STATS_TEXT; break;
		case 'j': format = STATS_JSON; break;
		case 'p': format = STATS_PROMETHEUS; break;
		case 'h':
			printf("Usage: qgraph-submit stats [--all | --json | --prometheus]\n"
			       "Print the daemon's sessions, memory, plans and kernels: a summary as \"key value\"\n"
			       "lines (sessions, pool used, weights stored, graphs run, the median latency),\n"
			       "every counter, session and kernel so (--all), one JSON object (--json), or the\n"
			       "Prometheus text format, metrics qgraph_* (--prometheus, e.g. for\n"
			       "node_exporter's textfile collector).\n");
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
