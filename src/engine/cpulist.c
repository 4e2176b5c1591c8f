/*
 * cpulist.c - parsing and writing CPU lists (see cpulist.h).
 */
#include "config.h"

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "cpulist.h"

/* One number at *P: digits only, below QG_CPU_MAX.  Advances *P. */
static int parse_num(const char **p, int *out)
{
	const char *s = *p;
	int v = 0;

	if (*s < '0' || *s > '9')
		return -EINVAL;
	for (; *s >= '0' && *s <= '9'; s++) {
		v = v * 10 + (*s - '0');	/* v < QG_CPU_MAX before this: no overflow */
		if (v >= QG_CPU_MAX)
			return -ERANGE;
	}
	*p = s;
	*out = v;
	return 0;
}

int qg_cpulist_parse(const char *s, int *cpus, int max, int *n)
{
	unsigned char seen[QG_CPU_MAX / 8];
	int count = 0, r;

	if (n)
		*n = 0;
	if (!s || !cpus || !n || max < 0)
		return -EINVAL;
	memset(seen, 0, sizeof seen);
	for (;;) {
		int a, b;
		if ((r = parse_num(&s, &a)))
			return r;
		b = a;
		if (*s == '-') {
			s++;
			if ((r = parse_num(&s, &b)))
				return r;
			if (b < a)
				return -EINVAL;
		}
		for (int c = a; c <= b; c++) {
			if (seen[c / 8] & (1u << (c % 8)))
				return -EINVAL;
			if (count == max)
				return -E2BIG;
			seen[c / 8] |= (unsigned char)(1u << (c % 8));
			cpus[count++] = c;
		}
		if (*s == '\0')
			break;
		if (*s++ != ',')
			return -EINVAL;
	}
	*n = count;
	return 0;
}

int qg_cpulist_format(const int *cpus, int n, char *buf, size_t size)
{
	size_t len = 0;

	if (!buf || size == 0 || n < 0 || (n && !cpus))
		return -EINVAL;
	buf[0] = '\0';
	for (int i = 0; i < n;) {
		int j = i;
		while (j + 1 < n && cpus[j + 1] == cpus[j] + 1)
			j++;
		int w = j == i ? snprintf(buf + len, size - len, "%s%d", i ? "," : "", cpus[i])
			       : snprintf(buf + len, size - len, "%s%d-%d", i ? "," : "", cpus[i], cpus[j]);
		if (w < 0 || (size_t)w >= size - len)
			return -ENOSPC;
		len += (size_t)w;
		i = j + 1;
	}
	return (int)len;
}
