/* placeholder, replaced in the monitor work */
#include "cli.h"
int cmd_monitor(int argc, char **argv) { (void)argc; (void)argv; return 0; }
