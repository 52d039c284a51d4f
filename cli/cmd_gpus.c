/* placeholder, replaced in the device work */
#include "cli.h"
int cmd_gpus(int argc, char **argv) { (void)argc; (void)argv; return 0; }
