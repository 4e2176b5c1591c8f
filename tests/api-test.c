#include "tap.h"
int main(void) { tap_skip("not written yet"); return tap_done(); }
