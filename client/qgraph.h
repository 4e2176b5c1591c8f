/* qgraph.h - placeholder */
#ifndef QGRAPH_H
#define QGRAPH_H
int qgraph_version(void);
#endif
