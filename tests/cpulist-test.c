/*
 * cpulist-test.c - CPU lists: good lists, hostile ones (overflow, ranges,
 * junk), round trips through qg_cpulist_format, and random mutations of
 * good lists checked against a second, naive reading of the grammar.
 */
#include "config.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cpulist.h"
#include "tap.h"

static int cpus[QG_CPU_MAX];

static int parse(const char *s, int *n)
{
	return qg_cpulist_parse(s, cpus, QG_CPU_MAX, n);
}

static void test_good(void)
{
	static const struct {
		const char *s;
		int n;
		int first, last;
	} good[] = {
		{ "0", 1, 0, 0 },
		{ "0-3,8,10-11", 7, 0, 11 },
		{ "7,3,5", 3, 7, 5 },
		{ "1023", 1, 1023, 1023 },
		{ "0-1023", 1024, 0, 1023 },
		{ "5-5", 1, 5, 5 },
		{ "007", 1, 7, 7 },
	};
	for (size_t i = 0; i < sizeof good / sizeof good[0]; i++) {
		int n = -1, r = parse(good[i].s, &n);
		tap_ok(r == 0 && n == good[i].n && cpus[0] == good[i].first && cpus[n - 1] == good[i].last,
		       "\"%s\": %d CPUs, %d .. %d", good[i].s, n, n > 0 ? cpus[0] : -1, n > 0 ? cpus[n - 1] : -1);
	}
	int n;
	parse("0-3,8,10-11", &n);
	static const int want[] = { 0, 1, 2, 3, 8, 10, 11 };
	tap_ok(n == 7 && memcmp(cpus, want, sizeof want) == 0, "the CPUs in the order written");
}

static void test_bad(void)
{
	static const struct {
		const char *s;
		int err;
	} bad[] = {
		{ "", -EINVAL },	{ ",", -EINVAL },	{ "1,", -EINVAL },	  { ",1", -EINVAL },
		{ "1,,2", -EINVAL },	{ "-1", -EINVAL },	{ "1-", -EINVAL },	  { "3-1", -EINVAL },
		{ "1-2-3", -EINVAL },	{ " 1", -EINVAL },	{ "1 ", -EINVAL },	  { "+1", -EINVAL },
		{ "0x1", -EINVAL },	{ "a", -EINVAL },	{ "1,1", -EINVAL },	  { "0-3,2", -EINVAL },
		{ "1024", -ERANGE },	{ "0-1024", -ERANGE },	{ "99999999999999999999", -ERANGE },
		{ "4294967296", -ERANGE }, { "18446744073709551617", -ERANGE }, { "1;2", -EINVAL },
	};
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		int n = 42, r = parse(bad[i].s, &n);
		tap_ok(r == bad[i].err && n == 0, "\"%s\" refused: %d (want %d)", bad[i].s, r, bad[i].err);
	}
	int n = 42, small[4];
	tap_ok(qg_cpulist_parse("0-4", small, 4, &n) == -E2BIG && n == 0, "more CPUs than room: -E2BIG");
	tap_ok(qg_cpulist_parse(NULL, small, 4, &n) == -EINVAL, "NULL list: -EINVAL");
	char big[5000];
	memset(big, '1', sizeof big - 1);
	big[sizeof big - 1] = '\0';
	tap_ok(parse(big, &n) == -ERANGE, "4999 digits: -ERANGE");
}

static void test_format(void)
{
	char buf[64];
	int n;

	parse("10-11,0-3,8", &n);
	tap_ok(qg_cpulist_format(cpus, n, buf, sizeof buf) > 0 && strcmp(buf, "10-11,0-3,8") == 0,
	       "format gives the list back: %s", buf);
	tap_ok(qg_cpulist_format(cpus, n, buf, 6) == -ENOSPC && strlen(buf) < 6, "a short buffer: -ENOSPC, terminated");
	tap_ok(qg_cpulist_format(cpus, 0, buf, sizeof buf) == 0 && buf[0] == '\0', "no CPUs: an empty string");
}

/* The grammar read a second way: split on ',', each piece "N" or "N-M". */
static int naive(const char *s, int *out, int *n)
{
	char copy[256], *save = NULL;
	int seen[QG_CPU_MAX] = { 0 }, count = 0;

	*n = 0;
	if (strlen(s) >= sizeof copy || !*s || s[0] == ',' || s[strlen(s) - 1] == ',' || strstr(s, ",,"))
		return -1;
	strcpy(copy, s);
	for (char *tok = strtok_r(copy, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
		char *dash = strchr(tok, '-');
		long a, b;
		if (dash)
			*dash = '\0';
		char *p = tok;
		if (!*p || strspn(p, "0123456789") != strlen(p) || strlen(p) > 6)
			return -1;
		a = b = strtol(p, NULL, 10);
		if (dash) {
			p = dash + 1;
			if (!*p || strspn(p, "0123456789") != strlen(p) || strlen(p) > 6)
				return -1;
			b = strtol(p, NULL, 10);
		}
		if (a >= QG_CPU_MAX || b >= QG_CPU_MAX || b < a)
			return -1;
		for (long c = a; c <= b; c++) {
			if (seen[c]++)
				return -1;
			out[count++] = (int)c;
		}
	}
	*n = count;
	return 0;
}

static void test_mutations(void)
{
	struct tap_rng rng = { 0x243f6a8885a308d3ull };
	static const char alphabet[] = "0123456789,-- x";
	int rounds = 20000 * (tap_scale() ? tap_scale() : 1), agree = 0, accepted = 0;
	static int ref[QG_CPU_MAX];

	for (int i = 0; i < rounds; i++) {
		char s[40];
		/* a good list first: a few items below 64 */
		int len = 0, items = 1 + (int)(tap_rand(&rng) % 4);
		for (int k = 0; k < items; k++) {
			int a = (int)(tap_rand(&rng) % 64);
			len += snprintf(s + len, sizeof s - (size_t)len, "%s%d", k ? "," : "", a);
			if (tap_rand(&rng) % 2)
				len += snprintf(s + len, sizeof s - (size_t)len, "-%d", a + (int)(tap_rand(&rng) % 4));
		}
		/* then a few mutations: replace, insert, delete, truncate */
		int muts = (int)(tap_rand(&rng) % 3);
		for (int m = 0; m < muts && len > 0; m++) {
			int at = (int)(tap_rand(&rng) % (unsigned)len);
			char c = alphabet[tap_rand(&rng) % (sizeof alphabet - 1)];
			switch (tap_rand(&rng) % 4) {
			case 0: s[at] = c; break;
			case 1:
				if (len < (int)sizeof s - 1) {
					memmove(s + at + 1, s + at, (size_t)(len - at + 1));
					s[at] = c;
					len++;
				}
				break;
			case 2: memmove(s + at, s + at + 1, (size_t)(len - at)); len--; break;
			default: s[at] = '\0'; len = at; break;
			}
		}
		int n1, n2, r1 = parse(s, &n1), r2 = naive(s, ref, &n2);
		int same = (r1 == 0) == (r2 == 0) && (r1 != 0 || (n1 == n2 && !memcmp(cpus, ref, (size_t)n1 * sizeof *ref)));
		agree += same;
		accepted += r1 == 0;
		if (!same)
			tap_diag("disagree on \"%s\": parser %d (%d CPUs), naive %d (%d)", s, r1, n1, r2, n2);
	}
	tap_ok(agree == rounds, "%d mutated lists: the parser agrees with a naive reading (%d accepted)", rounds,
	       accepted);
}

int main(void)
{
	test_good();
	test_bad();
	test_format();
	test_mutations();
	return tap_done();
}
