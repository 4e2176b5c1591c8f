#include "config.h"
#include "qgraph.h"
__attribute__((visibility("default"))) int qgraph_version(void) { return 0; }
