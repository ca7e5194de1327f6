#include "cli.h"
int nf_cmd_bench(int argc, char ** argv) { (void) argc; (void) argv; fprintf(stderr, "bench: not yet\n"); return 2; }
