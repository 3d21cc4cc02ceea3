/* A shared library that records being loaded: its constructor runs inside dlopen, before
 * any symbol is looked up, and creates the file named by FERRY_TEST_LOADED_MARKER. It is
 * no plugin (it exports no iggy_sink_* symbol): the tests use it to prove that a library
 * outside the plugin directories is never opened, and that one inside them is. */
#include <stdio.h>
#include <stdlib.h>

__attribute__((constructor)) static void ferry_test_loaded(void) {
    const char *path = getenv("FERRY_TEST_LOADED_MARKER");
    if (path == NULL || path[0] == '\0') {
        return;
    }
    FILE *f = fopen(path, "w");
    if (f != NULL) {
        fputs("loaded\n", f);
        fclose(f);
    }
}
