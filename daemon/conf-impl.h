/*
 * conf-impl.h - what conf.c shares with conf-file.c and conf-reload.c
 * alone: the table of settings, its lookup and its setter.
 */
#ifndef QGD_CONF_IMPL_H
#define QGD_CONF_IMPL_H

#include <stddef.h>
#include <stdint.h>

#include "conf.h"

enum kind {
	K_FLAG,		/* int: yes/no */
	K_PATH,		/* the socket path */
	K_SIZE,		/* uint64_t with a K/M/G suffix */
	K_U32,		/* uint32_t in [lo, hi] */
	K_INT,		/* int in [lo, hi] */
	K_LEVEL,	/* int: a log level's name */
	K_MODE,		/* unsigned: octal file mode */
	K_USER,		/* the user to run as */
	K_GROUP,	/* the group to run as */
	K_USERS,	/* allow-users */
	K_GROUPS,	/* allow-groups */
	K_SHARE,	/* share-groups */
	K_CPUS,		/* a CPU list */
	K_STATS_GROUP,	/* stats-group */
	K_FILE,		/* a file's path, in a char[PATH_MAX] */
};

struct setting {
	const char *name;
	int short_opt;
	enum kind kind;
	size_t off;		/* in struct qgd_config */
	uint64_t lo, hi;
	int cli_only;		/* no key in the file */
};

/* How many settings there are (conf.c checks it against its table). */
#define QGD_CONF_N_SETTINGS 39
/* Every setting, in the order --help and --dump-config show them. */
extern const struct setting qgd_conf_settings[QGD_CONF_N_SETTINGS];

/* The setting called NAME, or NULL. */
const struct setting *qgd_conf_find(const char *name);
/* Set ST in CFG from the text V (checked as the command line and the file check it).  0 or -EINVAL with ERR set. */
int qgd_conf_set_one(struct qgd_config *cfg, const struct setting *st, const char *v, char *err, size_t errlen);
/* FMT into ERR (ERRLEN bytes, may be NULL); -EINVAL. */
int qgd_conf_fail(char *err, size_t errlen, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

#endif /* QGD_CONF_IMPL_H */
