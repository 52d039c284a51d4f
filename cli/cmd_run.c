/* zeus run: placeholder, replaced below in this branch. */
#include "cli.h"
int cmd_run(int argc, char **argv) { (void)argc; (void)argv; cli_error("run", false, "not built yet"); return CLI_EXIT_FAIL; }
