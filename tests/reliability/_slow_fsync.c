/* A disk whose fsync takes as long as a file says: LD_PRELOAD it, name the file in SLOW_FSYNC_FILE.
 *
 * fsync and fdatasync sleep for the number of milliseconds the file holds (read at every call, so a test can
 * change the disk's speed while the process runs; no file, or no number in it: 0) and then return success,
 * without asking the real disk: how slow a commit is then depends on the file alone, never on the machine's
 * disk of the moment. Every call is counted: slow_fsync_calls() says how many so far (the bench reads it through
 * ctypes to check that a store's commits really went through the shim). Built with `cc` by
 * tests/reliability/test_slow_disk.py at test time, and by bench/shim.py for the bench.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static unsigned long calls;

unsigned long slow_fsync_calls(void) {
    return __atomic_load_n(&calls, __ATOMIC_RELAXED);
}

static long delay_ms(void) {
    const char *name = getenv("SLOW_FSYNC_FILE");
    if (name == NULL) return 0;
    FILE *file = fopen(name, "r");
    if (file == NULL) return 0;
    long ms = 0;
    if (fscanf(file, "%ld", &ms) != 1) ms = 0;
    fclose(file);
    return ms;
}

static int slow_sync(void) {
    int saved = errno;
    __atomic_fetch_add(&calls, 1, __ATOMIC_RELAXED);
    long ms = delay_ms();
    struct timespec left = {ms / 1000, (ms % 1000) * 1000000L};
    while (ms > 0 && nanosleep(&left, &left) == -1 && errno == EINTR) {
    }
    errno = saved;
    return 0;
}

int fsync(int fd) {
    (void)fd;
    return slow_sync();
}

int fdatasync(int fd) {
    (void)fd;
    return slow_sync();
}
