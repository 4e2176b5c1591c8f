/*
 * report.h - what the daemon tells about itself (report.c): the kernel
 * choices and the stats, as protobuf messages.
 */
#ifndef QGD_REPORT_H
#define QGD_REPORT_H

#include <stddef.h>
#include <stdint.h>

#include "kernels.h"
#include "qgraph.pb-c.h"

struct qgd_session;

/* The kernel chosen for each layout, for a Welcome or a Stats (KC holds them, KCP points at them).  Returns how many. */
size_t qgd_kernel_choices(Qgraph__KernelChoice kc[QG_LAYOUT_COUNT], Qgraph__KernelChoice *kcp[QG_LAYOUT_COUNT]);
/*
 * Answer S's stats request RID (SR may be NULL): the daemon's counters,
 * and the sessions S may see (all of them with SR->all_sessions, else its
 * own alone) and the models, from SR->first_session and SR->first_model
 * on, as many as one completion holds; its MORE tells the client to ask
 * again from NEXT_SESSION and NEXT_MODEL.
 */
void qgd_report_stats(struct qgd_session *s, uint64_t rid, const Qgraph__StatsRequest *sr);

#endif /* QGD_REPORT_H */
