#include "cli.h"
int nf_cmd_verify(int argc, char ** argv) { (void) argc; (void) argv; fprintf(stderr, "verify: not yet\n"); return 2; }
