/* placeholder CLI */
#include <stdio.h>
#include <zeus.h>
int main(void) { printf("zeus %s\n", zeus_version()); return 0; }
