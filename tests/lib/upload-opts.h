/*
 * upload-opts.h - UPLOAD_OPTS(.field = value, ...): a pointer to a
 * struct qgraph_upload_opts of this version's size with those fields set
 * (the rest zero), for a test's call of qgraph_weights_upload().
 */
#ifndef QG_TEST_UPLOAD_OPTS_H
#define QG_TEST_UPLOAD_OPTS_H

#include "qgraph.h"

#define UPLOAD_OPTS(...) (&(struct qgraph_upload_opts){ .size = sizeof(struct qgraph_upload_opts), __VA_ARGS__ })

#endif /* QG_TEST_UPLOAD_OPTS_H */
